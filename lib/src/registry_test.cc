#include "shmcoord/registry.h"

#include <fiu-control.h>
#include <fiu.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <optional>
#include <set>
#include <thread>

#include "lease.h"
#include "names.h"
#include "records.h"
#include "shmcoord/cleanup.h"
#include "shmcoord/failpoint.h"
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
  if (size) {
    ASSERT_EQ(::ftruncate(fd, size), 0);
  }
  ::close(fd);
}

class RegistryTest : public ShmTest {
 protected:
  // A run of job `key` that acquires, makes a shard_states segment under its
  // prefix and is SIGKILLed holding both; returns what it said it held.
  std::string dead_holder(const std::string& key) {
    testing::ShmTest::Gate never;
    auto& dead = fork_child([&](int out) {
      auto reg = Registry::open(ns);
      auto l = reg->acquire(job(key, 0, 1));
      if (l) make_segment(ns.shm_name(Namespace::prefix_suffix(l->prefix, "shard_states")), 64);
      report(out, l ? "held " + std::to_string(l->prefix) : l.error().to_string());
      never.wait_go();
      return 0;
    });
    std::string said = read_line(dead);
    kill_child(dead);
    return said;
  }
};

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
    forget_children();
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
// One fd (the process's lease) while anything is held, whatever the number of
// prefixes, and none once everything is released.
TEST_F(RegistryTest, OpenFdsStayConstantWhateverTheNumberOfPrefixes) {
  for (int i = 0; i < 100; ++i) {
    make_segment(ns.shm_name(Namespace::prefix_suffix(200 + i % 50, "stale" + std::to_string(i))), 0);
  }
  const int before = open_fds();
  auto reg = Registry::open(ns);
  ASSERT_TRUE(reg);
  EXPECT_EQ(open_fds(), before) << "a registry handle keeps no fd";
  std::vector<Lease> held;
  for (int i = 0; i < 100; ++i) {
    auto l = reg->acquire(job("j" + std::to_string(i), 0, 1, {{"/d" + std::to_string(i), true}}));
    ASSERT_TRUE(l) << l.error().to_string();
    held.push_back(*l);
    ASSERT_EQ(open_fds(), before + 1) << "after " << i + 1 << " prefixes";
  }
  for (auto& l : held) ASSERT_TRUE(reg->release(l));
  EXPECT_EQ(open_fds(), before) << "the lease goes with the last holding";
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
      report(out, std::to_string(tracker->pid()));
      report(out, l ? "held" : l.error().to_string());
      hold.wait_go();
      return 0;
    }));
  }
  const pid_t tracker0 = std::stoi(read_line(*kids[0]));
  ASSERT_EQ(read_line(*kids[0]), "held");
  ASSERT_GT(std::stoi(read_line(*kids[1])), 0);
  ASSERT_EQ(read_line(*kids[1]), "held");
  const std::string seg = ns.root + "000000_shard_states";
  auto tracker_id = identity_of(tracker0);
  ASSERT_TRUE(tracker_id) << tracker_id.error().to_string();
  kill_child(*kids[0]);
  // The tracker exits right after its reap: once it is gone (or a zombie), its
  // reap is over, and whatever it was going to remove is removed.
  for (int i = 0; i < 1000 && is_alive(*tracker_id); ++i) ::usleep(10000);
  ASSERT_FALSE(is_alive(*tracker_id)) << "rank 0's tracker never finished its reap";
  EXPECT_FALSE(shm_names_with(seg).empty()) << "rank 1 still uses the job's segment";
  kill_child(*kids[1]);
  for (int i = 0; i < 100 && !shm_names_with(seg).empty(); ++i) ::usleep(20000);
  EXPECT_TRUE(shm_names_with(seg).empty()) << "the last rank's tracker frees the job's segments";
  auto reg = Registry::open(ns);
  auto snap = reg->snapshot();
  ASSERT_TRUE(snap);
  EXPECT_TRUE(snap->empty());
}

#ifdef SHMCOORD_FAILPOINTS
// A killed rank's tracker reaps while another job's cleanup runs (the next
// job starting, a cron sweep). Whichever of the two finishes last must leave
// nothing: the cleanup keeps the leases file while the tracker holds a cell
// (and a tracker that takes its lease after the cleanup removed the file makes
// a new one), so the tracker, last out, removes what is left. Found by the
// crash-points scenario once the cleanup step started 2 ms sooner (a forked
// worker): 3 of 60 replays of trial 312 left the leases file and init lock.
pid_t g_rank_pid = 0;
std::string g_root;
// In the tracker (any process but the rank that started it): stop at this
// point, before taking a lease ("lease/open") or holding one ("mutex/lock",
// the registry lock its reap takes next).
int stop_in_tracker(const char* name, int*, void**, unsigned*) {
  static bool stopped = false;  // once: the point is passed again after the stop
  if (::getpid() == g_rank_pid || stopped) return 0;
  // lease/open is passed with the lease table's mutex held: it is not taken here.
  if (std::string_view(name) == "lease/open" || LeaseRef::current(g_root).lease_token != 0) {
    stopped = true;
    ::raise(SIGSTOP);
  }
  return 0;
}

