#include "shmcoord/tracker.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "shmcoord/registry.h"

namespace shmcoord {

Result<ResourceTracker> ResourceTracker::start(const Namespace& ns) {
  if (auto v = ns.validate(); !v) return std::unexpected(v.error());
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0));
  if (pidfd < 0) return std::unexpected(sys_error("pidfd_open", "self", errno));
  const pid_t owner = ::getpid();
  pid_t child = ::fork();
  if (child < 0) {
    int e = errno;
    ::close(pidfd);
    return std::unexpected(sys_error("fork", "resource tracker", e));
  }
  if (child == 0) {
    // Hold nothing of the parent's: an inherited lock or segment fd would keep it alive.
    if (::dup2(pidfd, 3) < 0) ::_exit(1);
    ::syscall(SYS_close_range, 4, ~0U, 0);
    ::prctl(PR_SET_NAME, "shmcoord-track", 0, 0, 0);
    ::signal(SIGINT, SIG_IGN);
    struct pollfd pfd{3, POLLIN, 0};
    while (::poll(&pfd, 1, -1) < 0 && errno == EINTR) {
    }
    if (auto reg = Registry::open(ns, false)) (void)reg->reap();
    ::_exit(0);
  }
  ::close(pidfd);
  // The child exits only after us (or at once, if it could not even dup2), and
  // until we reap it its pid stays its: this pidfd is the tracker's.
  int tracker = static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
  if (tracker < 0) {
    const int e = errno;
    if (e != ESRCH) ::kill(child, SIGKILL);  // ESRCH: already gone (and reaped: SIGCHLD ignored)
    while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
    }
    return std::unexpected(sys_error("pidfd_open", "resource tracker", e));
  }
  return ResourceTracker(child, tracker, owner);
}

ResourceTracker::~ResourceTracker() {
  if (pidfd_ < 0) return;
  if (::getpid() == owner_) {
    // Through the pidfd: a pid reused by another process is never signalled.
    if (::syscall(SYS_pidfd_send_signal, pidfd_, SIGKILL, nullptr, 0) == 0) {
      while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }
  ::close(pidfd_);
}

}  // namespace shmcoord
