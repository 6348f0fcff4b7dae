#include "shmcoord/process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace shmcoord {
namespace {

TEST(Process, SelfIsAliveWithAStartTime) {
  ProcessId me = self_identity();
  EXPECT_EQ(me.pid, ::getpid());
  EXPECT_GT(me.start_time, 0u);
  EXPECT_EQ(liveness(me), Liveness::kAlive);
}

TEST(Process, ZombieAndReapedChildrenAreDead) {
  pid_t c = ::fork();
  if (c == 0) ::_exit(0);
  auto id = identity_of(c);
  ASSERT_TRUE(id);
  // Returns once the child has exited, leaving it a zombie (WNOWAIT: not reaped).
  siginfo_t si{};
  ASSERT_EQ(::waitid(P_PID, c, &si, WEXITED | WNOWAIT), 0);
  EXPECT_EQ(liveness(*id), Liveness::kDead);
  ::waitpid(c, nullptr, 0);
  EXPECT_EQ(liveness(*id), Liveness::kDead);
}

TEST(Process, StoppedProcessIsAliveButStopped) {
  pid_t c = ::fork();
  if (c == 0) {
    ::pause();
    ::_exit(0);
  }
  auto id = identity_of(c);
  ASSERT_TRUE(id);
  ::kill(c, SIGSTOP);
  int st = 0;
  ASSERT_EQ(::waitpid(c, &st, WUNTRACED), c);  // returns once the child is stopped
  ASSERT_TRUE(WIFSTOPPED(st));
  EXPECT_EQ(liveness(*id), Liveness::kStopped);
  EXPECT_TRUE(is_alive(*id));
  ::kill(c, SIGKILL);
  ::waitpid(c, nullptr, 0);
}

// A reused pid is another process: a different start time makes it dead.
TEST(Process, SamePidWithAnotherStartTimeIsDead) {
  ProcessId me = self_identity();
  ProcessId impostor{me.pid, me.start_time + 1};
  EXPECT_EQ(liveness(impostor), Liveness::kDead);
}

TEST(Process, UnknownPidIsNotFound) {
  auto id = identity_of(0x3fffffff);
  ASSERT_FALSE(id);
  EXPECT_EQ(id.error().code, Code::kNotFound);
}

}  // namespace
}  // namespace shmcoord