TEST_F(RegistryTest, TrackerReapingBesideACleanupLeavesNothingOnceBothAreDone) {
  for (const char* point : {"mutex/lock", "lease/open"}) {
    SCOPED_TRACE(point);
    auto& rank = fork_child([&](int out) {
      fiu_init(0);
      g_rank_pid = ::getpid();
      g_root = ns.root;
      fiu_enable_external(point, 1, nullptr, 0,
                          &stop_in_tracker);  // before the tracker forks: it inherits this
      auto tracker = ResourceTracker::start(ns);
      if (!tracker) return 3;
      auto reg = Registry::open(ns);
      auto l = reg->acquire(job("j", 0, 1));
      report(out, std::to_string(tracker->pid()));
      report(out, l ? "held" : l.error().to_string());
      ::pause();
      return 0;
    });
    const pid_t tracker = std::stoi(read_line(rank));
    ASSERT_EQ(read_line(rank), "held");
    auto id = identity_of(tracker);
    ASSERT_TRUE(id) << id.error().to_string();
    const int tracker_fd = static_cast<int>(::syscall(SYS_pidfd_open, tracker, 0));
    ASSERT_GE(tracker_fd, 0);
    struct Killer {  // a failed assertion must not leave the tracker stopped
      int fd;
      ~Killer() {
        ::syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0);
        ::close(fd);
      }
    } killer{tracker_fd};
    kill_child(rank);
    // The kernel's own state of the tracker: stopped at the point.
    for (int i = 0; i < 20000 && liveness(*id) == Liveness::kAlive; ++i) ::usleep(1000);
    ASSERT_EQ(liveness(*id), Liveness::kStopped) << "the tracker never reached " << point;
    auto cleaned = clean_stale(ns);
    ASSERT_TRUE(cleaned) << cleaned.error().to_string();
    ASSERT_EQ(::syscall(SYS_pidfd_send_signal, tracker_fd, SIGCONT, nullptr, 0), 0);
    struct pollfd pfd {
      tracker_fd, POLLIN, 0
    };
    ASSERT_EQ(::poll(&pfd, 1, 20000), 1) << "the tracker never finished its reap";
    std::string left;
    for (const auto& n : shm_names_with(ns.root)) left += n + " ";
    EXPECT_EQ(left, "") << "left after the cleanup and the tracker:\n" << cleaned->to_string();
    forget_children();
  }
}
#endif

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
    forget_children();
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

// ---------------------------------------------------------------- two datasets
// default_job_key() is per launcher, so a train and a val dataset in one
// process share a key. The second acquire used to join the first's slot: with
// other dirs it poisoned it ("ranks disagree"), with equal dirs it returned the
// same prefix, and releasing one freed it under the other.
TEST_F(RegistryTest, TwoDatasetsWithDifferentDirsInOneProcessGetTheirOwnPrefixes) {
  testing::ShmTest::Gate hold;
  std::vector<testing::ChildProc*> kids;
  for (int r = 0; r < 2; ++r) {
    kids.push_back(&fork_child([&, r](int out) {
      auto reg = Registry::open(ns);
      auto train = reg->acquire(job("launcher", r, 2, {{"/data/train", true}}));
      auto val = train ? reg->acquire(job("launcher", r, 2, {{"/data/val", true}})) : train;
      if (!train || !val) {
        report(out, (train ? val : train).error().to_string());
        return 1;
      }
      report(out, std::to_string(train->prefix) + " " + std::to_string(val->prefix));
      hold.wait_go();
      return reg->release(*val) && reg->release(*train) ? 0 : 1;
    }));
  }
  EXPECT_EQ(read_line(*kids[0]), "0 1");
  EXPECT_EQ(read_line(*kids[1]), "0 1");
  auto reg = Registry::open(ns);
  auto snap = reg->snapshot();
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->size(), 2u);
  for (const auto& i : *snap) EXPECT_FALSE(i.poisoned) << i.reason;
  hold.open_all();
  for (auto* k : kids) EXPECT_EQ(wait_child(*k), 0);
}

TEST_F(RegistryTest, ReleasingOneOfTwoDatasetsWithEqualDirsKeepsTheOther) {
  auto reg = Registry::open(ns);
  auto a = reg->acquire(job("launcher", 0, 1, {{"/data/local", false}}));
  auto b = reg->acquire(job("launcher", 0, 1, {{"/data/local", false}}));
  ASSERT_TRUE(a && b);
  ASSERT_NE(a->prefix, b->prefix) << "two datasets never share a prefix";
  const std::string seg = ns.shm_name(Namespace::prefix_suffix(a->prefix, "shard_states"));
  make_segment(seg, 64);
  ASSERT_TRUE(reg->release(*b));
  EXPECT_FALSE(shm_names_with(seg.substr(1)).empty()) << "releasing the second dataset freed the first's prefix";
  auto snap = reg->snapshot();
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->size(), 1u);
  EXPECT_EQ((*snap)[0].prefix, a->prefix);
  EXPECT_TRUE((*snap)[0].live);
  ASSERT_TRUE(reg->release(*a));
  EXPECT_TRUE(shm_names_with(seg.substr(1)).empty());
}

TEST_F(RegistryTest, SecondDatasetOverTheSameRemoteDirIsRefusedNamingThisProcess) {
  auto reg = Registry::open(ns);
  auto a = reg->acquire(job("launcher", 0, 1, {{"/data/ds", true}}));
  ASSERT_TRUE(a);
  auto b = reg->acquire(job("launcher", 0, 1, {{"/data/ds", true}}));
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().code, Code::kInUse);
  EXPECT_NE(b.error().message.find("Reused local directory: '/data/ds'"), std::string::npos) << b.error().message;
  EXPECT_NE(b.error().message.find("this process"), std::string::npos) << b.error().message;
  auto snap = reg->snapshot();
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->size(), 1u);
  EXPECT_FALSE((*snap)[0].poisoned) << "the first dataset is untouched";
}

