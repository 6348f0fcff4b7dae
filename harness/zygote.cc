#include "zygote.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <vector>

#include "worker.h"
#include "worker_process.h"

extern char** environ;

namespace harness::zygote {
namespace {

ssize_t read_full(int fd, void* p, std::size_t n) {
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, static_cast<char*>(p) + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return static_cast<ssize_t>(got);
    got += static_cast<std::size_t>(r);
  }
  return static_cast<ssize_t>(got);
}

// Where glibc keeps this thread's id and robust-mutex list (the trial
// zygote's, at the same addresses in each child): a child cloned by hand
// must have them set as glibc's fork sets them, or a robust mutex it holds
// would not be released when it dies.
struct ThreadSelf {
  pid_t* tid = nullptr;
  void* robust = nullptr;
  std::size_t robust_len = 0;
};

// The worker's own process, a child of the supervisor from birth: made what
// an exec'd worker is (worker_process.h), then the worker proper. A
// failure before that is its errno on `status` (the trial's zygote answers
// with it, and the supervisor reaps what is left, as after a failed exec),
// then _exit(127); success closes `status`.
[[noreturn]] void become_worker(const Request& q, char* env, std::size_t env_bytes,
                                const int fds[kRequestFds], int status) {
  WorkerProcess w;
  w.parent = 1;  // the supervisor, the trial's init
  w.events_fd = fds[0];
  w.out_fd = fds[1];
  w.err_fd = fds[2];
  w.cwd_fd = fds[3];
  w.keep_fd = status;  // above 3: 0-3 were taken when it was made
  w.nofile = q.nofile;
  w.uid = q.uid;
  w.gid = q.gid;
  if (!become_worker_process(w)) {
    const std::int32_t e = errno != 0 ? errno : EINVAL;
    (void)!::write(status, &e, sizeof e);
    ::_exit(127);
  }
  // The request's environment is this process's whole environment (its
  // own copy of the zygote's buffer, never freed).
  static std::vector<char*> envp;
  for (std::size_t at = 0; at < env_bytes;) {
    char* kv = env + at;
    std::size_t len = ::strnlen(kv, env_bytes - at);
    if (len == env_bytes - at) break;  // unterminated: the rest is not an entry
    if (len > 0) envp.push_back(kv);
    at += len + 1;
  }
  envp.push_back(nullptr);
  environ = envp.data();
  ::close(status);  // started: the trial's zygote reads end of file
  std::exit(worker_main());
}

// Receives one message on `sock` into `buf`, its fds (close-on-exec) into
// `fds`. Returns its length, 0 at end of file, -1 on error, -2 if it was
// cut; *nfds is how many fds came (any beyond `max` are closed).
ssize_t receive(int sock, char* buf, std::size_t size, int* fds, int max, int* nfds) {
  struct iovec iov {
    buf, size
  };
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)];
  struct msghdr m {};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  ssize_t n;
  while ((n = ::recvmsg(sock, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  *nfds = 0;
  if (n < 0) return -1;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < k; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (*nfds < max) {
        fds[(*nfds)++] = fd;
      } else {
        ::close(fd);
      }
    }
  }
  if ((m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) return -2;
  return n;
}

// The trial's zygote: a child of the supervisor in the trial's namespaces,
// starting that trial's workers until the supervisor closes the connection.
// Each worker is a clone with CLONE_PARENT, so it is the supervisor's child
// from birth (to reap, stop and signal, as an exec'd one is); otherwise the
// clone is glibc's fork of a single-threaded process: the child's thread id
// written where glibc reads it, its robust-mutex list registered again.
[[noreturn]] void serve_trial(int conn, int go) {
  char c = 0;
  if (read_full(go, &c, 1) != 1) ::_exit(1);  // the run's zygote died before we were re-parented
  ::close(go);
  // The hello: our pid (the supervisor kills us if we fail it later), or
  // why we cannot start its workers (it execs them instead).
  ThreadSelf self;
  Reply hello{static_cast<std::int32_t>(::getpid()), 0};
#if !defined(__x86_64__)
  // The raw clone below passes the child's tid pointer where x86-64 takes it.
  errno = ENOSYS;
  hello.error = ENOSYS;
#endif
  if (hello.error != 0 || ::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != 1 ||
      ::prctl(PR_GET_TID_ADDRESS, &self.tid) != 0 || self.tid == nullptr ||
      ::syscall(SYS_get_robust_list, 0, &self.robust, &self.robust_len) != 0)
    hello.error = errno != 0 ? errno : ESRCH;
  if (::send(conn, &hello, sizeof hello, MSG_NOSIGNAL) != sizeof hello || hello.error != 0)
    ::_exit(1);
  // Each answer waits for its worker's set-up (a worker that could not be
  // made what an exec'd one is never runs as one: the supervisor reaps it,
  // as after a failed exec), and answers go in the order asked; the next
  // clone does not wait for them.
  struct Pending {
    std::int32_t pid = 0, error = 0;
    int status = -1;  // the set-up's outcome to read; -1: known
  };
  std::deque<Pending> pending;
  static char* buf = new char[kMaxRequest + 1];
  bool open = true;
  for (;;) {
    while (!pending.empty()) {  // what is known, oldest first
      Pending& x = pending.front();
      if (x.status >= 0) {
        struct pollfd q {
          x.status, POLLIN, 0
        };
        if (::poll(&q, 1, 0) != 1) break;
        std::int32_t e = 0;
        if (read_full(x.status, &e, sizeof e) == sizeof e) x.error = e != 0 ? e : EPROTO;
        ::close(x.status);
      }
      const Reply r{x.pid, x.error};
      pending.pop_front();
      if (::send(conn, &r, sizeof r, MSG_NOSIGNAL) != sizeof r) ::_exit(0);
    }
    if (!open && pending.empty()) ::_exit(0);  // the supervisor is done with us
    struct pollfd w[2];
    nfds_t nw = 0;
    if (open) w[nw++] = {conn, POLLIN, 0};
    if (!pending.empty()) w[nw++] = {pending.front().status, POLLIN, 0};
    if (::poll(w, nw, -1) < 0 && errno != EINTR) ::_exit(1);
    if (!open || w[0].revents == 0) continue;
    int fds[kRequestFds];
    int nfds = 0;
    const ssize_t n = receive(conn, buf, kMaxRequest + 1, fds, kRequestFds, &nfds);
    if (n == 0 || n == -1) {
      open = false;
      continue;
    }
    Pending x;
    int status[2];
    if (n < 0 || nfds != kRequestFds || static_cast<std::size_t>(n) < sizeof(Request)) {
      x.error = EPROTO;
    } else if (::pipe2(status, O_CLOEXEC) != 0) {
      x.error = errno;
    } else {
      Request q;
      std::memcpy(&q, buf, sizeof q);
      const long c =
          ::syscall(SYS_clone, CLONE_PARENT | CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD,
                    nullptr, nullptr, self.tid, nullptr);
      if (c == 0) {
        ::syscall(SYS_set_robust_list, self.robust, self.robust_len);
        ::close(status[0]);
        become_worker(q, buf + sizeof q, static_cast<std::size_t>(n) - sizeof q, fds, status[1]);
      }
      const int clone_errno = errno;
      ::close(status[1]);  // before the next clone: only this worker holds it
      if (c < 0) {
        x.error = clone_errno;
        ::close(status[0]);
      } else {
        x.pid = static_cast<std::int32_t>(c);
        x.status = status[0];
      }
    }
    for (int k = 0; k < nfds; ++k) ::close(fds[k]);
    pending.push_back(x);
  }
}

// Starts trial `fds` (zygote.h: its connection, pid, mount and network
// namespaces)'s own zygote: enters the trial's pid namespace for its
// children, forks a middle process there that enters the trial's mount and
// network namespaces and forks the trial's zygote, and reaps the middle, so
// the trial's zygote is re-parented to the trial's init (the supervisor)
// and can clone the supervisor's children. Each fork is glibc's.
void start_trial(int own_pid_ns, const int fds[kRegisterFds]) {
  int status[2], go[2];
  if (::pipe2(status, O_CLOEXEC) != 0) return;
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) != 0) {
    ::close(status[0]), ::close(status[1]);
    return;
  }
  pid_t middle = -1;
  if (::setns(fds[1], CLONE_NEWPID) == 0) {
    middle = ::fork();
    if (middle == 0) {
      ::close(status[0]);
      ::close(go[0]);
      std::int32_t v = -1;
      if (::setns(fds[2], CLONE_NEWNS) == 0 && ::setns(fds[3], CLONE_NEWNET) == 0) {
        const pid_t z = ::fork();
        if (z == 0) {
          ::close(status[1]);
          // Nothing of ours but the connection and the go (both above fd
          // 3, the registration socket's place), and 0-2.
          const unsigned a = static_cast<unsigned>(std::min(fds[0], go[1]));
          const unsigned b = static_cast<unsigned>(std::max(fds[0], go[1]));
          ::syscall(SYS_close_range, kSockFd, a - 1, 0);
          if (b > a + 1) ::syscall(SYS_close_range, a + 1, b - 1, 0);
          ::syscall(SYS_close_range, b + 1, ~0U, 0);
          serve_trial(fds[0], go[1]);
        }
        v = z;
      }
      (void)!::write(status[1], &v, sizeof v);
      ::_exit(0);
    }
    if (::setns(own_pid_ns, CLONE_NEWPID) != 0) ::_exit(1);  // would fork into a trial forever
  }
  ::close(status[1]);
  ::close(go[1]);
  if (middle > 0) {
    while (::waitpid(middle, nullptr, 0) < 0 && errno == EINTR) {
    }
    std::int32_t z = 0;
    // Re-parented now: it may go on (it waits for this, or dies with us).
    if (read_full(status[0], &z, sizeof z) == sizeof z && z > 0)
      (void)!::send(go[0], "g", 1, MSG_NOSIGNAL);
  }
  ::close(status[0]);
  ::close(go[0]);
}

}  // namespace

int serve(int sock) {
  // Only a registration socket as ZygoteServer makes one (not whatever else
  // a caller left on fd 3).
  int type = 0;
  socklen_t len = sizeof type;
  if (::getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_SEQPACKET) {
    std::fputs(
        "shmstress-worker zygote: fd 3 is not the harness's registration socket; shmstress starts "
        "the zygote itself\n",
        stderr);
    return 2;
  }
  ::syscall(SYS_close_range, kSockFd + 1, ~0U, 0);  // nothing of the harness's
  // To come back to after each trial's fork.
  const int own_pid_ns = ::open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
  if (own_pid_ns < 0) return 1;  // every supervisor execs instead
  char tag[16];
  for (;;) {
    int fds[kRegisterFds];
    int nfds = 0;
    const ssize_t n = receive(sock, tag, sizeof tag, fds, kRegisterFds, &nfds);
    if (n == 0 || n == -1) return 0;  // every holder of the harness's end is gone
    if (n > 0 && nfds == kRegisterFds) start_trial(own_pid_ns, fds);
    for (int i = 0; i < nfds; ++i) ::close(fds[i]);
  }
}

}  // namespace harness::zygote
