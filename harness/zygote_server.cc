#include "zygote_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "zygote.h"

extern char** environ;

namespace harness {

ZygoteServer::ZygoteServer(const std::string& exe) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return;
  // The zygote's end well above 0-3, so neither the opens of its stdio nor
  // a dup2 onto itself (which would keep it close-on-exec) can lose it.
  if (const int high = ::fcntl(sv[1], F_DUPFD_CLOEXEC, 10); high >= 0) {
    ::close(sv[1]);
    sv[1] = high;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, sv[1], zygote::kSockFd);  // dup2 clears close-on-exec
  // Its own process group: a terminal's ^C goes to the harness, which ends
  // the run; the zygote ends when the run's supervisors are gone.
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&at, 0);
  std::string arg0 = exe, arg1 = zygote::kArg;
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, exe.c_str(), &fa, &at, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  ::close(sv[1]);
  if (rc != 0) {
    ::close(sv[0]);
    return;
  }
  pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  // Every supervisor registers on this end (inherited): a registration the
  // zygote does not take in time is not made, and that trial's workers are exec'd.
  zygote::bound_sends(sv[0]);
  fd_ = sv[0];
}

ZygoteServer::~ZygoteServer() {
  if (fd_ >= 0) ::close(fd_);
  if (pidfd_ < 0) return;
  struct pollfd p {
    pidfd_, POLLIN, 0
  };
  if (::poll(&p, 1, 2000) != 1) ::syscall(SYS_pidfd_send_signal, pidfd_, SIGKILL, nullptr, 0);
  siginfo_t si{};
  while (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_), &si, WEXITED) < 0 &&
         errno == EINTR) {
  }
  ::close(pidfd_);
}

}  // namespace harness
