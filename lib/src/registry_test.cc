#include "shmcoord/registry.h"

#include <fiu-control.h>
#include <fiu.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <set>

#include "names.h"
#include "shmcoord/cleanup.h"
#include "shmcoord/tracker.h"
#include "sys.h"
#include "test_util.h"

namespace shmcoord {
namespace {

using testing::ShmTest;
using testing::shm_names_with;
using namespace std::chrono_literals;

JobSpec job(std::string key, int rank, int lws, std::vector<LocalDir> dirs = {}) {
  JobSpec s;
  s.job_key = std::move(key);
  s.local_rank = rank;
  s.local_world_size = lws;
  s.dirs = std::move(dirs);
  s.timeout = 5000ms;
  return s;
}

int open_fds() {
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)e;
    ++n;
  }
  return n;
}

void make_segment(const std::string& name, std::size_t size) {
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(fd, 0) << name;
  if (size) ASSERT_EQ(::ftruncate(fd, size), 0);
  ::close(fd);
}

class RegistryTest : public ShmTest {};

TEST_F(RegistryTest, SingleRankJobGetsLowestPrefixAndReleaseFreesIt) {
  auto reg = Registry::open(ns);
  ASSERT_TRUE(reg) << reg.error().to_string();
  auto a = reg->acquire(job("a", 0, 1));
  ASSERT_TRUE(a) << a.error().to_string();
  EXPECT_EQ(a->prefix, 0);
  auto b = reg->acquire(job("b", 0, 1));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->prefix, 1);
  ASSERT_TRUE(reg->release(*a));
  auto c = reg->acquire(job("c", 0, 1));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->prefix, 0) << "a released prefix is reused: prefixes never climb";
  ASSERT_TRUE(reg->release(*b));
  ASSERT_TRUE(reg->release(*c));
  EXPECT_TRUE(reg->release(*c)) << "release is idempotent";
}

TEST_F(RegistryTest, RanksOfOneJobAllGetTheSamePrefix) {
  constexpr int kRanks = 4;
  testing::ShmTest::Gate done;
  std::vector<testing::ChildProc*> kids;
  for (int r = 0; r < kRanks; ++r) {
    kids.push_back(&fork_child([&, r](int out) {
      auto reg = Registry::open(ns);
      if (!reg) return 2;
      auto l = reg->acquire(job("job", r, kRanks, {{"/data/x", true}}));
      report(out, l ? std::to_string(l->prefix) : l.error().to_string());
      done.wait_go();
      return l && reg->release(*l) ? 0 : 1;
    }));
  }
  std::set<std::string> got;
  for (auto* k : kids) got.insert(read_line(*k));
  done.open_all();
  for (auto* k : kids) EXPECT_EQ(wait_child(*k), 0);
  EXPECT_EQ(got, std::set<std::string>{"0"});
  EXPECT_TRUE(shm_names_with(ns.root + "000000").empty()) << "the last release removes the job's segments";
}

// The original walked, then created: two jobs starting together picked the same p.
TEST_F(RegistryTest, TwoJobsRacing200TimesNeverShareAPrefix) {
  for (int i = 0; i < 200; ++i) {
    testing::ShmTest::Gate hold;
    std::vector<testing::ChildProc*> kids;
    for (int j = 0; j < 2; ++j) {
      for (int r = 0; r < 2; ++r) {
        kids.push_back(&fork_child([&, i, j, r](int out) {
          auto reg = Registry::open(ns);
          if (!reg) {
            report(out, reg.error().to_string());
            return 2;
          }
          auto l = reg->acquire(job("race" + std::to_string(i) + "-" + std::to_string(j), r, 2,
                                    {{"/data/" + std::to_string(j), true}}));
          report(out, l ? std::to_string(l->prefix) : l.error().to_string());
          hold.wait_go();
          return l && reg->release(*l) ? 0 : 1;
        }));
      }
    }
    std::string p[4];
    for (int k = 0; k < 4; ++k) p[k] = read_line(*kids[k]);
    hold.open_all();
    for (auto* k : kids) ASSERT_EQ(wait_child(*k), 0);
    ASSERT_EQ(p[0], p[1]) << "ranks of job 0 disagree, iteration " << i;
    ASSERT_EQ(p[2], p[3]) << "ranks of job 1 disagree, iteration " << i;
    ASSERT_NE(p[0], p[2]) << "two live jobs share prefix " << p[0] << ", iteration " << i;
    children_.clear();
  }
}

