// hold_lock: the helper that keeps a lock file held for the init-lock and
// stale-lock faults. The supervisor announces the lock as held (a cleanup
// that removes it is then a violation) the moment hold_lock returns, so
// every promise is checked at that moment, not later.
#include "lock_holder.h"

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace harness::supervision {
namespace {

namespace fs = std::filesystem;

// What a cleanup would see: 0 when it could take the lock, else its errno.
int probe(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return -1;
  int err = ::flock(fd, LOCK_EX | LOCK_NB) == 0 ? 0 : errno;
  ::close(fd);
  return err;
}

// The parent pid of `pid`, from /proc (field 4 of stat).
pid_t parent_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(f, line);
  auto close_paren = line.rfind(')');
  if (close_paren == std::string::npos) return -1;
  char state = 0;
  int ppid = -1;
  if (std::sscanf(line.c_str() + close_paren + 1, " %c %d", &state, &ppid) != 2) return -1;
  return ppid;
}

// How `pid` ended: its exit code, or 100 + the signal that killed it.
int wait_status(pid_t pid) {
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

// Each case runs in its own child (a subreaper, as the supervisor is), so the
// test process never becomes anyone's reaper; the child's exit code says
// which promise broke (0: none).
int run_in_child(int (*body)(const std::string&), const std::string& path) {
  pid_t c = ::fork();
  if (c == 0) {
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    ::_exit(body(path));
  }
  return wait_status(c);
}

void kill_and_reap(pid_t p) {
  ::kill(p, SIGKILL);
  ::kill(p, SIGCONT);
  while (::waitpid(p, nullptr, 0) < 0 && errno == EINTR) {
  }
}

// One holder, checked the moment hold_lock returns it, then killed: 0, or
// the promise that broke. 1: no holder; 2: not our child (checked only with
// `our_pids`: /proc shows our pid namespace's pids); 3: the lock free; 4: the
// lock still held once the holder was killed.
int hold_once(const std::string& path, bool inherited, bool our_pids) {
  pid_t h = hold_lock(path, inherited);
  if (h <= 0) return 1;
  const pid_t parent = our_pids ? parent_of(h) : ::getpid();
  const int held = probe(path);
  kill_and_reap(h);
  if (parent != ::getpid()) return 2;
  if (held != EWOULDBLOCK) return 3;
  return probe(path) == 0 ? 0 : 4;
}

class LockHolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("shmstress-holder-" + std::to_string(::getpid()) + ".lock")).string();
    std::ofstream(path_, std::ios::trunc).flush();
  }
  void TearDown() override { fs::remove(path_); }
  std::string path_;
};

int inherited_holder_settled(const std::string& path) {
  for (int i = 0; i < 100; ++i) {
    if (int broken = hold_once(path, true, true)) return broken;
  }
  return 0;
}

TEST_F(LockHolderTest, AnInheritedHolderIsOurChildAndHoldsTheLockWhenItIsReturned) {
  EXPECT_EQ(run_in_child(inherited_holder_settled, path_), 0);
}

// As above, with the caller init of its own pid namespace (the supervisor's
// usual place): a holder re-parented to pid 1 is re-parented to the caller.
// 5: no pid namespace here.
int inherited_holder_under_init(const std::string& path) {
  if (::unshare(CLONE_NEWPID) != 0) return 5;
  pid_t init = ::fork();
  if (init == 0) {
    for (int i = 0; i < 100; ++i) {
      if (int broken = hold_once(path, true, false)) ::_exit(broken);
    }
    ::_exit(0);
  }
  return wait_status(init);
}

TEST_F(LockHolderTest, AnInheritedHolderStaysWhenTheCallerIsInitOfItsPidNamespace) {
  const int rc = run_in_child(inherited_holder_under_init, path_);
  if (rc == 5) GTEST_SKIP() << "cannot make a pid namespace here";
  EXPECT_EQ(rc, 0);
}

int stopped_holder(const std::string& path) { return hold_once(path, false, true); }

TEST_F(LockHolderTest, AStoppedHolderIsOurChildAndHoldsTheLock) {
  EXPECT_EQ(run_in_child(stopped_holder, path_), 0);
}

TEST_F(LockHolderTest, ALockHeldAlreadyIsRefusedInsteadOfWaitedFor) {
  int fd = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  EXPECT_EQ(hold_lock(path_, true), -1);
  EXPECT_EQ(hold_lock(path_, false), -1);
  ::close(fd);
}

TEST_F(LockHolderTest, AMissingFileIsRefused) {
  EXPECT_EQ(hold_lock(path_ + ".absent", true), -1);
  EXPECT_EQ(hold_lock(path_ + ".absent", false), -1);
}

}  // namespace
}  // namespace harness::supervision
