#include "supervisor.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <grp.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string_view>
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "events.h"

extern char** environ;

namespace harness {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr int kEventsFd = 3;

// What a worker's process must be before exec: it dies with the supervisor,
// starts with a clean signal state, writes events on fd 3, has its stdio in
// its log files, and takes on the injected identity and limits. Runs in the
// forked child: only async-signal-safe calls.
// A failure before exec is written (as errno) to `report_fd`, a close-on-exec
// pipe: the supervisor reads nothing if exec worked.
[[noreturn]] void exec_worker(pid_t parent, const char* exe, char* const* argv, char* const* envp, int events_fd,
                              int out_fd, int err_fd, int uid, int gid, long nofile, int report_fd) {
  auto die = [report_fd](int) {
    int e = errno;
    (void)!::write(report_fd, &e, sizeof e);
    ::_exit(127);
  };
  // Its own process group, so a whole-job kill (killpg) takes its whole tree.
  // It stays out of the terminal's foreground group like the supervisor.
  if (::setpgid(0, 0) != 0) die(110);
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) die(111);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGINT, SIG_DFL);
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0 || ::dup2(devnull, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) die(112);
  if (events_fd == kEventsFd) {
    if (::fcntl(kEventsFd, F_SETFD, 0) < 0) die(113);
  } else if (::dup2(events_fd, kEventsFd) < 0) {  // dup2 clears FD_CLOEXEC on fd 3
    die(113);
  }
  // Close every other inherited fd but the report pipe (close-on-exec itself).
  if (report_fd > kEventsFd + 1) ::syscall(SYS_close_range, kEventsFd + 1, report_fd - 1, 0);
  ::syscall(SYS_close_range, std::max(kEventsFd, report_fd) + 1, ~0U, 0);
  if (nofile >= 0) {
    struct rlimit rl{static_cast<rlim_t>(nofile), static_cast<rlim_t>(nofile)};
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) die(114);
  }
  if (gid >= 0 && (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0)) die(115);
  if (uid >= 0 && ::setuid(uid) != 0) die(116);
  ::execve(exe, argv, envp);
  die(117);
}

// One field of /proc/<pid>/stat after the command: 0 = state, 1 = ppid,
// 2 = pgrp. Returns false if the process is gone.
bool proc_stat(pid_t pid, char* state, int* ppid = nullptr, int* pgrp = nullptr) {
  char path[64], buf[512];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');
  char st = 0;
  int pp = 0, pg = 0;
  if (!p || std::sscanf(p + 2, "%c %d %d", &st, &pp, &pg) != 3) return false;
  *state = st;
  if (ppid) *ppid = pp;
  if (pgrp) *pgrp = pg;
  return true;
}

std::vector<pid_t> proc_pids() {
  std::vector<pid_t> out;
  if (DIR* d = ::opendir("/proc")) {
    while (auto* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (!n.empty() && n.find_first_not_of("0123456789") == std::string::npos) out.push_back(std::stoi(n));
    }
    ::closedir(d);
  }
  return out;
}

// What a signal observably did to a process, and when, as the supervisor saw
// it (/proc/<pid>/stat state). Taken for the fault event.
struct Delivery {
  std::int64_t before = 0;  // taken before kill(2): the target was certainly untouched until here
  std::int64_t sent = 0;    // kill(2) returned: the signal is pending
  std::int64_t effect = 0;  // first time the effect was seen (0: not seen within the bound)
  const char* effect_name = "unconfirmed";
  bool ok = false;          // kill(2) succeeded
};

struct Worker {
  int job = -1, rank = -1;
  bool alive = true;
  bool killed_by_harness = false;
  bool teardown = false;
};

class Supervisor {
 public:
  Supervisor(const TrialPlan& p, const SupervisorConfig& c, bool pid_ns) : plan_(p), cfg_(c), pid_ns_(pid_ns) {}

  int run() {
    log_ = EventLog(cfg_.trial_dir + "/history.jsonl");
    if (!log_.ok()) return 3;
    ::chmod((cfg_.trial_dir + "/history.jsonl").c_str(), 0666);  // workers may run as another uid
    isolate();
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, nullptr);

