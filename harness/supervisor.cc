#include "supervisor.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/process/v2/environment.hpp>
#include <boost/process/v2/process.hpp>
#include <boost/process/v2/stdio.hpp>
// Boost.Process v2 (1.81) needs its environment implementation compiled in exactly one TU.
#include <boost/process/v2/impl/environment.ipp>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "events.h"

extern char** environ;

namespace harness {
namespace {

namespace bp = boost::process::v2;
namespace fs = std::filesystem;
using Json = nlohmann::json;

// Runs in the child between fork and exec: die with the supervisor.
struct DieWithParent {
  pid_t parent;
  template <typename Launcher>
  std::error_code on_exec_setup(Launcher&, const bp::filesystem::path&, const char* const*&) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(111);  // the supervisor died before prctl took effect
    // The supervisor blocks SIGCHLD and ignores SIGINT; a worker starts with neither.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGINT, SIG_DFL);
    return {};
  }
};

struct Worker {
  int job = -1, rank = -1;
  bool alive = true;
  bool killed_by_harness = false;
  bool teardown = false;
};

class Supervisor {
 public:
  Supervisor(const TrialPlan& p, const SupervisorConfig& c) : plan_(p), cfg_(c) {}

  int run() {
    log_ = EventLog(cfg_.trial_dir + "/history.jsonl");
    if (!log_.ok()) return 3;
    isolate();
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, nullptr);

    start_ = mono_ns();
    log_.emit({{"type", "trial"}, {"phase", "start"}, {"t", start_}, {"isolation", isolation_}, {"root", root_},
               {"scenario", plan_.scenario}, {"trial", plan_.trial}, {"seed", plan_.seed}});
    for (const auto& w : plan_.workers) {
      pid_t pid = spawn(w.env, "job" + std::to_string(w.job) + "-rank" + std::to_string(w.rank));
      if (pid > 0) {
        workers_[pid] = Worker{w.job, w.rank};
      } else {
        log_.emit({{"type", "harness-error"}, {"message", "spawn failed for job " + std::to_string(w.job) + " rank " + std::to_string(w.rank)}});
      }
    }
    main_loop();
    heal_and_teardown(false);
    reap_until_workers_gone(mono_ns() + 5'000'000'000LL);
    if (plan_.final_cleanup) cleanup_step();
    audit();
    log_.emit({{"type", "trial"}, {"phase", "end"}, {"timed_out", timed_out_}});
    return 0;
  }

