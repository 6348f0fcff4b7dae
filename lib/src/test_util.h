// Test fixture for multi-process tests: a private namespace per test (unique
// shm root + a fresh lock dir), forked children that report over a pipe, and a
// teardown that kills every child it started and force-removes every name under
// the root, so a failing test leaves nothing in /dev/shm or the lock dir.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <deque>
#include <vector>

#include "shmcoord/namespace.h"

namespace shmcoord::testing {

inline std::vector<std::string> shm_names_with(const std::string& root) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (auto* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.rfind(root, 0) == 0) out.push_back(n);
    }
    ::closedir(d);
  }
  return out;
}

// Returns once the kernel's clock tick (the unit of a process's start time in
// /proc) has advanced, so a process forked next cannot share its start time
// with one forked before: pid + start time then tells them apart, as it does
// for processes of different containers in practice.
inline void next_clock_tick() {
  const long hz = ::sysconf(_SC_CLK_TCK);
  auto tick = [hz] {
    struct timespec ts{};
    ::clock_gettime(CLOCK_BOOTTIME, &ts);
    return (static_cast<long long>(ts.tv_sec) * hz) + ts.tv_nsec / (1000000000LL / hz);
  };
  const long long t0 = tick();
  while (tick() == t0) ::usleep(1000);
}

// In a forked child: keeps only fds 0-2 and `keep` (moved to fd 3), and lowers
// RLIMIT_NOFILE so that exactly `free_fds` more descriptors can be opened.
// Returns the new number of `keep` (3), or -1.
inline int leave_free_fds(int keep, int free_fds) {
  if (keep != 3 && ::dup2(keep, 3) < 0) return -1;
  ::syscall(SYS_close_range, 4, ~0U, 0);
  struct rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
  rl.rlim_cur = static_cast<rlim_t>(4 + free_fds);
  return ::setrlimit(RLIMIT_NOFILE, &rl) == 0 ? 3 : -1;
}

// In a forked child: lowers RLIMIT_AS to the current address space plus
// `headroom` bytes, so a mapping larger than that fails with ENOMEM.
inline bool limit_address_space(std::size_t headroom) {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return false;
  unsigned long pages = 0;
  const bool ok = std::fscanf(f, "%lu", &pages) == 1;
  std::fclose(f);
  if (!ok) return false;
  struct rlimit rl{};
  if (::getrlimit(RLIMIT_AS, &rl) != 0) return false;
  rl.rlim_cur = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) + headroom;
  return ::setrlimit(RLIMIT_AS, &rl) == 0;
}

// True when built with AddressSanitizer, whose shadow memory makes RLIMIT_AS
// meaningless (every allocation would fail first).
inline constexpr bool kAsan =
#if defined(__SANITIZE_ADDRESS__)
    true;
#else
    false;
#endif

// The outer pid of the first child of `parent` (its /proc children list),
// or -1: how a test finds a process forked inside a pid namespace.
inline pid_t first_child_of(pid_t parent) {
  const std::string path = "/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent) + "/children";
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return -1;
  int pid = -1;
  if (std::fscanf(f, "%d", &pid) != 1) pid = -1;
  std::fclose(f);
  return pid;
}

// Blocks until `pid` is asleep in the futex syscall (the kernel's own
// /proc/<pid>/syscall, no guessing): a locker blocked on a lock. False after `timeout`.
inline bool wait_in_futex(pid_t pid, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const std::string path = "/proc/" + std::to_string(pid) + "/syscall";
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (FILE* f = std::fopen(path.c_str(), "r")) {
      long nr = -1;
      const bool got = std::fscanf(f, "%ld", &nr) == 1;
      std::fclose(f);
      if (got && nr == SYS_futex) return true;
    }
    ::usleep(1000);
  }
  return false;
}

struct ChildProc {
  pid_t pid = -1;
  int out = -1;  // read end: what the child reported
  pid_t ns_init = -1;  // fork_in_pid_namespace: the namespace's init, as we see it
};

class ShmTest : public ::testing::Test {
 protected:
  // A test binary that crashed cannot run its teardown: sweep names of dead test processes.
  static void SetUpTestSuite() {
    for (const auto& n : shm_names_with("shmct.")) {
      int pid = std::atoi(n.c_str() + 6);
      if (pid > 0 && ::kill(pid, 0) < 0 && errno == ESRCH) ::shm_unlink(("/" + n).c_str());
    }
  }

  void SetUp() override {
    static int counter = 0;
    ns.root = "shmct." + std::to_string(::getpid()) + "." + std::to_string(++counter) + ".";
    char tmpl[] = "/tmp/shmct-lock-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    ns.lock_dir = tmpl;
  }

  void TearDown() override {
    for (auto& c : children_) {
      if (c.ns_init > 0) ::kill(c.ns_init, SIGKILL);  // takes the whole pid namespace with it
      if (c.pid > 0) {
        ::kill(c.pid, SIGCONT);
        ::kill(c.pid, SIGKILL);
        ::waitpid(c.pid, nullptr, 0);
      }
      if (c.out >= 0) ::close(c.out);
    }
    // Trackers and grandchildren run in our process group only briefly; give them a moment.
    for (const auto& n : shm_names_with(ns.root)) ::shm_unlink(("/" + n).c_str());
    std::error_code ec;
    std::filesystem::remove_all(ns.lock_dir, ec);
  }

