#include "worker_exe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "subjects.h"
#include "worker_token.h"

extern char** environ;

namespace harness {
namespace {

// What `exe --build-token` prints, or why there is nothing to compare. A
// worker that does not answer within the limit is killed: a run never waits on
// a stray binary.
std::string ask_token(const std::string& exe, std::chrono::milliseconds limit, std::string* why) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    *why = std::string("pipe: ") + std::strerror(errno);
    return "";
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::string a0 = exe, a1 = "--build-token";
  char* argv[] = {a0.data(), a1.data(), nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(p[1]);
  if (rc != 0) {
    ::close(p[0]);
    *why = std::string("cannot run it: ") + std::strerror(rc);
    return "";
  }
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  bool timed_out = false;
  while (out.size() < 256) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{p[0], POLLIN, 0};
    const int n = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      timed_out = n == 0;
      break;
    }
    char buf[128];
    const ssize_t r = ::read(p[0], buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    out.append(buf, static_cast<std::size_t>(r));
  }
  ::close(p[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    *why = "it did not answer --build-token within " + std::to_string(limit.count()) + " ms";
    return "";
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *why = "--build-token failed (" +
           (WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                : "exit " + std::to_string(WEXITSTATUS(status))) +
           ")";
    return "";
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

}  // namespace

const char* worker_build_token() { return SHMSTRESS_WORKER_TOKEN; }

WorkerExe stock_worker_exe(const std::string& self, std::chrono::milliseconds answer_within) {
  const std::string sibling = (std::filesystem::path(self).parent_path() / "shmstress-worker").string();
  struct stat st{};
  if (::stat(sibling.c_str(), &st) != 0) return {self, ""};
  auto passed_over = [&](const std::string& why) {
    return WorkerExe{self, why + ": workers run as " + self + " worker"};
  };
  std::string why;
  if (!check_program({sibling}, &why)) return passed_over(why);  // the supervisor's execve could not start it
  const std::string token = ask_token(sibling, answer_within, &why);
  if (token.empty()) {
    return passed_over(sibling + " is unusable (" + (why.empty() ? std::string("it printed no token") : why) + ")");
  }
  if (token != SHMSTRESS_WORKER_TOKEN) {
    return passed_over(sibling + " is from another build (its token " + token.substr(0, 64) +
                       ", this build's " + SHMSTRESS_WORKER_TOKEN + ")");
  }
  return {sibling, ""};
}

}  // namespace harness