// ---------------------------------------------------------------- pid namespaces
// Liveness was pid + start time read from this /proc, so a job in another pid
// namespace sharing /dev/shm (containers with --ipc=host) was judged dead: its
// dir with a remote was granted to another job and cleanup removed its segment,
// the registry and the init lock.
TEST_F(RegistryTest, JobInAnotherPidNamespaceIsAliveForAcquireAndCleanup) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for pid namespaces";
  testing::ShmTest::Gate hold;
  auto& a = fork_in_pid_namespace([&](int out) {
    auto reg = Registry::open(ns);
    auto l = reg->acquire(job("a", 0, 1, {{"/data/x", true}}));
    if (l) make_segment(ns.shm_name(Namespace::prefix_suffix(l->prefix, "shard_states")), 64);
    report(out, l ? "held " + std::to_string(::getpid()) : l.error().to_string());
    hold.wait_go();
    return 0;
  });
  std::string got = read_line(a);
  if (got.rfind("unshare", 0) == 0) GTEST_SKIP() << got;
  ASSERT_EQ(got, "held 2");
  testing::next_clock_tick();  // b's pid 2 must not share a's start time either
  auto& b = fork_in_pid_namespace([&](int out) {
    auto reg = Registry::open(ns);
    auto l = reg->acquire(job("b", 0, 1, {{"/data/x", true}}));
    report(out, l ? "granted " + std::to_string(l->prefix) : std::string(code_name(l.error().code)) + ": " + l.error().message);
    auto rep = clean_stale(ns);
    bool kept = rep && !shm_names_with(ns.root + "000000_shard_states").empty() &&
                !shm_names_with(ns.root + "registry").empty() && !shm_names_with(ns.root + "init.lock").empty();
    report(out, kept ? "kept" : rep ? "removed:\n" + rep->to_string() : rep.error().to_string());
    report(out, std::to_string(::getpid()));
    return 0;
  });
  std::string r = read_line(b);
  EXPECT_EQ(r.rfind("in-use: ", 0), 0u) << r;
  EXPECT_NE(r.find("pid 2 in another pid namespace"), std::string::npos) << r;
  EXPECT_EQ(read_line(b), "kept");
  EXPECT_EQ(read_line(b), "2") << "both jobs are pid 2 of their own namespaces";
  EXPECT_EQ(wait_child(b), 0);
  // Once a's namespace is gone, so is its lease: its prefix and dir are free.
  ::kill(a.ns_init, SIGKILL);
  a.ns_init = -1;
  wait_child(a);
  auto reg = Registry::open(ns);
  auto l = reg->acquire(job("c", 0, 1, {{"/data/x", true}}));
  ASSERT_TRUE(l) << l.error().to_string();
  EXPECT_EQ(l->prefix, 0);
  EXPECT_TRUE(shm_names_with(ns.root + "000000_shard_states").empty());
}

// Robust mutexes record namespace-local tids, so pid 2 of one namespace can
// hold the registry lock while pid 2 of another asks for it. A NORMAL robust
// mutex (ours) makes the second wait like anyone else; an ERRORCHECK one would
// answer EDEADLK forever. When the holder dies, the waiter gets it, repaired.
TEST_F(RegistryTest, RegistryLockHeldByTheSameTidInAnotherPidNamespaceIsWaitedForNotADeadlock) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for pid namespaces";
  auto& a = fork_in_pid_namespace([&](int out) {
    report(out, std::to_string(::getpid()));
    if (!failpoint::set_pause_spec("crash/registry/acquire-locked:1").empty()) return 2;
    auto reg = Registry::open(ns);
    (void)reg->acquire(job("a", 0, 1));  // stops holding the registry lock
    return 0;
  });
  std::string got = read_line(a);
  if (got.rfind("unshare", 0) == 0) GTEST_SKIP() << got;
  ASSERT_EQ(got, "2");
  ASSERT_EQ(read_line(a), "stopped");
  testing::next_clock_tick();
  testing::ShmTest::Gate go;
  auto& b = fork_in_pid_namespace([&](int out) {
    report(out, std::to_string(::getpid()));
    auto reg = Registry::open(ns);
    auto s = job("b", 0, 1);
    s.timeout = 300ms;
    auto l = reg->acquire(s);
    report(out, l ? "granted" : std::string(code_name(l.error().code)) + ": " + l.error().message);
    go.wait_go();
    s.timeout = 5000ms;
    auto again = reg->acquire(s);
    report(out, again ? "granted " + std::to_string(again->prefix) : again.error().to_string());
    return 0;
  });
  ASSERT_EQ(read_line(b), "2") << "the same tid as the lock holder";
  std::string r = read_line(b);
  EXPECT_EQ(r.rfind("timeout: timed out locking", 0), 0u) << r;
  ::kill(a.ns_init, SIGKILL);  // dies holding the lock
  a.ns_init = -1;
  wait_child(a);
  go.open_all();
  EXPECT_EQ(read_line(b), "granted 0");
  EXPECT_EQ(wait_child(b), 0);
}

