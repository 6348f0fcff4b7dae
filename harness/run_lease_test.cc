// clean_dead_runs (run_lease.h): the one place that decides what `clean` may
// remove. A run's names go only when its lease exists and nobody holds it.
#include "run_lease.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace harness {
namespace {

namespace fs = std::filesystem;

class ShmDir {
 public:
  ShmDir() {
    std::string tmpl = (fs::temp_directory_path() / "shmstress-lease-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~ShmDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string touch(const std::string& name) const {
    std::ofstream(path_ + "/" + name) << "x";
    return path_ + "/" + name;
  }
  bool has(const std::string& name) const { return fs::exists(path_ + "/" + name); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::map<std::string, CleanDecision> by_name(const std::vector<CleanDecision>& ds) {
  std::map<std::string, CleanDecision> out;
  for (const auto& d : ds) out[d.name] = d;
  return out;
}

constexpr char kDead[] = "shmstress.77-00000000000000aa";
constexpr char kLive[] = "shmstress.77-00000000000000bb";

TEST(CleanDeadRuns, RemovesADeadRunsNamesAndItsLeaseOnly) {
  ShmDir d;
  d.touch(std::string(kDead) + ".lease");
  d.touch(std::string(kDead) + ".3.registry");
  d.touch(std::string(kDead) + ".3.leases");
  auto got = by_name(clean_dead_runs(d.path()));
  EXPECT_TRUE(got[std::string(kDead) + ".3.registry"].remove);
  EXPECT_TRUE(got[std::string(kDead) + ".lease"].remove);
  EXPECT_FALSE(d.has(std::string(kDead) + ".3.registry"));
  EXPECT_FALSE(d.has(std::string(kDead) + ".3.leases"));
  EXPECT_FALSE(d.has(std::string(kDead) + ".lease"));
}

// The lock is the kernel's, so it says "alive" for a run in any pid
// namespace: here, another open file description holding it.
TEST(CleanDeadRuns, KeepsEveryNameOfARunWhoseLeaseIsHeld) {
  ShmDir d;
  const std::string lease = d.touch(std::string(kLive) + ".lease");
  d.touch(std::string(kLive) + ".1.registry");
  const int fd = ::open(lease.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_SH), 0);
  auto got = by_name(clean_dead_runs(d.path()));
  EXPECT_FALSE(got[std::string(kLive) + ".1.registry"].remove);
  EXPECT_NE(got[std::string(kLive) + ".1.registry"].why.find("alive"), std::string::npos);
  EXPECT_TRUE(d.has(std::string(kLive) + ".1.registry"));
  EXPECT_TRUE(d.has(std::string(kLive) + ".lease"));
  ::close(fd);
}

TEST(CleanDeadRuns, KeepsWhatNoLeaseVouchesFor) {
  ShmDir d;
  d.touch("shmstress.12345.3.registry");           // an older shmstress's: a pid, no lease
  d.touch(std::string(kDead) + ".2.registry");     // its lease is gone
  d.touch("shmstress.evil.registry");               // not a token at all
  auto got = by_name(clean_dead_runs(d.path()));
  ASSERT_EQ(got.size(), 3u);
  for (const auto& [name, dec] : got) {
    EXPECT_FALSE(dec.remove) << name;
    EXPECT_TRUE(d.has(name)) << name;
  }
}

TEST(RunLease, NamesTrialRootsUnderItsTokenAndIsLockedWhileHeld) {
  std::string why;
  auto lease = RunLease::take(&why);
  ASSERT_TRUE(lease) << why;
  const std::string root = lease->trial_root(4);
  EXPECT_EQ(root, "shmstress." + lease->token() + ".4.");
  const std::string file = "/dev/shm/shmstress." + lease->token() + ".lease";
  ASSERT_TRUE(fs::exists(file));
  const int fd = ::open(file.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  EXPECT_NE(::flock(fd, LOCK_EX | LOCK_NB), 0) << "the lease is not held";
  ::close(fd);
  lease.reset();
  EXPECT_FALSE(fs::exists(file)) << "the run's end leaves its lease";
}

}  // namespace
}  // namespace harness