    start_ = mono_ns();
    log_.emit({{"type", "trial"}, {"phase", "start"}, {"t", start_}, {"isolation", isolation_}, {"root", root_},
               {"pid_namespace", pid_ns_}, {"scenario", plan_.scenario}, {"trial", plan_.trial}, {"seed", plan_.seed}});
    if (!proc_error_.empty()) {  // pids would be looked up in another namespace's /proc: nothing is meaningful
      log_.emit({{"type", "harness-error"}, {"message", proc_error_}});
      log_.emit({{"type", "trial"}, {"phase", "end"}, {"timed_out", false}});
      return 3;
    }
    if (!cfg_.command.empty() && isolation_ != "mount-namespace" && !cfg_.allow_shared_shm) {
      // An external subject uses fixed names in /dev/shm and $TMPDIR: without a
      // private namespace it would meet (and clean up!) the machine's own.
      log_.emit({{"type", "harness-error"},
                 {"message", "refusing to run an external subject without a private /dev/shm "
                             "(no mount namespace here; --allow-shared-shm overrides)"}});
      log_.emit({{"type", "trial"}, {"phase", "end"}, {"timed_out", false}});
      return 0;
    }
    seed();
    for (const auto& w : plan_.workers) {
      pid_t pid = spawn(w.env, "job" + std::to_string(w.job) + "-rank" + std::to_string(w.rank), &w);
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
    ::chmod(lock_dir_.c_str(), 01777);  // like /tmp: workers may run as another uid
    if (cfg_.allow_mount_ns && ::unshare(CLONE_NEWNS) == 0 &&
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
        ::mount("shmstress", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
                ("size=" + (plan_.shm_size.empty() ? std::string("256m") : plan_.shm_size) + ",mode=1777").c_str()) == 0) {
      isolation_ = "mount-namespace";
      root_ = cfg_.shm_root.value_or("shmstress.");
      // Our own /proc, so pids in it are those of the trial's pid namespace:
      // the subject's liveness checks read /proc/<pid>/stat.
      if (pid_ns_ && ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
        proc_error_ = std::string("cannot mount /proc for the trial's pid namespace: ") + std::strerror(errno);
      }
      return;
    }
    if (pid_ns_) proc_error_ = "in a pid namespace without a mount namespace for its /proc";
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

  pid_t spawn(const std::map<std::string, std::string>& extra, const std::string& label, const WorkerPlan* w = nullptr) {
    std::map<std::string, std::string> env = base_env();
    for (const auto& [k, v] : extra) env[k] = v;
    std::string lock_dir = lock_dir_;
    if (w && !w->lock_subdir.empty()) {  // misconfiguration: this rank's TMPDIR differs
      lock_dir += "/" + w->lock_subdir;
      fs::create_directories(lock_dir);
      ::chmod(lock_dir.c_str(), 01777);
    }
    env["SHMSTRESS_EVENTS"] = cfg_.trial_dir + "/history.jsonl";
    // Also open, as fd 3: a worker running as another uid may not reach the path.
    env["SHMSTRESS_EVENTS_FD"] = std::to_string(kEventsFd);
    env["SHMSTRESS_ROOT"] = root_;
    env["SHMSTRESS_LOCK_DIR"] = lock_dir;
    env["TMPDIR"] = lock_dir;  // subjects that put lock files in $TMPDIR stay inside the trial
    if (cfg_.allow_shared_shm) env["SHMSTRESS_ALLOW_SHARED_SHM"] = "1";  // the user said so
    std::vector<std::string> kvs;
    for (const auto& [k, v] : env) kvs.push_back(k + "=" + v);
    fs::path dir = cfg_.trial_dir + "/" + label;
    fs::create_directories(dir);
    // Everything the child needs is prepared here: after fork it only makes syscalls.
    std::vector<char*> envp;
    for (auto& kv : kvs) envp.push_back(kv.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = cfg_.command.empty() ? std::vector<std::string>{cfg_.exe} : cfg_.command;
    args.push_back("worker");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string exe = args.front();
    int out = ::open((dir / "stdout.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int err = ::open((dir / "stderr.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0 || err < 0) {
      log_.emit({{"type", "harness-error"}, {"message", "cannot open the logs of " + label + ": " + std::strerror(errno)}});
      if (out >= 0) ::close(out);
      if (err >= 0) ::close(err);
      return -1;
    }
    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) report[0] = report[1] = -1;
    const pid_t me = ::getpid();
    pid_t pid = ::fork();
    if (pid == 0) {
      exec_worker(me, exe.c_str(), argv.data(), envp.data(), log_.fd(), out, err, w ? w->uid : -1, w ? w->gid : -1,
                  w ? w->nofile : -1, report[1]);
    }
    ::close(out);
    ::close(err);
    if (report[1] >= 0) ::close(report[1]);
    if (pid < 0) {
      log_.emit({{"type", "harness-error"}, {"message", "fork failed for " + label + ": " + std::strerror(errno)}});
      if (report[0] >= 0) ::close(report[0]);
      return -1;
    }
    int child_errno = 0;
    ssize_t n = -1;
    if (report[0] >= 0) {
      do {
        n = ::read(report[0], &child_errno, sizeof child_errno);
      } while (n < 0 && errno == EINTR);
      ::close(report[0]);
    }
    if (n == static_cast<ssize_t>(sizeof child_errno)) {  // never became a worker: the harness failed
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      log_.emit({{"type", "harness-error"},
                 {"message", "cannot start " + label + " (" + exe + "): " + std::strerror(child_errno)}});
      return -1;
    }
    return pid;  // this supervisor is its one reaper (waitpid below)
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

  // Event-triggered actions: the history is tailed for the trigger, then the
  // action fires at_ns after it. Timed actions keep their plan order.
  struct Trigger {
    const Action* a;
    int seen = 0;
    std::int64_t fire_at = -1;
    bool done = false;
  };

  void poll_triggers(std::vector<Trigger>& triggers) {
    if (triggers.empty()) return;
    if (tail_fd_ < 0) tail_fd_ = ::open((cfg_.trial_dir + "/history.jsonl").c_str(), O_RDONLY | O_CLOEXEC);
    char buf[65536];
    ssize_t n;
    while (tail_fd_ >= 0 && (n = ::read(tail_fd_, buf, sizeof buf)) > 0) tail_buf_.append(buf, static_cast<std::size_t>(n));
    std::size_t nl;
    while ((nl = tail_buf_.find('\n')) != std::string::npos) {
      std::string line = tail_buf_.substr(0, nl);
      tail_buf_.erase(0, nl + 1);
      auto e = Json::parse(line, nullptr, false);
      if (!e.is_object()) continue;
      for (auto& t : triggers) {
        if (t.done || t.fire_at >= 0) continue;
        const Action& a = *t.a;
        if (e.value("type", "") != a.on_type || e.value("job", -2) != a.on_job || e.value("rank", -2) != a.on_rank) continue;
        if (e.value("op", "") != a.on_op && e.value("name", "") != a.on_op) continue;
        if (++t.seen == a.on_nth) t.fire_at = e.value("t", mono_ns()) + a.at_ns;
      }
    }
    std::int64_t now = mono_ns();
    for (auto& t : triggers) {
      if (!t.done && t.fire_at >= 0 && t.fire_at <= now) {
        act(*t.a);
        t.done = true;
      }
    }
  }

  void main_loop() {
    std::vector<const Action*> timed;
    std::vector<Trigger> triggers;
    for (const auto& a : plan_.actions) {
      if (a.on_type.empty()) {
        timed.push_back(&a);
      } else {
        triggers.push_back(Trigger{&a});
      }
    }
    std::size_t next = 0;
    const std::int64_t deadline = start_ + plan_.timeout_ns;
    while (true) {
      reap();
      if (!any_worker_alive()) return;
      poll_triggers(triggers);
      std::int64_t now = mono_ns();
      std::vector<const Action*> due;
      while (next < timed.size() && start_ + timed[next]->at_ns <= now) due.push_back(timed[next++]);
      if (!due.empty()) act_all(due);
      if (now >= deadline) {
        timed_out_ = true;
        log_.emit({{"type", "trial"}, {"phase", "timeout"}, {"timed_out", true}});
        return;
      }
      std::int64_t wake = deadline;
      if (next < timed.size()) wake = std::min(wake, start_ + timed[next]->at_ns);
      bool pending = false;
      for (const auto& t : triggers) pending |= !t.done;
      if (pending) wake = std::min(wake, mono_ns() + 1'000'000);  // tail the history every ms
      wait_chld(wake);
    }
  }

  // Sends `sig` to the worker (or its whole process group: its tree).
  static Delivery send(pid_t pid, int sig, bool tree) {
    Delivery d;
    d.before = mono_ns();
    int rc = tree ? ::kill(-pid, sig) : -1;
    if (rc != 0) rc = ::kill(pid, sig);
    d.sent = mono_ns();
    d.ok = rc == 0;
    return d;
  }

  // Whether the effect of `sig` on pid shows in /proc/<pid>/stat: exited
  // (SIGKILL: a zombie until we reap it, and we are its only reaper), stopped
  // (SIGSTOP) or running again (SIGCONT).
  static const char* effect_of(pid_t pid, int sig) {
    char st = 0;
    bool present = proc_stat(pid, &st);
    if (sig == SIGKILL && (!present || st == 'Z' || st == 'X')) return "exited";
    if (sig == SIGSTOP && present && (st == 'T' || st == 't')) return "stopped";
    if (sig == SIGCONT && present && st != 'T' && st != 't') return "continued";
    return nullptr;
  }

  // Watches each delivery for its effect, for at most 100 ms in all.
  static void observe(std::vector<std::pair<pid_t, int>> targets, std::vector<Delivery*> ds) {
    const std::int64_t until = mono_ns() + 100'000'000;
    for (int spin = 0;; ++spin) {
      bool pending = false;
      for (std::size_t i = 0; i < ds.size(); ++i) {
        Delivery& d = *ds[i];
        if (!d.ok || d.effect) continue;
        auto [pid, sig] = targets[i];
        if (sig != SIGKILL && sig != SIGSTOP && sig != SIGCONT) {
          d.effect_name = "not observable";
          continue;
        }
        if (const char* e = effect_of(pid, sig)) {
          d.effect = mono_ns();
          d.effect_name = e;
        } else {
          pending = true;
        }
      }
      if (!pending || mono_ns() >= until) return;
      if (spin > 100) {
        struct timespec ts{0, 50'000};
        ::nanosleep(&ts, nullptr);
      } else {
        ::sched_yield();
      }
    }
  }

  // The members of a process group (the worker's tree), zombies included.
  static Json group_members(pid_t pgid) {
    Json out = Json::array();
    for (pid_t p : proc_pids()) {
      char st = 0;
      int pg = 0;
      if (proc_stat(p, &st, nullptr, &pg) && pg == pgid) out.push_back(p);
    }
    return out;
  }

  void act(const Action& a) { act_all({&a}); }

  // Carries out actions due at the same moment: every signal is sent first,
  // then their effects are watched, then each is logged, so "together" means
  // within microseconds, not one delivery check apart.
  void act_all(const std::vector<const Action*>& due) {
    struct Sent {
      const Action* a;
      pid_t pid;
      Delivery d;
    };
    std::vector<Sent> sent;
    for (const Action* ap : due) {
      const Action& a = *ap;
      if (a.job < 0) {  // aimed at the trial's world, not a worker (e.g. a small /dev/shm)
        log_.emit({{"type", "fault"}, {"kind", a.fault}, {"phase", a.phase}, {"job", -1}, {"rank", -1}, {"detail", a.detail}});
        continue;
      }
      pid_t pid = pid_of(a.job, a.rank);
      if (pid <= 0) continue;  // the target already exited: nothing happened, nothing to log
      if (a.signal == 0) {     // a setting the worker started with (emfile, fiu-errno, ...): log it
        log_.emit({{"type", "fault"}, {"kind", a.fault}, {"phase", a.phase}, {"job", a.job}, {"rank", a.rank},
                   {"pid", pid}, {"signal", 0}, {"detail", a.detail}});
        continue;
      }
      char st = 0;
      if (!proc_stat(pid, &st) || st == 'Z' || st == 'X') continue;  // exited by itself, not yet reaped
      if (a.signal == SIGKILL) workers_[pid].killed_by_harness = true;
      sent.push_back({&a, pid, send(pid, a.signal, a.tree)});
    }
    std::vector<std::pair<pid_t, int>> targets;
    std::vector<Delivery*> ds;
    for (auto& x : sent) {
      targets.push_back({x.pid, x.a->signal});
      ds.push_back(&x.d);
    }
    std::vector<Json> trees(sent.size());
    for (std::size_t i = 0; i < sent.size(); ++i) {  // before the members die and are reaped
      if (sent[i].a->tree && sent[i].d.ok) trees[i] = group_members(sent[i].pid);
    }
    observe(targets, ds);
    for (std::size_t i = 0; i < sent.size(); ++i) {
      const Action& a = *sent[i].a;
      const Delivery& d = sent[i].d;
      if (!d.ok) continue;
      Json e = {{"type", "fault"}, {"kind", a.fault}, {"phase", a.phase}, {"job", a.job}, {"rank", a.rank},
                {"pid", sent[i].pid}, {"signal", a.signal}, {"detail", a.detail},
                // t: before kill(2): the target was untouched until t. sent_t:
                // kill(2) returned, the signal was pending. effect_t: when the
                // supervisor first saw it take effect (absent if not within
                // 100 ms). lag_ns: effect_t (else sent_t) - t.
                {"t", d.before}, {"sent_t", d.sent}, {"effect", d.effect_name},
                {"lag_ns", (d.effect ? d.effect : d.sent) - d.before}};
      if (d.effect) e["effect_t"] = d.effect;
      if (a.tree) {
        e["tree"] = true;
        e["tree_pids"] = trees[i];
      }
      log_.emit(std::move(e));
    }
  }

  // The trial's seeded files and the helpers that hold lock files, each a
  // fault window from now until the heal.
  void seed() {
    for (const Seed& sd : plan_.seeds) {
      std::string path = sd.where == "lock" ? lock_dir_ + "/" + root_ + sd.name : "/dev/shm/" + root_ + sd.name;
      std::string logged = sd.where == "lock" ? path : "/" + root_ + sd.name;
      int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (fd < 0) {
        log_.emit({{"type", "harness-error"}, {"message", "cannot seed " + path + ": " + std::strerror(errno)}});
        continue;
      }
      if (!sd.content.empty()) (void)!::write(fd, sd.content.data(), sd.content.size());
      if (sd.size >= 0) (void)!::ftruncate(fd, sd.size);
      if (sd.uid >= 0) (void)!::fchown(fd, sd.uid, sd.uid);
      ::close(fd);
      Json detail = sd.detail.is_object() ? sd.detail : Json::object();
      detail[sd.where == "lock" ? "path" : "name"] = logged;
      if (sd.foreign) detail["foreign"] = true;
      if (!sd.held_by.empty()) {
        pid_t holder = hold_lock(path, sd.held_by == "inherited");
        if (holder <= 0) continue;
        helpers_.push_back(holder);
        detail["held_by"] = sd.held_by;
        detail["holder_pid"] = holder;
        detail["protect"] = true;  // no cleanup may remove it while it is held
      }
      log_.emit({{"type", "fault"}, {"kind", sd.fault}, {"phase", "start"}, {"job", -1}, {"rank", -1}, {"detail", detail}});
      seeded_.push_back({sd.fault, detail});
    }
  }

  // A process that holds `path` with flock: stopped, or (inherited) a
  // forgotten child of a process that has since died, holding its fd.
  pid_t hold_lock(const std::string& path, bool inherited) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return -1;
    const pid_t supervisor = ::getpid();
    pid_t child = ::fork();
    if (child == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      int fd = ::open(path.c_str(), O_RDWR);
      if (fd < 0 || ::flock(fd, LOCK_EX) != 0) ::_exit(1);
      if (inherited) {
        pid_t grandchild = ::fork();
        if (grandchild == 0) {
          // Outlive its parent (that is the point), but not the supervisor: once
          // reparented to it (we are its subreaper), die with it.
          while (::getppid() != supervisor) {
            if (::getppid() == 1) ::_exit(0);
            ::usleep(1000);
          }
          ::prctl(PR_SET_PDEATHSIG, SIGKILL);
          if (::getppid() != supervisor) ::_exit(0);
          for (;;) ::pause();
        }
        (void)!::write(p[1], &grandchild, sizeof grandchild);
        ::_exit(0);  // the "dead rank": its child keeps the lock through the inherited fd
      }
      pid_t me = ::getpid();
      (void)!::write(p[1], &me, sizeof me);
      ::raise(SIGSTOP);
      for (;;) ::pause();
    }
    ::close(p[1]);
    pid_t holder = -1;
    if (::read(p[0], &holder, sizeof holder) != sizeof holder) holder = -1;
    ::close(p[0]);
    return holder;
  }

  // The heal: every stopped worker continues; on timeout every worker is killed.
  void heal_and_teardown(bool) {
    for (pid_t h : helpers_) {
      ::kill(h, SIGKILL);
      ::kill(h, SIGCONT);
    }
    // Their locks are released only once they are dead: wait, so the cleanup
    // step that follows does not find them still held.
    for (pid_t h : helpers_) {
      while (::waitpid(h, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    helpers_.clear();
    for (const auto& [kind, detail] : seeded_) {
      log_.emit({{"type", "fault"}, {"kind", kind}, {"phase", "end"}, {"job", -1}, {"rank", -1}, {"detail", detail}});
    }
    seeded_.clear();
    for (auto& [pid, w] : workers_) {
      if (w.alive) ::kill(pid, SIGCONT);
    }
    if (!timed_out_) return;
    for (auto& [pid, w] : workers_) {
      if (!w.alive) continue;
      w.killed_by_harness = true;
      w.teardown = true;
      ::kill(-pid, SIGKILL);  // its whole tree
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

  // The trial's processes still alive besides us. In our own pid namespace
  // that is everything in /proc but pid 1 (us): however a process forked,
  // double-forked or left its group, it is in there. Without one, it is our
  // children (we are the subreaper): a grandchild of a live orphan is only
  // found once that orphan is gone, so the audit scans again after each kill.
  std::vector<pid_t> descendants() const {
    std::vector<pid_t> out;
    const pid_t me = ::getpid();
    for (pid_t p : proc_pids()) {
      char st = 0;
      int ppid = 0;
      if (p == me || !proc_stat(p, &st, &ppid) || st == 'Z' || st == 'X') continue;
      if (pid_ns_ || ppid == me) out.push_back(p);
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
    std::set<pid_t> seen;
    for (int round = 0; round < 50; ++round) {
      std::vector<pid_t> left = pid_ns_ || has_children() ? descendants() : std::vector<pid_t>{};
      bool fresh = false;
      for (pid_t p : left) {
        if (seen.insert(p).second) {
          orphans.push_back(p);
          fresh = true;
        }
        ::kill(p, SIGKILL);
      }
      if (left.empty()) break;
      // Let the killed die and their children be re-parented to us, then look again.
      std::int64_t until2 = mono_ns() + 20'000'000;
      while (mono_ns() < until2) {
        reap();
        wait_chld(until2);
      }
      reap();
      if (!fresh && round > 5) break;
    }
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
  const bool pid_ns_;  // we are init of the trial's own pid namespace
  EventLog log_;
  std::string isolation_, root_, lock_dir_;
  std::string proc_error_;  // set if the trial's pid namespace has no /proc of its own
  std::map<pid_t, Worker> workers_;
  std::map<std::string, std::string> base_env_;
  std::vector<pid_t> helpers_;                         // fault helpers holding lock files
  int tail_fd_ = -1;                                   // reading history.jsonl for event triggers
  std::string tail_buf_;
  std::vector<std::pair<std::string, Json>> seeded_;  // open seed fault windows
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
  // The trial's own pid namespace (with its own /proc, mounted by isolate()):
  // the supervisor proper is its init, so every process of the trial, however
  // it forked, is in its /proc for the orphan audit, and the kernel kills
  // them all when the supervisor exits or dies. This process only waits for
  // it and passes its status on.
  bool pid_ns = false;
  if (cfg.allow_mount_ns) {
    int alive[2];
    if (::pipe2(alive, O_CLOEXEC) == 0 && ::unshare(CLONE_NEWPID) == 0) {
      pid_t init = ::fork();
      if (init < 0) ::_exit(3);
      if (init > 0) {
        ::close(alive[0]);
        int st = 0;
        while (::waitpid(init, &st, 0) < 0 && errno == EINTR) {
        }
        ::_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 3);
      }
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::close(alive[1]);
      // The parent is outside our namespace (getppid() is 0 here): it is gone
      // if the pipe it holds is closed.
      struct pollfd pfd{alive[0], POLLIN, 0};
      if (::poll(&pfd, 1, 0) != 0) ::_exit(3);
      ::close(alive[0]);
      pid_ns = true;
    }
  }
  int rc = 3;
  try {
    rc = Supervisor(plan, cfg, pid_ns).run();
  } catch (...) {
    rc = 3;
  }
  ::_exit(rc);
}

}  // namespace harness