#ifdef SHMCOORD_FAILPOINTS
// ---------------------------------------------------------------- join wait
// A rank whose lock failed while it waited for its peers returned its error
// but stayed attached, so a peer joining later succeeded without it.
TEST_F(RegistryTest, RankWhoseLockFailsWhileWaitingMakesTheWholeJobFail) {
  testing::ShmTest::Gate hold;
  auto& r0 = fork_child([&](int out) {
    fiu_init(0);
    // The claim's lock works; every later one fails.
    static int calls = 0;
    fiu_enable_external("mutex/lock", 1, reinterpret_cast<void*>(EACCES), 0,
                        [](const char*, int*, void**, unsigned*) { return ++calls > 1 ? 1 : 0; });
    auto reg = Registry::open(ns);
    auto s = job("j", 0, 2);
    s.timeout = 300ms;
    auto l = reg->acquire(s);
    report(out, l ? "ok" : std::string(code_name(l.error().code)) + ": " + l.error().message);
    hold.wait_go();  // alive, as a process that handles the error would be
    return 0;
  });
  std::string a = read_line(r0);
  EXPECT_EQ(a.rfind("timeout: ", 0), 0u) << a;
  EXPECT_NE(a.find("withdrew"), std::string::npos) << a;
  auto& r1 = fork_child([&](int out) {
    auto reg = Registry::open(ns);
    auto s = job("j", 1, 2);
    s.timeout = 500ms;
    auto l = reg->acquire(s);
    report(out, l ? "ok" : std::string(code_name(l.error().code)) + ": " + l.error().message);
    return 0;
  });
  std::string b = read_line(r1);
  EXPECT_NE(b, "ok") << "rank 1 succeeded although rank 0 failed";
  hold.open_all();
}

// `++attached` came before the holder was written and was never repaired: a
// rank killed in between counted as joined, and its peer succeeded alone.
TEST_F(RegistryTest, RankKilledHalfWayThroughJoiningNeverCountsAsJoined) {
  auto& r0 = fork_child([&](int out) {
    if (!failpoint::set_pause_spec("crash/registry/after-claim:1").empty()) return 2;
    auto reg = Registry::open(ns);
    auto s = job("j", 0, 2);
    s.timeout = 1500ms;
    auto l = reg->acquire(s);
    report(out, l ? "ok" : std::string(code_name(l.error().code)) + ": " + l.error().message);
    return 0;
  });
  ASSERT_TRUE(wait_stopped(r0)) << "rank 0 never claimed";
  auto& r1 = fork_child([&](int) {
    fiu_init(0);
    fiu_enable("crash/registry/join-half-written", 1, nullptr, 0);
    auto reg = Registry::open(ns);
    (void)reg->acquire(job("j", 1, 2));
    return 0;
  });
  EXPECT_EQ(wait_child(r1), 128 + SIGKILL);
  ::kill(r0.pid, SIGCONT);
  std::string a = read_line(r0);
  EXPECT_EQ(a.rfind("timeout: ", 0), 0u) << a;
  EXPECT_NE(a.find("local ranks [1]"), std::string::npos) << a;
}
#endif

// set_reason cut the reason at 255 bytes, mid-character: the poisoned slot
// failed validation and ranks reported broken UTF-8.
TEST_F(RegistryTest, LongFailureReasonStaysValidUtf8ForEveryRank) {
  for (int pad = 0; pad < 3; ++pad) {
    std::string key(pad, 'k');
    while (key.size() + 3 < records::kJobKeyMax) key += "\xe2\x82\xac";
    auto& r1 = fork_child([&](int out) {
      auto reg = Registry::open(ns);
      auto l = reg->acquire(job(key, 1, 64));
      report(out, l ? "ok" : l.error().message);
      return 0;
    });
    auto reg = Registry::open(ns);
    auto s = job(key, 0, 64);
    s.timeout = 300ms;
    auto l = reg->acquire(s);
    ASSERT_FALSE(l);
    EXPECT_EQ(l.error().code, Code::kTimeout);
    EXPECT_TRUE(records::valid_utf8(l.error().message)) << "pad " << pad;
    EXPECT_GE(l.error().message.size(), records::kReasonMax - 4) << "the reason was long enough to be cut";
    EXPECT_EQ(read_line(r1), l.error().message) << "every rank reports the same reason";
    wait_child(r1);
  }
}

// The registry lock's holder is a lease, which all threads of a process
// share: threads of one process still take it in turn (one waits while the
// lock names its own lease), and their jobs get distinct prefixes.
TEST_F(RegistryTest, ThreadsOfOneProcessTakeTheRegistryLockInTurn) {
  auto reg = Registry::open(ns);
  ASSERT_TRUE(reg);
  constexpr int kThreads = 4, kEach = 25;
  std::vector<std::vector<Lease>> got(kThreads);
  std::vector<std::string> errors(kThreads);
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kEach; ++i) {
          auto l = reg->acquire(job("t" + std::to_string(t) + "-" + std::to_string(i), 0, 1));
          if (!l) {
            errors[t] = l.error().to_string();
            return;
          }
          got[t].push_back(*l);
        }
      });
    }
  }
  std::set<int> all;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(errors[t], "") << "thread " << t;
    for (const Lease& l : got[t]) EXPECT_TRUE(all.insert(l.prefix).second) << "prefix " << l.prefix << " granted twice";
  }
  EXPECT_EQ(all.size(), static_cast<std::size_t>(kThreads * kEach));
  for (const auto& leases : got) {
    for (const Lease& l : leases) EXPECT_TRUE(reg->release(l));
  }
}

