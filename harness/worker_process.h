// What a trial's worker process is before any code of its own runs (the
// process contract of docs/worker-protocol.md, "Start"), made by the child
// itself on both start paths: an exec'd worker's vfork child before its
// execve (supervisor_spawn.cc), and a worker the trial's zygote clones
// (zygote.cc). One function, so the two paths cannot drift apart
// (zygote_test compares what they make).
//
// Raw syscalls and thin wrappers only: a vfork child shares the
// supervisor's memory until it execs, and glibc's setuid and friends would
// try to reach the supervisor's other threads.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace harness {

struct WorkerProcess {
  pid_t parent = 0;    // getppid() must be this (0 in a container: its parent is outside)
  int mnt_ns_fd = -1;  // >= 0: enter this mount namespace (a container's, with its own /proc)
  int cwd_fd = -1;     // the worker's own dir (<trial>/<label>): where it starts, after any setns
  int events_fd = -1, out_fd = -1, err_fd = -1;  // become fds 3, 1, 2 (0 is /dev/null)
  int keep_fd = -1;        // > 3: left open as well (the zygote's set-up status pipe)
  long nofile = -1;        // >= 0: its RLIMIT_NOFILE, soft and hard
  int uid = -1, gid = -1;  // >= 0: the identity it drops to
};

// Makes the calling process what `w` says: the leader of its own process
// group, dead with its parent, in its dir, with fds 0-3 and no other (but
// keep_fd), its fd limit and identity, and an empty signal mask. Its
// signal handlers are the caller's to reset. Returns false with errno at
// the first step that fails.
inline bool become_worker_process(const WorkerProcess& w) {
  // Its own process group, so a whole-job kill (killpg) takes its whole
  // tree; it stays out of the terminal's foreground group like the
  // supervisor.
  if (::setpgid(0, 0) != 0) return false;
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return false;
  if (::getppid() != w.parent) return (errno = ESRCH), false;  // the parent died meanwhile
  if (w.mnt_ns_fd >= 0 && ::setns(w.mnt_ns_fd, CLONE_NEWNS) != 0) return false;
  if (w.cwd_fd >= 0 && ::fchdir(w.cwd_fd) != 0) return false;
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0 || ::dup2(devnull, 0) < 0 || ::dup2(w.out_fd, 1) < 0 || ::dup2(w.err_fd, 2) < 0)
    return false;
  // dup2 clears FD_CLOEXEC, but not onto the fd itself.
  if ((w.events_fd != 3 && ::dup2(w.events_fd, 3) < 0) || ::fcntl(3, F_SETFD, 0) < 0) return false;
  // Every other fd goes, as exec would close the close-on-exec ones.
  if (w.keep_fd > 3) {
    if (w.keep_fd > 4) ::syscall(SYS_close_range, 4U, static_cast<unsigned>(w.keep_fd - 1), 0);
    ::syscall(SYS_close_range, static_cast<unsigned>(w.keep_fd + 1), ~0U, 0);
  } else {
    ::syscall(SYS_close_range, 4U, ~0U, 0);
  }
  if (w.nofile >= 0) {
    struct rlimit rl {
      static_cast<rlim_t>(w.nofile), static_cast<rlim_t>(w.nofile)
    };
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) return false;
  }
  if (w.gid >= 0 &&
      (::syscall(SYS_setgroups, 0, nullptr) != 0 || ::syscall(SYS_setgid, w.gid) != 0))
    return false;
  if (w.uid >= 0 && ::syscall(SYS_setuid, w.uid) != 0) return false;
  if (w.uid >= 0 || w.gid >= 0) {
    // A change of identity clears the parent-death signal, and (without an
    // exec after it) leaves the process not dumpable, its /proc entries
    // root's: both as an exec'd worker has them again.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::prctl(PR_SET_DUMPABLE, 1) != 0) return false;
    if (::getppid() != w.parent) return (errno = ESRCH), false;
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  return true;
}

}  // namespace harness