TEST_F(RegistryTest, MissingLocalWorldSizeIsAnErrorNotNLeaders) {
  auto reg = Registry::open(ns);
  ASSERT_TRUE(reg);
  auto l = reg->acquire(job("j", 0, 0));
  ASSERT_FALSE(l);
  EXPECT_EQ(l.error().code, Code::kInvalidArgument);
  EXPECT_NE(l.error().message.find("local world size is not set"), std::string::npos) << l.error().message;
}

TEST_F(RegistryTest, DuplicateDirInOneJobIsRefused) {
  auto reg = Registry::open(ns);
  auto l = reg->acquire(job("j", 0, 1, {{"/d", false}, {"/d/", false}}));
  ASSERT_FALSE(l);
  EXPECT_EQ(l.error().code, Code::kInvalidArgument);
  EXPECT_NE(l.error().message.find("Reused local directory"), std::string::npos);
}

// The original: a non-leader attached another job's record and failed alone.
TEST_F(RegistryTest, RanksDisagreeingOnDirsAllFailWithTheSameError) {
  auto& r0 = fork_child([&](int out) {
    auto reg = Registry::open(ns);
    auto l = reg->acquire(job("j", 0, 2, {{"/a", true}}));
    report(out, l ? "ok" : std::string(code_name(l.error().code)) + ":" + l.error().message);
    return 0;
  });
  auto& r1 = fork_child([&](int out) {
    ::usleep(50000);
    auto reg = Registry::open(ns);
    auto l = reg->acquire(job("j", 1, 2, {{"/b", true}}));
    report(out, l ? "ok" : std::string(code_name(l.error().code)) + ":" + l.error().message);
    return 0;
  });
  std::string a = read_line(r0), b = read_line(r1);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.rfind("mismatch:ranks disagree on local dirs", 0), 0u) << a;
  wait_child(r0);
  wait_child(r1);
}

TEST_F(RegistryTest, LocalDirWithRemoteHeldByLiveJobIsRefusedNamingDirAndHolder) {
  auto reg = Registry::open(ns);
  auto a = reg->acquire(job("first", 0, 1, {{"/data/shared", true}}));
  ASSERT_TRUE(a);
  auto b = reg->acquire(job("second", 0, 1, {{"/data/shared/", false}}));
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().code, Code::kInUse);
  EXPECT_NE(b.error().message.find("'/data/shared'"), std::string::npos) << b.error().message;
  EXPECT_NE(b.error().message.find("job 'first'"), std::string::npos) << b.error().message;
  EXPECT_NE(b.error().message.find("pid " + std::to_string(::getpid())), std::string::npos) << b.error().message;
  ASSERT_TRUE(reg->release(*a));
}

TEST_F(RegistryTest, LocalDirWithoutRemoteMayBeShared) {
  auto reg = Registry::open(ns);
  auto a = reg->acquire(job("first", 0, 1, {{"/data/local", false}}));
  auto b = reg->acquire(job("second", 0, 1, {{"/data/local", false}}));
  ASSERT_TRUE(a);
  ASSERT_TRUE(b) << b.error().to_string();
  EXPECT_NE(a->prefix, b->prefix);
}

// The original: a whole job killed at once leaked everything, and a restart
// with the same local dir failed "Reused local directory" until someone cleaned.
TEST_F(RegistryTest, KilledJobNeverBlocksARestartWithTheSameDir) {
  testing::ShmTest::Gate never;
  auto& k = fork_child([&](int out) {
    auto reg = Registry::open(ns);
    auto l = reg->acquire(job("old", 0, 1, {{"/data/ds", true}}));
    if (l) make_segment(ns.shm_name(Namespace::prefix_suffix(l->prefix, "shard_states")), 4096);
    report(out, l ? "held" : l.error().to_string());
    never.wait_go();
    return 0;
  });
  ASSERT_EQ(read_line(k), "held");
  kill_child(k);
  auto reg = Registry::open(ns);
  auto l = reg->acquire(job("new", 0, 1, {{"/data/ds", true}}));
  ASSERT_TRUE(l) << l.error().to_string();
  EXPECT_EQ(l->prefix, 0);
  EXPECT_TRUE(shm_names_with(ns.root + "000000_shard_states").empty()) << "the dead job's segment was removed before reuse";
}