// A lock dir that cannot be listed (here: not a directory) hides lock files a
// previous user may have left: no prefix is granted blind.
TEST_F(RegistryTest, AcquireWithALockDirThatCannotBeListedFailsNamingIt) {
  Namespace odd = ns;
  odd.lock_dir = ns.lock_dir / "not-a-dir";
  ::close(::open(odd.lock_dir.c_str(), O_CREAT | O_WRONLY, 0600));
  auto reg = Registry::open(odd);
  ASSERT_TRUE(reg) << reg.error().to_string();
  auto l = reg->acquire(job("j", 0, 1));
  ASSERT_FALSE(l);
  EXPECT_NE(l.error().message.find(odd.lock_dir.string()), std::string::npos) << l.error().message;
  EXPECT_NE(l.error().message.find("Not a directory"), std::string::npos) << l.error().message;
}

// ---------------------------------------------------------------- issue 19
// The flaws a review found under the real process model.

// 4. With no fd left for opendir, a dead run of the job in the way was freed
// without removing its names (the listing failure was ignored), and claim's
// leftover check (same failure) granted its prefix over its segment.
TEST_F(RegistryTest, AcquireThatCannotListNamesGrantsNoPrefixOverADeadJobsSegment) {
  ASSERT_EQ(dead_holder("j"), "held 0");
  const std::string stale = ns.root + "000000_shard_states";
  auto& c = fork_child([&](int out) {
    auto reg = Registry::open(ns);
    if (!reg) return 2;
    out = testing::leave_free_fds(out, 1);  // the lease takes it: opendir gets EMFILE
    if (out < 0) return 3;
    auto l = reg->acquire(job("j", 0, 1));  // its dead run is in the way: reaped first
    report(out, l ? "granted " + std::to_string(l->prefix) : std::string(code_name(l.error().code)) + ": " + l.error().message);
    return 0;
  });
  const std::string got = read_line(c);
  EXPECT_EQ(got.rfind("exhausted: ", 0), 0u) << got;
  EXPECT_NE(got.find("opendir"), std::string::npos) << got;
  EXPECT_FALSE(got == "granted 0" && !shm_names_with(stale).empty()) << "prefix 0 granted over the dead job's segment";
  EXPECT_EQ(wait_child(c), 0);
  // With fds again, the dead job's names go first and its prefix is reused.
  auto reg = Registry::open(ns);
  auto l = reg->acquire(job("j", 0, 1));
  ASSERT_TRUE(l) << l.error().to_string();
  EXPECT_EQ(l->prefix, 0);
  EXPECT_TRUE(shm_names_with(stale).empty());
}

// What an acquire removed is in its Lease: the evidence a checker needs that
// a dead job's names were gone before the prefix was granted again.
TEST_F(RegistryTest, AnAcquireNamesWhatItRemovedOfADeadRunAndOfLeftovers) {
  ASSERT_EQ(dead_holder("j"), "held 0");
  const std::string leftover = ns.shm_name(Namespace::prefix_suffix(1, "locals"));
  make_segment(leftover, 0);  // a free prefix's leftovers: nobody's slot
  auto reg = Registry::open(ns);
  ASSERT_TRUE(reg) << reg.error().to_string();
  auto l = reg->acquire(job("j", 0, 1));  // its dead run is in the way: reaped first
  ASSERT_TRUE(l) << l.error().to_string();
  EXPECT_EQ(l->prefix, 0);
  EXPECT_EQ(l->removed, std::vector<std::string>{ns.shm_name(Namespace::prefix_suffix(0, "shard_states"))});
  auto other = reg->acquire(job("k", 0, 1));
  ASSERT_TRUE(other) << other.error().to_string();
  EXPECT_EQ(other->prefix, 1);
  EXPECT_EQ(other->removed, std::vector<std::string>{leftover});
  auto clean = reg->acquire(job("m", 0, 1));
  ASSERT_TRUE(clean) << clean.error().to_string();
  EXPECT_TRUE(clean->removed.empty()) << "nothing was in the way";
  for (const Lease* x : {&*l, &*other, &*clean}) EXPECT_TRUE(reg->release(*x));
}