  // Forgets children already waited for, closing what they reported on (a
  // test that forks hundreds of times must not leak a pipe per child).
  void forget_children() {
    for (auto& c : children_) {
      if (c.out >= 0) ::close(c.out);
    }
    children_.clear();
  }

  // Runs f in a forked child; f gets a write fd to report on and returns the exit code.
  ChildProc& fork_child(const std::function<int(int)>& f) {
    int p[2];
    EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      int rc = 99;
      try {
        rc = f(p[1]);
      } catch (...) {
        rc = 98;
      }
      ::_exit(rc);
    }
    ::close(p[1]);
    children_.push_back(ChildProc{pid, p[0]});
    return children_.back();
  }

  static void report(int fd, const std::string& s) {
    std::string line = s + "\n";
    (void)!::write(fd, line.data(), line.size());
  }

  // Reads one line the child reported (blocks up to `timeout`).
  static std::string read_line(const ChildProc& c, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    std::string s;
    auto until = std::chrono::steady_clock::now() + timeout;
    char ch;
    while (std::chrono::steady_clock::now() < until) {
      struct pollfd pfd{c.out, POLLIN, 0};  // poll, not select: no FD_SETSIZE limit
      if (::poll(&pfd, 1, 20) <= 0) continue;
      ssize_t n = ::read(c.out, &ch, 1);
      if (n <= 0) return s.empty() ? "<eof>" : s;
      if (ch == '\n') return s;
      s += ch;
    }
    return "<timeout>";
  }

  // Waits for the child; returns exit code, or 128+signal.
  int wait_child(ChildProc& c) {
    int st = 0;
    ::waitpid(c.pid, &st, 0);
    c.pid = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }

  void kill_child(ChildProc& c, int sig = SIGKILL) {
    ::kill(c.pid, sig);
    if (sig == SIGKILL) wait_child(c);
  }

  // Blocks until the child is stopped (e.g. by a SHMCOORD pause point): the
  // kernel's own notification, no guessing. False if it exited instead or
  // did not stop within `timeout`.
  static bool wait_stopped(const ChildProc& c, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      int st = 0;
      pid_t r = ::waitpid(c.pid, &st, WUNTRACED | WNOHANG);
      if (r == c.pid) return WIFSTOPPED(st);
      if (r < 0) return false;
      ::usleep(1000);
    }
    return false;
  }

  // Runs f as pid 2 of a new pid namespace with its own /proc, the way a
  // container with --ipc=host sees the host's /dev/shm: everything shm is
  // shared, no pid is. The helper process (our child) unshares pid and mount
  // namespaces (mounts made private, so nothing leaks to the host), forks the
  // namespace's init (pid 1, which mounts /proc and dies with its parent), and
  // init forks f. Init reports "stopped" when f stops and exits with f's code.
  // Kill c.ns_init to kill everything in the namespace. Needs root.
  ChildProc& fork_in_pid_namespace(const std::function<int(int)>& f) {
    int p[2], q[2];
    EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(q, O_CLOEXEC), 0);  // the init's outer pid
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      ::close(q[0]);
      if (::unshare(CLONE_NEWPID | CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
        report(p[1], std::string("unshare: ") + std::strerror(errno));
        ::_exit(97);
      }
      pid_t init = ::fork();
      if (init == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) ::_exit(96);
        pid_t job = ::fork();
        if (job == 0) {
          int rc = 99;
          try {
            rc = f(p[1]);
          } catch (...) {
            rc = 98;
          }
          ::_exit(rc);
        }
        // Keep only the report pipe: an inherited gate's write end here would
        // keep f's gate from ever opening.
        ::syscall(SYS_close_range, 3, p[1] - 1, 0);
        ::syscall(SYS_close_range, p[1] + 1, ~0U, 0);
        for (;;) {
          int st = 0;
          if (::waitpid(job, &st, WUNTRACED) < 0) ::_exit(95);
          if (WIFSTOPPED(st)) {
            report(p[1], "stopped");
            continue;
          }
          ::_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        }
      }
      (void)!::write(q[1], &init, sizeof init);
      ::syscall(SYS_close_range, 3, ~0U, 0);
      int st = 0;
      ::waitpid(init, &st, 0);
      ::_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
    ::close(p[1]);
    ::close(q[1]);
    pid_t init = -1;
    if (::read(q[0], &init, sizeof init) != sizeof init) init = -1;
    ::close(q[0]);
    children_.push_back(ChildProc{pid, p[0], init});
    return children_.back();
  }

  // A pipe the parent writes to release children waiting in wait_go().
  struct Gate {
    int r = -1, w = -1;
    Gate() {
      int p[2];
      (void)!::pipe(p);
      r = p[0];
      w = p[1];
    }
    ~Gate() {
      if (r >= 0) ::close(r);
      if (w >= 0) ::close(w);
    }
    void open_all() {
      ::close(w);
      w = -1;
    }
    // In a child: drop our copy of the write end, then block until the parent opens the gate.
    void wait_go() {
      if (w >= 0) ::close(w);
      w = -1;
      char c;
      while (::read(r, &c, 1) > 0) {
      }
    }
  };

  Namespace ns;
  std::deque<ChildProc> children_;  // deque: references stay valid as children are added
};

}  // namespace shmcoord::testing