 private:
  void isolate() {
    lock_dir_ = cfg_.trial_dir + "/locks";
    fs::create_directories(lock_dir_);
    if (cfg_.allow_mount_ns && ::unshare(CLONE_NEWNS) == 0 &&
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
        ::mount("shmstress", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=256m,mode=1777") == 0) {
      isolation_ = "mount-namespace";
      root_ = "shmstress.";
      return;
    }
    isolation_ = "name-root";
    root_ = cfg_.fallback_root;
  }

  // The environment every worker starts from: ours, minus injection knobs,
  // plus where the trial lives. Built once per trial.
  const std::map<std::string, std::string>& base_env() {
    if (!base_env_.empty()) return base_env_;
    for (char** e = environ; *e; ++e) {
      std::string kv = *e;
      auto eq = kv.find('=');
      if (eq != std::string::npos) base_env_[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    base_env_.erase("SHMCOORD_CRASH_AT");
    base_env_.erase("FIU_ENABLE");
    return base_env_;
  }

  pid_t spawn(const std::map<std::string, std::string>& extra, const std::string& label) {
    std::map<std::string, std::string> env = base_env();
    for (const auto& [k, v] : extra) env[k] = v;
    env["SHMSTRESS_EVENTS"] = cfg_.trial_dir + "/history.jsonl";
    env["SHMSTRESS_ROOT"] = root_;
    env["SHMSTRESS_LOCK_DIR"] = lock_dir_;
    env["TMPDIR"] = lock_dir_;  // subjects that put lock files in $TMPDIR stay inside the trial
    std::vector<std::string> kvs;
    for (const auto& [k, v] : env) kvs.push_back(k + "=" + v);
    fs::path dir = cfg_.trial_dir + "/" + label;
    fs::create_directories(dir);
    try {
      boost::asio::io_context ctx;
      bp::process proc(ctx, cfg_.exe, {"worker"},
                       bp::process_stdio{nullptr, bp::filesystem::path((dir / "stdout.log").string()),
                                         bp::filesystem::path((dir / "stderr.log").string())},
                       bp::process_environment(kvs), DieWithParent{::getpid()});
      pid_t pid = proc.id();
      proc.detach();  // this supervisor is the one reaper (waitpid below)
      return pid;
    } catch (const std::exception& e) {
      log_.emit({{"type", "harness-error"}, {"message", std::string("spawn: ") + e.what()}});
      return -1;
    }
  }

  bool any_worker_alive() const {
    for (const auto& [pid, w] : workers_) {
      if (w.alive) return true;
    }
    return false;
  }

  pid_t pid_of(int job, int rank) const {
    for (const auto& [pid, w] : workers_) {
      if (w.job == job && w.rank == rank && w.alive) return pid;
    }
    return -1;
  }

  // Reaps every exited descendant; logs the workers' exits.
  void reap() {
    for (;;) {
      int st = 0;
      pid_t pid = ::waitpid(-1, &st, WNOHANG);
      if (pid <= 0) return;
      if (pid == cleanup_pid_) cleanup_done_ = true;
      auto it = workers_.find(pid);
      if (it == workers_.end()) continue;  // a resource tracker or other descendant
      Worker& w = it->second;
      w.alive = false;
      Json e = {{"type", "exit"}, {"job", w.job}, {"rank", w.rank}, {"pid", pid}};
      if (WIFEXITED(st)) {
        e["exit_code"] = WEXITSTATUS(st);
      } else if (WIFSIGNALED(st)) {
        e["signal"] = WTERMSIG(st);
        e["by_harness"] = w.killed_by_harness && WTERMSIG(st) == SIGKILL;
        e["teardown"] = w.teardown;
      }
      log_.emit(std::move(e));
    }
  }

  void wait_chld(std::int64_t until) {
    std::int64_t left = until - mono_ns();
    if (left <= 0) return;
    left = std::min<std::int64_t>(left, 50'000'000);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    struct timespec ts{static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
    ::sigtimedwait(&set, nullptr, &ts);
  }

  void main_loop() {
    std::size_t next = 0;
    const std::int64_t deadline = start_ + plan_.timeout_ns;
    while (true) {
      reap();
      if (!any_worker_alive()) return;
      std::int64_t now = mono_ns();
      while (next < plan_.actions.size() && start_ + plan_.actions[next].at_ns <= now) {
        act(plan_.actions[next++]);
      }
      if (now >= deadline) {
        timed_out_ = true;
        log_.emit({{"type", "trial"}, {"phase", "timeout"}, {"timed_out", true}});
        return;
      }
      std::int64_t wake = deadline;
      if (next < plan_.actions.size()) wake = std::min(wake, start_ + plan_.actions[next].at_ns);
      wait_chld(wake);
    }
  }

  void act(const Action& a) {
    pid_t pid = pid_of(a.job, a.rank);
    if (pid <= 0) return;  // the target already exited: nothing happened, nothing to log
    if (a.signal == SIGKILL) workers_[pid].killed_by_harness = true;
    if (::kill(pid, a.signal) != 0) return;
    log_.emit({{"type", "fault"}, {"kind", a.fault}, {"phase", a.phase}, {"job", a.job}, {"rank", a.rank},
               {"pid", pid}, {"signal", a.signal}, {"detail", a.detail}});
  }

  // The heal: every stopped worker continues; on timeout every worker is killed.
  void heal_and_teardown(bool) {
    for (auto& [pid, w] : workers_) {
      if (w.alive) ::kill(pid, SIGCONT);
    }
    if (!timed_out_) return;
    for (auto& [pid, w] : workers_) {
      if (!w.alive) continue;
      w.killed_by_harness = true;
      w.teardown = true;
      ::kill(pid, SIGKILL);
    }
  }

  void reap_until_workers_gone(std::int64_t until) {
    while (any_worker_alive() && mono_ns() < until) {
      reap();
      wait_chld(until);
    }
    reap();
  }

  void cleanup_step() {
    std::map<std::string, std::string> env = {{"SHMSTRESS_ROLE", "cleanup"}, {"SHMSTRESS_JOB", "-1"}, {"SHMSTRESS_RANK", "-1"}};
    cleanup_pid_ = spawn(env, "cleanup");
    if (cleanup_pid_ <= 0) return;
    workers_[cleanup_pid_] = Worker{-1, -1};
    std::int64_t until = mono_ns() + 10'000'000'000LL;
    while (!cleanup_done_ && mono_ns() < until) {
      reap();
      wait_chld(until);
    }
    if (!cleanup_done_) {
      ::kill(cleanup_pid_, SIGKILL);
      log_.emit({{"type", "harness-error"}, {"message", "cleanup step did not finish in 10 s"}});
    }
  }

  std::vector<pid_t> descendants() const {
    std::vector<pid_t> out;
    pid_t me = ::getpid();
    for (const auto& e : fs::directory_iterator("/proc")) {
      std::string n = e.path().filename();
      if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos) continue;
      FILE* f = std::fopen(("/proc/" + n + "/stat").c_str(), "r");
      if (!f) continue;
      char buf[512];
      size_t len = std::fread(buf, 1, sizeof buf - 1, f);
      std::fclose(f);
      buf[len] = 0;
      const char* p = std::strrchr(buf, ')');
      if (!p) continue;
      char state;
      int ppid;
      if (std::sscanf(p + 2, "%c %d", &state, &ppid) == 2 && ppid == me && state != 'Z') out.push_back(std::stoi(n));
    }
    return out;
  }

  // As subreaper every descendant of the trial is our child: one waitpid says
  // whether any is left, without scanning /proc.
  static bool has_children() {
    siginfo_t si{};
    return ::waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == 0;
  }

  void audit() {
    // Stragglers (resource trackers of killed workers) get a moment to finish.
    std::int64_t until = mono_ns() + 1'000'000'000LL;
    while (has_children() && mono_ns() < until) {
      reap();
      if (!has_children()) break;
      wait_chld(mono_ns() + 20'000'000);
    }
    reap();
    Json orphans = Json::array();
    for (pid_t p : has_children() ? descendants() : std::vector<pid_t>{}) {
      orphans.push_back(p);
      ::kill(p, SIGKILL);
    }
    reap();
    Json shm = Json::array(), locks = Json::array();
    if (DIR* d = ::opendir("/dev/shm")) {
      while (auto* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n == "." || n == "..") continue;
        if (isolation_ == "mount-namespace" || n.rfind(root_, 0) == 0) shm.push_back(n);
      }
      ::closedir(d);
    }
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(lock_dir_, ec)) locks.push_back(e.path().string());
    log_.emit({{"type", "audit"}, {"leftover_shm", shm}, {"leftover_locks", locks}, {"orphans", orphans}});
    // The trial's own leftovers go now that they are on record (a mount namespace drops them anyway).
    if (isolation_ != "mount-namespace") {
      for (const auto& n : shm) ::shm_unlink(("/" + n.get<std::string>()).c_str());
    }
    fs::remove_all(lock_dir_, ec);
  }

  const TrialPlan& plan_;
  const SupervisorConfig& cfg_;
  EventLog log_;
  std::string isolation_, root_, lock_dir_;
  std::map<pid_t, Worker> workers_;
  std::map<std::string, std::string> base_env_;
  std::int64_t start_ = 0;
  bool timed_out_ = false;
  pid_t cleanup_pid_ = -1;
  bool cleanup_done_ = false;
};

}  // namespace

pid_t start_supervisor(const TrialPlan& plan, const SupervisorConfig& cfg) {
  pid_t harness = ::getpid();
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != harness) ::_exit(3);
  ::setpgid(0, 0);
  signal(SIGINT, SIG_IGN);  // the harness decides when a trial stops
  signal(SIGTERM, SIG_DFL);
  int rc = 3;
  try {
    rc = Supervisor(plan, cfg).run();
  } catch (...) {
    rc = 3;
  }
  ::_exit(rc);
}

}  // namespace harness