// 5. A holder in one container (pid 2) stops inside the registry lock, half-way
// through a claim; its pid twin in another container (pid 2 too) blocks on the
// lock and dies there. The kernel compares the futex word's owner tid (2) with
// the dying thread's tid (2), marks the lock owner-died and hands it to the
// next locker, which "repairs" the half-written claim and is granted prefix 0;
// the real holder resumes and publishes its claim of prefix 0 as well.
TEST_F(RegistryTest, PidTwinDyingBlockedOnTheRegistryLockNeverHandsItOver) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for pid namespaces";
  testing::ShmTest::Gate hold;
  auto& a = fork_in_pid_namespace([&](int out) {
    report(out, std::to_string(::getpid()));
    if (!failpoint::set_pause_spec("crash/registry/claim-half-written:1").empty()) return 2;
    auto reg = Registry::open(ns);
    auto l = reg->acquire(job("a", 0, 1));  // stops holding the registry lock
    report(out, l ? "granted " + std::to_string(l->prefix) : l.error().to_string());
    hold.wait_go();
    return 0;
  });
  std::string got = read_line(a);
  if (got.rfind("unshare", 0) == 0) GTEST_SKIP() << got;
  ASSERT_EQ(got, "2");
  ASSERT_EQ(read_line(a), "stopped");
  testing::next_clock_tick();
  auto& twin = fork_in_pid_namespace([&](int out) {
    report(out, std::to_string(::getpid()));
    auto reg = Registry::open(ns);
    auto s = job("twin", 0, 1);
    s.timeout = 30000ms;
    (void)reg->acquire(s);  // blocks on the lock a holds
    return 0;
  });
  ASSERT_EQ(read_line(twin), "2") << "the same tid as the lock holder";
  const pid_t twin_outer = testing::first_child_of(twin.ns_init);
  ASSERT_GT(twin_outer, 0);
  ASSERT_TRUE(testing::wait_in_futex(twin_outer)) << "the twin never blocked on the lock";
  ::kill(twin.ns_init, SIGKILL);  // dies blocked on the lock; its namespace is gone once wait_child returns
  twin.ns_init = -1;
  wait_child(twin);
  auto& c = fork_child([&](int out) {
    auto reg = Registry::open(ns);
    auto s = job("c", 0, 1);
    s.timeout = 500ms;
    auto l = reg->acquire(s);
    report(out, l ? "granted " + std::to_string(l->prefix) : std::string(code_name(l.error().code)) + ": " + l.error().message);
    hold.wait_go();
    return 0;
  });
  const std::string got_c = read_line(c);
  const pid_t a_outer = testing::first_child_of(a.ns_init);
  ASSERT_GT(a_outer, 0);
  ::kill(a_outer, SIGCONT);
  const std::string got_a = read_line(a);
  EXPECT_EQ(got_c.rfind("timeout: timed out locking", 0), 0u) << "the holder is alive (stopped): " << got_c;
  EXPECT_EQ(got_a, "granted 0");
  EXPECT_FALSE(got_a == got_c) << "two live jobs were granted one prefix: " << got_a;
  hold.open_all();
}

// 11. The tracker's handle, copied into a forked loader worker, killed the
// rank's tracker when the worker exited: the rank's later SIGKILL left its
// prefix held and its segments in place.
TEST_F(RegistryTest, ForkedChildsCopyOfATrackerNeverStopsTheParentsTracker) {
  testing::ShmTest::Gate never;
  auto& rank = fork_child([&](int out) {
    std::optional<ResourceTracker> tracker;
    if (auto t = ResourceTracker::start(ns)) tracker.emplace(std::move(*t));
    if (!tracker) return 3;
    auto reg = Registry::open(ns);
    auto l = reg->acquire(job("j", 0, 1));
    if (!l) return 4;
    make_segment(ns.shm_name(Namespace::prefix_suffix(l->prefix, "shard_states")), 64);
    pid_t worker = ::fork();
    if (worker == 0) {
      tracker.reset();  // the worker's exit destroys its copy
      ::_exit(0);
    }
    int st = 0;
    ::waitpid(worker, &st, 0);
    report(out, std::to_string(tracker->pid()));
    never.wait_go();
    return 0;
  });
  const pid_t tracker = std::stoi(read_line(rank));
  auto id = identity_of(tracker);
  ASSERT_TRUE(id) << "the tracker is gone: " << id.error().to_string();
  EXPECT_TRUE(is_alive(*id)) << "the worker's exit stopped the rank's tracker";
  kill_child(rank);
  for (int i = 0; i < 500 && is_alive(*id); ++i) ::usleep(10000);
  EXPECT_TRUE(shm_names_with(ns.root + "000000_shard_states").empty()) << "the dead rank's tracker did not reap";
}

// The fork contract of a Registry: a Lease is the acquiring process's, and a
// child releasing its parent's lease is an error that changes nothing.
TEST_F(RegistryTest, ForkedChildCannotReleaseItsParentsLease) {
  auto reg = Registry::open(ns);
  auto l = reg->acquire(job("j", 0, 1));
  ASSERT_TRUE(l);
  auto& child = fork_child([&](int out) {
    auto r = reg->release(*l);
    report(out, r ? "released" : std::string(code_name(r.error().code)) + ": " + r.error().message);
    return 0;
  });
  const std::string got = read_line(child);
  EXPECT_EQ(got.rfind("invalid-argument: ", 0), 0u) << got;
  EXPECT_NE(got.find("pid " + std::to_string(::getpid())), std::string::npos) << got;
  auto snap = reg->snapshot();
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->size(), 1u);
  EXPECT_TRUE((*snap)[0].live);
  ASSERT_TRUE(reg->release(*l));
}

// A child acts for itself with an inherited handle: its own lease, its own prefix.
TEST_F(RegistryTest, ForkedChildAcquiresWithItsOwnLease) {
  auto reg = Registry::open(ns);
  auto l = reg->acquire(job("parent", 0, 1));
  ASSERT_TRUE(l);
  testing::ShmTest::Gate hold;
  auto& child = fork_child([&](int out) {
    auto mine = reg->acquire(job("child", 0, 1));
    report(out, mine ? std::to_string(mine->prefix) : mine.error().to_string());
    hold.wait_go();
    return mine && reg->release(*mine) ? 0 : 1;
  });
  EXPECT_EQ(read_line(child), "1");
  kill_child(child);  // its prefix is freed by its death, not by ours
  ASSERT_TRUE(reg->release(*l));
  auto again = reg->acquire(job("next", 0, 1));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->prefix, 0);
}