// The original skipped every prefix with a lock file, and never removed them.
TEST_F(RegistryTest, LeftoverLockFilesNeitherSkipNorClimbPrefixes) {
  for (int p = 0; p < 5; ++p) {
    std::string path = ns.lock_path(Namespace::prefix_suffix(p, "barrier_filelock")).string();
    ::close(::open(path.c_str(), O_CREAT | O_WRONLY, 0600));
  }
  auto reg = Registry::open(ns);
  auto l = reg->acquire(job("j", 0, 1));
  ASSERT_TRUE(l);
  EXPECT_EQ(l->prefix, 0);
  EXPECT_FALSE(std::filesystem::exists(ns.lock_path(Namespace::prefix_suffix(0, "barrier_filelock"))));
}

// The original: "cannot mmap an empty file" blocked every lookup.
TEST_F(RegistryTest, ZeroLengthOrGarbageRegistryIsRebuilt) {
  make_segment(ns.shm_name("registry"), 0);
  {
    auto reg = Registry::open(ns);
    ASSERT_TRUE(reg) << reg.error().to_string();
    EXPECT_TRUE(reg->acquire(job("j", 0, 1)));
  }
  ::shm_unlink(ns.shm_name("registry").c_str());
  make_segment(ns.shm_name("registry"), 12345);
  auto reg = Registry::open(ns);
  ASSERT_TRUE(reg) << reg.error().to_string();
  EXPECT_TRUE(reg->acquire(job("j", 0, 1)));
}

TEST_F(RegistryTest, ZeroLengthPrefixSegmentsDoNotBlockAcquire) {
  make_segment(ns.shm_name(Namespace::prefix_suffix(0, "locals")), 0);
  make_segment(ns.shm_name(Namespace::prefix_suffix(3, "locals")), 0);
  auto reg = Registry::open(ns);
  auto l = reg->acquire(job("j", 0, 1, {{"/x", true}}));
  ASSERT_TRUE(l) << l.error().to_string();
  EXPECT_EQ(l->prefix, 0);
}

// The original kept every attach's fds: 50 stale prefixes cost ~900 fds.
TEST_F(RegistryTest, OpenFdsStayConstantWhateverTheNumberOfPrefixes) {
  auto reg = Registry::open(ns);
  std::vector<Lease> held;
  for (int i = 0; i < 100; ++i) {
    make_segment(ns.shm_name(Namespace::prefix_suffix(200 + i % 50, "stale" + std::to_string(i))), 0);
  }
  int before = open_fds();
  for (int i = 0; i < 100; ++i) {
    auto l = reg->acquire(job("j" + std::to_string(i), 0, 1, {{"/d" + std::to_string(i), true}}));
    ASSERT_TRUE(l) << l.error().to_string();
    held.push_back(*l);
  }
  EXPECT_EQ(open_fds(), before);
  for (auto& l : held) ASSERT_TRUE(reg->release(l));
}

TEST_F(RegistryTest, RankThatDiesBeforeOthersJoinFailsTheWholeJobCleanly) {
  auto& r0 = fork_child([&](int out) {
    auto reg = Registry::open(ns);
    auto l = reg->acquire(job("j", 0, 3));
    report(out, l ? "ok" : std::string(code_name(l.error().code)) + ":" + l.error().message);
    return 0;
  });
  auto& r1 = fork_child([&](int) {
    auto reg = Registry::open(ns);
    auto s = job("j", 1, 3);
    s.timeout = 200ms;  // gives up first; its process then dies (exit)
    (void)reg->acquire(s);
    ::raise(SIGKILL);
    return 0;
  });
  wait_child(r1);
  std::string a = read_line(r0);
  EXPECT_TRUE(a.rfind("timeout:", 0) == 0 || a.rfind("broken:", 0) == 0) << a;
  wait_child(r0);
}

