#include "shmcoord/cleanup.h"

#include <gtest/gtest.h>
#include <sys/file.h>

#include <cstring>

#include "shmcoord/barrier.h"
#include "shmcoord/registry.h"
#include "test_util.h"

namespace shmcoord {
namespace {

using testing::ShmTest;
using namespace std::chrono_literals;

void make_segment(const std::string& name, std::size_t size, const char* bytes = nullptr) {
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(fd, 0) << name;
  if (size) ASSERT_EQ(::ftruncate(fd, size), 0);
  if (bytes) {
    ASSERT_EQ(::write(fd, bytes, std::strlen(bytes)), static_cast<ssize_t>(std::strlen(bytes)));
  }
  ::close(fd);
}

bool listed(const std::vector<CleanReport::Entry>& v, const std::string& needle) {
  for (const auto& e : v) {
    if (e.name.find(needle) != std::string::npos) return true;
  }
  return false;
}

class CleanupTest : public ShmTest {
 protected:
  JobSpec job(std::string key) {
    JobSpec s;
    s.job_key = std::move(key);
    s.local_rank = 0;
    s.local_world_size = 1;
    s.timeout = 5000ms;
    return s;
  }
  // A child holding a prefix (with one job segment) until killed.
  testing::ChildProc& holder(testing::ShmTest::Gate& g, const std::string& key) {
    auto& c = fork_child([&, key](int out) {
      auto reg = Registry::open(ns);
      auto l = reg->acquire(job(key));
      if (l) make_segment(ns.shm_name(Namespace::prefix_suffix(l->prefix, "shard_states")), 64);
      report(out, l ? std::to_string(l->prefix) : l.error().to_string());
      g.wait_go();
      return 0;
    });
    return c;
  }
};

TEST_F(CleanupTest, RemovesDeadJobsSegmentsAndKeepsLiveOnes) {
  testing::ShmTest::Gate g;
  auto& dead = holder(g, "dead");
  ASSERT_EQ(read_line(dead), "0");
  auto& live = holder(g, "live");
  ASSERT_EQ(read_line(live), "1");
  kill_child(dead);
  auto rep = clean_stale(ns);
  ASSERT_TRUE(rep) << rep.error().to_string();
  EXPECT_TRUE(listed(rep->removed, "000000_shard_states")) << rep->to_string();
  EXPECT_TRUE(listed(rep->kept, "000001_shard_states")) << rep->to_string();
  EXPECT_FALSE(testing::shm_names_with(ns.root + "000001_shard_states").empty());
}

// The original cleanup deleted a live (here: stopped) job's segments.
TEST_F(CleanupTest, KeepsTheSegmentsOfAStoppedOwner) {
  testing::ShmTest::Gate g;
  auto& stopped = holder(g, "stopped");
  ASSERT_EQ(read_line(stopped), "0");
  kill_child(stopped, SIGSTOP);
  auto rep = clean_stale(ns);
  ASSERT_TRUE(rep) << rep.error().to_string();
  EXPECT_TRUE(listed(rep->kept, "000000_shard_states")) << rep->to_string();
  EXPECT_FALSE(testing::shm_names_with(ns.root + "000000_shard_states").empty());
}

// The original failed on "cannot mmap an empty file" and stopped at the first gap.
TEST_F(CleanupTest, ZeroLengthTruncatedAndGarbageSegmentsAreRemovedAcrossGaps) {
  make_segment(ns.shm_name("000000_locals"), 0);
  make_segment(ns.shm_name("000007_locals"), 3, "abc");
  make_segment(ns.shm_name("000042_barrier"), 100, "\x01\x02garbage");
  make_segment(ns.shm_name("registry"), 0);
  make_segment(ns.shm_name("some_barrier"), 17, "not a barrier");
  auto rep = clean_stale(ns);
  ASSERT_TRUE(rep) << rep.error().to_string();
  EXPECT_TRUE(testing::shm_names_with(ns.root).empty()) << rep->to_string();
  EXPECT_TRUE(listed(rep->removed, "000042_barrier"));
  EXPECT_TRUE(listed(rep->removed, "registry"));
}

TEST_F(CleanupTest, NeverRemovesAnotherUsersEntriesEvenAsRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  const std::string name = ns.shm_name("000003_shard_states");
  make_segment(name, 64);
  ASSERT_EQ(::chown(("/dev/shm" + name).c_str(), 65534, 65534), 0);
  auto rep = clean_stale(ns);
  ASSERT_TRUE(rep) << rep.error().to_string();
  EXPECT_TRUE(listed(rep->skipped, "000003_shard_states")) << rep->to_string();
  EXPECT_FALSE(testing::shm_names_with(ns.root + "000003").empty());
}

TEST_F(CleanupTest, KeepsAHeldLockFileAndRemovesUnheldOnes) {
  std::string held = ns.lock_path("000001_barrier_filelock").string();
  std::string stale = ns.lock_path("000002_barrier_filelock").string();
  int h = ::open(held.c_str(), O_CREAT | O_RDWR, 0600);
  ::close(::open(stale.c_str(), O_CREAT | O_RDWR, 0600));
  testing::ShmTest::Gate g;
  auto& locker = fork_child([&](int out) {
    int fd = ::open(held.c_str(), O_RDWR);
    ::flock(fd, LOCK_EX);
    report(out, "locked");
    g.wait_go();
    return 0;
  });
  ::close(h);
  ASSERT_EQ(read_line(locker), "locked");
  auto rep = clean_stale(ns);
  ASSERT_TRUE(rep) << rep.error().to_string();
  EXPECT_TRUE(std::filesystem::exists(held)) << rep->to_string();
  EXPECT_FALSE(std::filesystem::exists(stale)) << rep->to_string();
  EXPECT_TRUE(listed(rep->kept, "000001_barrier_filelock"));
}

TEST_F(CleanupTest, IsIdempotentAndSafeFromManyProcessesAtOnce) {
  for (int p = 0; p < 50; ++p) make_segment(ns.shm_name(Namespace::prefix_suffix(p, "epoch_data")), p % 3 ? 64 : 0);
  testing::ShmTest::Gate go;
  std::vector<testing::ChildProc*> kids;
  for (int i = 0; i < 4; ++i) {
    kids.push_back(&fork_child([&](int out) {
      go.wait_go();
      auto rep = clean_stale(ns);
      report(out, rep ? "ok" : rep.error().to_string());
      return 0;
    }));
  }
  go.open_all();
  for (auto* k : kids) EXPECT_EQ(read_line(*k), "ok");
  EXPECT_TRUE(testing::shm_names_with(ns.root).empty());
  auto again = clean_stale(ns);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->removed.empty()) << again->to_string();
}

TEST_F(CleanupTest, LeavesNothingOnceNoJobIsLive) {
  {
    auto reg = Registry::open(ns);
    auto l = reg->acquire(job("j"));
    ASSERT_TRUE(l);
    auto b = Barrier::attach(ns, Namespace::prefix_suffix(l->prefix, "barrier"), 1);
    ASSERT_TRUE(b);
    ASSERT_TRUE(b->wait());
    ASSERT_TRUE(reg->release(*l));
  }
  auto rep = clean_stale(ns);
  ASSERT_TRUE(rep) << rep.error().to_string();
  EXPECT_TRUE(testing::shm_names_with(ns.root).empty()) << rep->to_string();
  EXPECT_TRUE(std::filesystem::is_empty(ns.lock_dir)) << rep->to_string();
}

TEST_F(CleanupTest, KeepsABarrierWithALiveParticipant) {
  auto b = Barrier::attach(ns, "standalone", 2);
  ASSERT_TRUE(b);
  auto rep = clean_stale(ns);
  ASSERT_TRUE(rep);
  EXPECT_TRUE(listed(rep->kept, "standalone")) << rep->to_string();
}

}  // namespace
}  // namespace shmcoord