// 12. A barrier of another layout version under a free prefix was removed by
// claim's leftover check (and under a dead one by the sweep), against
// cleanup.h's "never removes another version's barrier".
void make_other_version_barrier(const std::string& name) {
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 4096), 0);
  const std::uint64_t magic = records::kBarrierMagic;
  const std::uint32_t version = records::kVersion + 1;
  ASSERT_EQ(::pwrite(fd, &magic, sizeof magic, 0), static_cast<ssize_t>(sizeof magic));
  ASSERT_EQ(::pwrite(fd, &version, sizeof version, 8), static_cast<ssize_t>(sizeof version));
  ::close(fd);
}

TEST_F(RegistryTest, ClaimNeverRemovesAnotherLayoutVersionsBarrierUnderAFreePrefix) {
  const std::string other = ns.shm_name(Namespace::prefix_suffix(0, "barrier"));
  make_other_version_barrier(other);
  auto reg = Registry::open(ns);
  auto l = reg->acquire(job("j", 0, 1));
  ASSERT_TRUE(l) << l.error().to_string();
  EXPECT_FALSE(shm_names_with(other.substr(1)).empty()) << "another version's barrier was removed";
  EXPECT_EQ(l->prefix, 1) << "prefix 0 is blocked by what stays under it";
}

TEST_F(RegistryTest, SweepNeverRemovesAnotherLayoutVersionsBarrierUnderADeadPrefix) {
  testing::ShmTest::Gate never;
  auto& dead = fork_child([&](int out) {
    auto reg = Registry::open(ns);
    auto l = reg->acquire(job("dead", 0, 1));
    report(out, l ? std::to_string(l->prefix) : l.error().to_string());
    never.wait_go();
    return 0;
  });
  ASSERT_EQ(read_line(dead), "0");
  const std::string other = ns.shm_name(Namespace::prefix_suffix(0, "barrier"));
  make_other_version_barrier(other);
  make_segment(ns.shm_name(Namespace::prefix_suffix(0, "shard_states")), 64);
  kill_child(dead);
  auto reg = Registry::open(ns);
  auto removed = reg->reap();
  ASSERT_TRUE(removed) << removed.error().to_string();
  EXPECT_FALSE(shm_names_with(other.substr(1)).empty()) << "another version's barrier was removed";
  EXPECT_TRUE(shm_names_with(ns.root + "000000_shard_states").empty()) << "the dead job's own segment stays";
}

// 13. milliseconds::max() overflowed now() + d: acquire failed at once with
// "timed out after 9223372036854775807 ms". It means "no deadline".
TEST_F(RegistryTest, MaxTimeoutMeansNoDeadline) {
  auto& r0 = fork_child([&](int out) {
    if (!failpoint::set_pause_spec("crash/registry/wait-before-sleep:1").empty()) return 2;
    auto reg = Registry::open(ns);
    auto s = job("j", 0, 2);
    s.timeout = std::chrono::milliseconds::max();
    auto l = reg->acquire(s);
    report(out, l ? "ok " + std::to_string(l->prefix) : l.error().to_string());
    return 0;
  });
  ASSERT_TRUE(wait_stopped(r0)) << "rank 0 returned before waiting for rank 1: " << read_line(r0);
  ::kill(r0.pid, SIGCONT);
  auto reg = Registry::open(ns);
  auto l = reg->acquire(job("j", 1, 2));
  ASSERT_TRUE(l) << l.error().to_string();
  EXPECT_EQ(read_line(r0), "ok " + std::to_string(l->prefix));
}

TEST_F(RegistryTest, NegativeTimeoutIsRefused) {
  auto reg = Registry::open(ns);
  ASSERT_TRUE(reg);
  auto s = job("j", 0, 1);
  s.timeout = -1ms;
  auto l = reg->acquire(s);
  ASSERT_FALSE(l);
  EXPECT_EQ(l.error().code, Code::kInvalidArgument) << l.error().message;
}

// 15. Rebuilding a zero-length registry held four fds at once (the fast
// path's, the init lock, the old and the new segment), against "at most three".
TEST_F(RegistryTest, RebuildingAZeroLengthRegistryNeedsAtMostThreeFds) {
  make_segment(ns.shm_name("registry"), 0);
  auto& c = fork_child([&](int out) {
    out = testing::leave_free_fds(out, 3);
    if (out < 0) return 2;
    auto reg = Registry::open(ns);
    if (!reg) {
      report(out, "open " + reg.error().to_string());
      return 0;
    }
    auto l = reg->acquire(job("j", 0, 1));
    report(out, l ? "granted " + std::to_string(l->prefix) : "acquire " + l.error().to_string());
    return 0;
  });
  EXPECT_EQ(read_line(c), "granted 0");
}