TEST_F(RegistryTest, RanksThatNeverJoinTimeOutWithTheMissingRanksNamed) {
  auto reg = Registry::open(ns);
  auto s = job("j", 0, 3);
  s.timeout = 300ms;
  auto t0 = std::chrono::steady_clock::now();
  auto l = reg->acquire(s);
  auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(l);
  EXPECT_EQ(l.error().code, Code::kTimeout);
  EXPECT_NE(l.error().message.find("local ranks [1,2]"), std::string::npos) << l.error().message;
  EXPECT_LT(took, 1500ms);
}

#ifdef SHMCOORD_FAILPOINTS
TEST_F(RegistryTest, InjectedEaccesAtShmOpenIsAPermissionErrorNotACrash) {
  fiu_init(0);
  fiu_enable("shm/registry/open", 1, reinterpret_cast<void*>(EACCES), 0);
  fiu_enable("shm/registry/create", 1, reinterpret_cast<void*>(EACCES), 0);
  auto reg = Registry::open(ns);
  fiu_disable("shm/registry/open");
  fiu_disable("shm/registry/create");
  ASSERT_FALSE(reg);
  EXPECT_EQ(reg.error().code, Code::kPermission);
  EXPECT_EQ(reg.error().sys_errno, EACCES);
  EXPECT_NE(reg.error().message.find("shm_open(" + ns.shm_name("registry") + ")"), std::string::npos);
}

// A claim interrupted half-way (writer killed holding the lock) is never visible.
TEST_F(RegistryTest, ClaimHalfWrittenByAKilledWriterIsDiscarded) {
  auto& k = fork_child([&](int) {
    fiu_init(0);
    fiu_enable("crash/registry/claim-half-written", 1, nullptr, 0);
    auto reg = Registry::open(ns);
    (void)reg->acquire(job("dead", 0, 1, {{"/d", true}}));
    return 0;
  });
  EXPECT_EQ(wait_child(k), 128 + SIGKILL);
  auto reg = Registry::open(ns);
  auto l = reg->acquire(job("alive", 0, 1, {{"/d", true}}));
  ASSERT_TRUE(l) << l.error().to_string();
  EXPECT_EQ(l->prefix, 0);
  auto snap = reg->snapshot();
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->size(), 1u);
  EXPECT_EQ((*snap)[0].job_key, "alive");
}

// Death between create and size left a zero-length segment in the original.
TEST_F(RegistryTest, CreatorKilledBetweenCreateAndSizeDoesNotBlockOthers) {
  auto& k = fork_child([&](int) {
    fiu_init(0);
    fiu_enable("crash/registry/after-create", 1, nullptr, 0);
    (void)Registry::open(ns);
    return 0;
  });
  EXPECT_EQ(wait_child(k), 128 + SIGKILL);
  auto reg = Registry::open(ns);
  ASSERT_TRUE(reg) << reg.error().to_string();
  EXPECT_TRUE(reg->acquire(job("j", 0, 1)));
}
#endif

// The original: a cleanup while job A was live let B reuse A's prefix, and A's
// exit handler then unlinked B's live segment by name.
TEST_F(RegistryTest, OldJobsReleaseNeverRemovesANewJobsSegment) {
  auto reg = Registry::open(ns);
  auto a = reg->acquire(job("a", 0, 1));
  ASSERT_TRUE(a);
  auto rep = clean_stale(ns);
  ASSERT_TRUE(rep);
  auto b = reg->acquire(job("b", 0, 1));
  ASSERT_TRUE(b);
  EXPECT_NE(a->prefix, b->prefix) << "cleanup must not free a live job's prefix";
  std::string b_seg = ns.shm_name(Namespace::prefix_suffix(b->prefix, "epoch_data"));
  make_segment(b_seg, 64);
  ASSERT_TRUE(reg->release(*a));
  EXPECT_FALSE(shm_names_with(b_seg.substr(1)).empty());
  ASSERT_TRUE(reg->release(*b));
}

