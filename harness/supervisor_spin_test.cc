// What a look at a silent worker reads (blocked_in_of, proc_stat) and what
// it concludes (sleeps_between_lines, not_exiting): a worker blocked in a wait its logging
// never makes has written every line it stamped, so a cut may pass it without
// waiting for its next line; one that has not begun to exit is alive. Real
// processes, each blocked in the call it names.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include "supervisor_internal.h"

namespace harness::supervision {
namespace {

namespace fs = std::filesystem;

// A child that says "about to block" on a pipe and then runs `block`;
// killed and reaped when the test is done with it, also when it fails.
class Child {
 public:
  explicit Child(const std::function<void()>& block) {
    int p[2];
    if (::pipe(p) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(p[0]);
      char c = 'r';
      (void)!::write(p[1], &c, 1);
      block();
      ::_exit(0);
    }
    ::close(p[1]);
    char c;
    ready_ = pid_ > 0 && ::read(p[0], &c, 1) == 1;
    ::close(p[0]);
  }
  ~Child() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  bool ready() const { return ready_; }
  // What the child is blocked in once it shows `nr` (it may still be on its
  // way there from the handshake), or its last reading after 5 s.
  BlockedIn once_in(long nr) const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    BlockedIn b;
    do {
      b = blocked_in_of(pid_);
      if (b.nr == nr) break;
      std::this_thread::yield();
    } while (std::chrono::steady_clock::now() < until);
    return b;
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  bool ready_ = false;
};

// Its threads as /proc/<pid>/stat counts them (0: gone).
long Threads(pid_t pid) {
  ProcStat ps;
  return proc_stat(pid, &ps) ? ps.threads : 0;
}

// Whether the process had not begun to exit, as the `alive` look reads it.
bool NotExiting(pid_t pid) {
  ProcStat ps;
  return proc_stat(pid, &ps) && not_exiting(ps);
}

TEST(SleepsBetweenLines, AWorkerWaitingOnAFutexWordHasWrittenEveryLine) {
  Child c([] {
    static int word = 0;
    for (;;) ::syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, nullptr, nullptr, 0);
  });
  ASSERT_TRUE(c.ready());
  const BlockedIn b = c.once_in(SYS_futex);
  EXPECT_EQ(b.nr, SYS_futex);
  EXPECT_EQ(Threads(c.pid()), 1);
  EXPECT_TRUE(sleeps_between_lines(b, Threads(c.pid())));
}

TEST(SleepsBetweenLines, AWorkerInItsHoldsSleepHasWrittenEveryLine) {
  Child c([] {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(10));
  });
  ASSERT_TRUE(c.ready());
  const BlockedIn b = c.once_in(SYS_clock_nanosleep);
  EXPECT_EQ(b.nr, SYS_clock_nanosleep);
  EXPECT_TRUE(sleeps_between_lines(b, Threads(c.pid())));
}

TEST(SleepsBetweenLines, AWorkerWaitingForAFileLockHasWrittenEveryLine) {
  const fs::path path =
      fs::temp_directory_path() / ("shmstress-spin-flock-" + std::to_string(::getpid()));
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  {
    Child c([&] {
      const int mine = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
      ::flock(mine, LOCK_EX);
    });
    EXPECT_TRUE(c.ready());
    const BlockedIn b = c.once_in(SYS_flock);
    EXPECT_EQ(b.nr, SYS_flock);
    EXPECT_TRUE(sleeps_between_lines(b, Threads(c.pid())));
  }
  ::close(fd);
  fs::remove(path);
}

TEST(SleepsBetweenLines, AReadMayBeTheLoggingsOwnAndSaysNothing) {
  // The worker reads its schedstat between a stamp and the line's write: a
  // worker preempted inside that read shows read too.
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  {
    Child c([&] {
      char x;
      for (;;) (void)!::read(p[0], &x, 1);
    });
    EXPECT_TRUE(c.ready());
    const BlockedIn b = c.once_in(SYS_read);
    EXPECT_EQ(b.nr, SYS_read);
    EXPECT_FALSE(sleeps_between_lines(b, Threads(c.pid())));
  }
  ::close(p[0]);
  ::close(p[1]);
}

TEST(SleepsBetweenLines, ASecondThreadMayBeWritingWhileTheFirstSleeps) {
  Child c([] {
    std::thread([] {
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(10));
    }).detach();
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(10));
  });
  ASSERT_TRUE(c.ready());
  // Until the thread exists the process has one, and the rule would hold.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (Threads(c.pid()) != 2 && std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  const BlockedIn b = c.once_in(SYS_clock_nanosleep);
  EXPECT_EQ(b.nr, SYS_clock_nanosleep);
  EXPECT_EQ(Threads(c.pid()), 2);
  EXPECT_FALSE(sleeps_between_lines(b, Threads(c.pid())));
}

TEST(SleepsBetweenLines, AWorkerThatRunsIsInNoWait) {
  Child c([] {
    volatile unsigned long spins = 0;
    for (;;) spins = spins + 1;
  });
  ASSERT_TRUE(c.ready());
  for (int i = 0; i < 200; ++i) {
    const BlockedIn b = blocked_in_of(c.pid());
    EXPECT_FALSE(sleeps_between_lines(b, Threads(c.pid()))) << "read as blocked in " << b.nr;
  }
  EXPECT_EQ(blocked_in_of(-5).nr, -1);  // no such process
}

// The `alive` look: a process that has not begun to exit still holds what
// it held; a zombie has released it all.
TEST(NotExiting, ALiveProcessIsAndAZombieIsNot) {
  Child c([] {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(10));
  });
  ASSERT_TRUE(c.ready());
  EXPECT_TRUE(NotExiting(c.pid()));
  const pid_t z = ::fork();
  if (z == 0) ::_exit(0);
  ASSERT_GT(z, 0);
  siginfo_t si{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(z), &si, WEXITED | WNOWAIT), 0);  // a zombie now
  EXPECT_FALSE(NotExiting(z));
  ::waitpid(z, nullptr, 0);
  EXPECT_FALSE(NotExiting(z));  // reaped: no such process
}

TEST(SleepsBetweenLines, AFcntlCountsOnlyWhenItWaitsForALock) {
  BlockedIn b;
  b.nr = SYS_fcntl;
  b.arg1 = F_SETLKW;
  EXPECT_TRUE(sleeps_between_lines(b, 1));
  b.arg1 = F_OFD_SETLKW;
  EXPECT_TRUE(sleeps_between_lines(b, 1));
  b.arg1 = F_GETFL;
  EXPECT_FALSE(sleeps_between_lines(b, 1));
  b.arg1 = F_SETLK;
  EXPECT_FALSE(sleeps_between_lines(b, 1));
}

}  // namespace
}  // namespace harness::supervision