// Retries, as user code with a retry loop makes them: a rank whose acquire
// timed out (its peer was late) tries again and is granted the prefix with it.
TEST_F(RegistryTest, AcquireRetriedAfterATimeoutSucceedsWithThePeer) {
  auto& r1 = fork_child([&](int out) {
    auto reg = Registry::open(ns);
    auto s = job("j", 1, 2);
    s.timeout = 200ms;
    auto first = reg->acquire(s);
    report(out, first ? "ok" : std::string(code_name(first.error().code)));
    s.timeout = 5000ms;
    auto again = reg->acquire(s);
    report(out, again ? "ok " + std::to_string(again->prefix) : again.error().to_string());
    return 0;
  });
  EXPECT_EQ(read_line(r1), "timeout");
  auto reg = Registry::open(ns);
  auto l = reg->acquire(job("j", 0, 2));
  ASSERT_TRUE(l) << l.error().to_string();
  EXPECT_EQ(read_line(r1), "ok " + std::to_string(l->prefix));
}

// A rebuilt registry restarted serials at 1, so a new holding of a prefix
// could carry the claim of an old holding whose barrier outlived it.
TEST_F(RegistryTest, SerialsOfARebuiltRegistryNeverRepeatTheOldOnes) {
  std::uint64_t first = 0;
  {
    auto reg = Registry::open(ns);
    auto l = reg->acquire(job("j", 0, 1));
    ASSERT_TRUE(l);
    first = l->serial;
    ASSERT_TRUE(reg->release(*l));
  }
  auto rep = clean_stale(ns);
  ASSERT_TRUE(rep) << rep.error().to_string();
  ASSERT_TRUE(shm_names_with(ns.root + "registry").empty()) << rep->to_string();
  auto reg = Registry::open(ns);
  auto l = reg->acquire(job("j", 0, 1));
  ASSERT_TRUE(l);
  EXPECT_NE(l->serial, first) << "the rebuilt registry's first claim repeats the old registry's first";
}

// A handle opened without `create` (the tracker's) recreated an empty registry
// when the one it had opened was retired and removed by a cleanup.
TEST_F(RegistryTest, ReapAfterACleanupRemovedTheRegistryDoesNotRecreateIt) {
  {
    auto reg = Registry::open(ns);
    auto l = reg->acquire(job("j", 0, 1));
    ASSERT_TRUE(l);
    ASSERT_TRUE(reg->release(*l));
  }
  auto reg = Registry::open(ns, false);
  ASSERT_TRUE(reg);
  auto rep = clean_stale(ns);
  ASSERT_TRUE(rep) << rep.error().to_string();
  ASSERT_TRUE(shm_names_with(ns.root + "registry").empty()) << rep->to_string();
  auto removed = reg->reap();
  EXPECT_TRUE(removed) << removed.error().to_string();
  EXPECT_TRUE(shm_names_with(ns.root + "registry").empty()) << "reap recreated the registry";
  EXPECT_TRUE(shm_names_with(ns.root).empty());
}

// torchrun without --standalone sets TORCHELASTIC_RUN_ID to its default,
// "none", for every job: two jobs on one node got one job key.
TEST(DefaultJobKey, TorchrunsDefaultRunIdDoesNotMakeTwoJobsOne) {
  ::unsetenv("SHMCOORD_JOB_KEY");
  ::setenv("TORCHELASTIC_RUN_ID", "none", 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", "29500", 1);
  const std::string a = default_job_key();
  ::setenv("MASTER_PORT", "29501", 1);
  const std::string b = default_job_key();
  ::setenv("TORCHELASTIC_RUN_ID", "3f2a", 1);
  const std::string named = default_job_key();
  ::unsetenv("TORCHELASTIC_RUN_ID");
  ::unsetenv("MASTER_ADDR");
  ::unsetenv("MASTER_PORT");
  EXPECT_NE(a, b) << "two torchrun jobs with the default run id share the key " << a;
  EXPECT_EQ(named, "torchelastic:3f2a");
}

// The tracker's handle SIGKILLed its pid without knowing it was still its
// tracker: here the tracker died and was reaped behind its back (SIGCHLD
// ignored), and its pid went to an unrelated process, which the handle killed.
TEST_F(RegistryTest, TrackerHandleNeverSignalsAProcessThatReusedTheTrackersPid) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for pid namespaces";
  auto& box = fork_in_pid_namespace([&](int out) {
    ::signal(SIGCHLD, SIG_IGN);  // children are reaped by the kernel, pids free at once
    std::optional<ResourceTracker> t;
    if (auto s = ResourceTracker::start(ns)) t.emplace(std::move(*s));
    if (!t) return 2;
    const pid_t old = t->pid();
    ::kill(old, SIGKILL);
    while (::kill(old, 0) == 0) ::usleep(1000);
    // The next fork gets the tracker's old pid.
    FILE* f = std::fopen("/proc/sys/kernel/ns_last_pid", "w");
    if (!f) return 3;
    std::fprintf(f, "%d", old - 1);
    std::fclose(f);
    int p[2];
    if (::pipe(p) != 0) return 4;
    pid_t stranger = ::fork();
    if (stranger == 0) {
      ::close(p[1]);
      char c;
      (void)!::read(p[0], &c, 1);  // lives until its gate closes
      ::_exit(0);
    }
    ::close(p[0]);
    if (stranger != old) {
      report(out, "pid not reused: " + std::to_string(stranger) + " for " + std::to_string(old));
      return 0;
    }
    t.reset();
    report(out, ::kill(stranger, 0) == 0 ? "stranger alive" : "stranger killed");
    ::close(p[1]);
    return 0;
  });
  std::string got = read_line(box);
  if (got.rfind("unshare", 0) == 0) GTEST_SKIP() << got;
  EXPECT_EQ(got, "stranger alive");
}

}  // namespace
}  // namespace shmcoord
