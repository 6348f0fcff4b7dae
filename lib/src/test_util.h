// Test fixture for multi-process tests: a private namespace per test (unique
// shm root + a fresh lock dir), forked children that report over a pipe, and a
// teardown that kills every child it started and force-removes every name under
// the root, so a failing test leaves nothing in /dev/shm or the lock dir.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
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

struct ChildProc {
  pid_t pid = -1;
  int out = -1;  // read end: what the child reported
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
      fd_set set;
      FD_ZERO(&set);
      FD_SET(c.out, &set);
      struct timeval tv{0, 20000};
      if (::select(c.out + 1, &set, nullptr, nullptr, &tv) <= 0) continue;
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