// The original's per-process resource tracker unlinked a killed rank's segments
// while the rest of the job still used them.
TEST_F(RegistryTest, TrackerOfAKilledRankKeepsSegmentsWhileTheJobLivesThenFreesThem) {
  testing::ShmTest::Gate hold;
  std::vector<testing::ChildProc*> kids;
  for (int r = 0; r < 2; ++r) {
    kids.push_back(&fork_child([&, r](int out) {
      auto tracker = ResourceTracker::start(ns);
      if (!tracker) return 3;
      auto reg = Registry::open(ns);
      auto l = reg->acquire(job("j", r, 2));
      if (l && r == 0) make_segment(ns.shm_name(Namespace::prefix_suffix(l->prefix, "shard_states")), 64);
      report(out, l ? "held" : l.error().to_string());
      hold.wait_go();
      return 0;
    }));
  }
  ASSERT_EQ(read_line(*kids[0]), "held");
  ASSERT_EQ(read_line(*kids[1]), "held");
  const std::string seg = ns.root + "000000_shard_states";
  kill_child(*kids[0]);
  ::usleep(300000);  // the tracker reaps within milliseconds
  EXPECT_FALSE(shm_names_with(seg).empty()) << "rank 1 still uses the job's segment";
  kill_child(*kids[1]);
  for (int i = 0; i < 100 && !shm_names_with(seg).empty(); ++i) ::usleep(20000);
  EXPECT_TRUE(shm_names_with(seg).empty()) << "the last rank's tracker frees the job's segments";
  auto reg = Registry::open(ns);
  auto snap = reg->snapshot();
  ASSERT_TRUE(snap);
  EXPECT_TRUE(snap->empty());
}

// The original: ranks with different TMPDIR used different lock files and lost
// mutual exclusion. Our init lock lives in /dev/shm beside the registry.
TEST_F(RegistryTest, RanksWithDifferentLockDirsStillNeverShareAPrefix) {
  char tmpl[] = "/tmp/shmct-lock2-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  Namespace other = ns;
  other.lock_dir = tmpl;
  for (int i = 0; i < 50; ++i) {
    ::shm_unlink(ns.shm_name("registry").c_str());  // every round races on creating it
    testing::ShmTest::Gate hold;
    std::vector<testing::ChildProc*> kids;
    for (int j = 0; j < 2; ++j) {
      kids.push_back(&fork_child([&, i, j](int out) {
        auto reg = Registry::open(j == 0 ? ns : other);
        auto l = reg ? reg->acquire(job("t" + std::to_string(i) + "-" + std::to_string(j), 0, 1)) : std::unexpected(reg.error());
        report(out, l ? std::to_string(l->prefix) : l.error().to_string());
        hold.wait_go();
        return 0;
      }));
    }
    std::string a = read_line(*kids[0]), b = read_line(*kids[1]);
    hold.open_all();
    for (auto* k : kids) wait_child(*k);
    ASSERT_NE(a, b) << "iteration " << i;
    ASSERT_TRUE(a == "0" || a == "1") << a;
    children_.clear();
  }
  std::filesystem::remove_all(tmpl);
}

// The original skipped any prefix with a lock file before checking for
// conflicts, so a live job that had used its barrier became invisible.
TEST_F(RegistryTest, LockFilesNeverHideALiveJobFromTheConflictCheck) {
  auto reg = Registry::open(ns);
  auto a = reg->acquire(job("a", 0, 1, {{"/data/x", true}}));
  ASSERT_TRUE(a);
  ::close(::open(ns.lock_path(Namespace::prefix_suffix(a->prefix, "barrier_filelock")).c_str(), O_CREAT | O_WRONLY, 0600));
  auto b = reg->acquire(job("b", 0, 1, {{"/data/x", true}}));
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().code, Code::kInUse);
}

// The original's walk stopped at the first gap and missed a live job above it.
TEST_F(RegistryTest, ALiveJobAboveAGapIsStillSeenByTheConflictCheck) {
  auto reg = Registry::open(ns);
  auto a = reg->acquire(job("a", 0, 1));
  auto b = reg->acquire(job("b", 0, 1));
  auto c = reg->acquire(job("c", 0, 1, {{"/data/high", true}}));
  ASSERT_TRUE(a && b && c);
  ASSERT_EQ(c->prefix, 2);
  ASSERT_TRUE(reg->release(*a));
  ASSERT_TRUE(reg->release(*b));  // prefixes 0 and 1 are now a gap below job c
  auto d = reg->acquire(job("d", 0, 1, {{"/data/high", true}}));
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, Code::kInUse);
  EXPECT_NE(d.error().message.find("prefix 2"), std::string::npos) << d.error().message;
}

}  // namespace
}  // namespace shmcoord
