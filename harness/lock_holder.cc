#include "lock_holder.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace harness::supervision {

namespace {

// The inherited holder, in the grandchild. Its parent (`parent`) exits at
// once; the kernel signals the re-parenting (PR_SET_PDEATHSIG is sent after
// the new parent is set), so no polling of getppid() is needed. Each parent
// pid is read once: the supervisor may itself be pid 1 (init of the trial's
// pid namespace), so "re-parented to init" and "re-parented to us" can be the
// same number and must not be told apart by two reads of a moving value.
[[noreturn]] void hold_as_orphan(pid_t parent, pid_t caller, int report_fd) {
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  sigprocmask(SIG_BLOCK, &usr1, nullptr);
  ::prctl(PR_SET_PDEATHSIG, SIGUSR1);
  // If the parent is gone already the signal was never armed for it.
  if (::getppid() == parent) {
    while (::sigwaitinfo(&usr1, nullptr) != SIGUSR1) {
    }
  }
  // Outlive the parent (that is the point), but never the caller.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != caller) ::_exit(0);
  const pid_t me = ::getpid();
  (void)!::write(report_fd, &me, sizeof me);
  ::close(report_fd);
  for (;;) ::pause();
}

}  // namespace

pid_t hold_lock(const std::string& path, bool inherited) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return -1;
  const pid_t caller = ::getpid();
  pid_t child = ::fork();
  if (child < 0) {
    ::close(p[0]), ::close(p[1]);
    return -1;
  }
  if (child == 0) {
    ::close(p[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != caller) ::_exit(1);
    int fd = ::open(path.c_str(), O_RDWR);
    if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) ::_exit(1);
    const pid_t me = ::getpid();
    if (inherited) {
      if (::fork() == 0) hold_as_orphan(me, caller, p[1]);
      ::_exit(0);  // the "dead rank": its child keeps the lock through the inherited fd
    }
    (void)!::write(p[1], &me, sizeof me);
    ::close(p[1]);
    ::raise(SIGSTOP);
    for (;;) ::pause();
  }
  ::close(p[1]);
  pid_t holder = -1;
  ssize_t n;
  while ((n = ::read(p[0], &holder, sizeof holder)) < 0 && errno == EINTR) {
  }
  if (n != sizeof holder) holder = -1;  // every writer gone without a word: no holder
  ::close(p[0]);
  if (inherited || holder < 0) {
    // The dead rank (or a holder that failed): reaped here, not left to
    // whoever reaps the caller's unknown children.
    while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  return holder;
}

}  // namespace harness::supervision
