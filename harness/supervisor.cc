#include "supervisor.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <net/if.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <functional>
#include <map>
#include <set>
#include <string_view>
#include <utility>

#include "events.h"

extern char** environ;

namespace harness {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr int kEventsFd = 3;

// Subjects write the history too, so what the supervisor reads of it while
// the trial runs (triggers, a replacement's round, a ghost's prefix) takes a
// field only when it has the protocol's type; anything else reads as absent.
// A malformed line never throws out of the trial: check_trial_dir reports it
// afterwards as a history error.
std::string str_of(const Json& e, const char* key) {
  auto it = e.find(key);
  return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
}
std::int64_t int_of(const Json& e, const char* key, std::int64_t def) {
  auto it = e.find(key);
  if (it == e.end()) return def;
  if (it->is_number_integer() && !it->is_number_unsigned()) return it->get<std::int64_t>();
  if (it->is_number_unsigned() && it->get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return static_cast<std::int64_t>(it->get<std::uint64_t>());
  }
  return def;
}

// What a worker's process needs before exec. Prepared by the parent: the
// forked child only makes syscalls with it.
struct ChildSetup {
  pid_t parent = 0;  // getppid() must be this (0 in a container: its parent is outside its pid namespace)
  const char* exe = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  int events_fd = -1, out_fd = -1, err_fd = -1;
  int uid = -1, gid = -1;
  long nofile = -1;
  int report_fd = -1;
  int mnt_ns_fd = -1;  // >= 0: enter this mount namespace (a container's, with its own /proc)
  int cwd_fd = -1;     // the worker's own dir (<trial>/<label>): where it starts, after any setns
};

// What a worker's process must be before exec: the leader of its own process
// group, dead with the supervisor, with a clean signal state, events on fd 3,
// stdio in its log files, and the injected identity, limits and container.
// Runs in the forked child: only async-signal-safe calls. A failure before
// exec is written (as errno) to `report_fd`, a close-on-exec pipe: the
// supervisor reads nothing if exec worked.
[[noreturn]] void report_errno_and_exit(int report_fd) {
  int e = errno;
  (void)!::write(report_fd, &e, sizeof e);
  ::_exit(127);
}

[[noreturn]] void exec_worker(const ChildSetup& c) {
  // (A free function, not a [[noreturn]] lambda: clang refuses the attribute there.)
  auto die = [&c](int) { report_errno_and_exit(c.report_fd); };
  // Its own process group, so a whole-job kill (killpg) takes its whole tree.
  // It stays out of the terminal's foreground group like the supervisor.
  if (::setpgid(0, 0) != 0) die(110);
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != c.parent) die(111);
  if (c.mnt_ns_fd >= 0 && ::setns(c.mnt_ns_fd, CLONE_NEWNS) != 0) die(118);
  if (c.cwd_fd >= 0 && ::fchdir(c.cwd_fd) != 0) die(119);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGINT, SIG_DFL);
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0 || ::dup2(devnull, 0) < 0 || ::dup2(c.out_fd, 1) < 0 || ::dup2(c.err_fd, 2) < 0) die(112);
  if (c.events_fd == kEventsFd) {
    if (::fcntl(kEventsFd, F_SETFD, 0) < 0) die(113);
  } else if (::dup2(c.events_fd, kEventsFd) < 0) {  // dup2 clears FD_CLOEXEC on fd 3
    die(113);
  }
  // Close every other inherited fd but the report pipe (close-on-exec itself).
  if (c.report_fd > kEventsFd + 1) ::syscall(SYS_close_range, kEventsFd + 1, c.report_fd - 1, 0);
  ::syscall(SYS_close_range, std::max(kEventsFd, c.report_fd) + 1, ~0U, 0);
  if (c.nofile >= 0) {
    struct rlimit rl{static_cast<rlim_t>(c.nofile), static_cast<rlim_t>(c.nofile)};
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) die(114);
  }
  if (c.gid >= 0 && (::setgroups(0, nullptr) != 0 || ::setgid(c.gid) != 0)) die(115);
  if (c.uid >= 0 && ::setuid(c.uid) != 0) die(116);
  ::execve(c.exe, c.argv, c.envp);
  report_errno_and_exit(c.report_fd);
}

// /proc/<pid>/stat after the command's closing parenthesis (the command may
// hold spaces and parentheses itself), from the field after it, the state.
// False if the process is gone.
bool stat_fields(pid_t pid, std::string* out) {
  char path[64], buf[1024];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');
  if (!p || p[1] != ' ') return false;
  out->assign(p + 2);
  return true;
}

// /proc/<pid>/stat after the command: state, ppid, pgrp and (field 22) the
// start time in clock ticks. False if the process is gone.
struct ProcStat {
  char state = 0;
  int ppid = 0, pgrp = 0;
  std::uint64_t start = 0;
};
bool proc_stat(pid_t pid, ProcStat* out) {
  std::string f;
  if (!stat_fields(pid, &f)) return false;
  // state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
  // stime cutime cstime priority nice threads itrealvalue starttime
  unsigned long long start = 0;
  if (std::sscanf(f.c_str(), "%c %d %d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                  &out->state, &out->ppid, &out->pgrp, &start) != 4) {
    return false;
  }
  out->start = start;
  return true;
}
bool proc_state(pid_t pid, char* state) {
  ProcStat ps;
  if (!proc_stat(pid, &ps)) return false;
  *state = ps.state;
  return true;
}

// Whether a process ended by `sig` died of the harness's doing: it sent a
// terminating signal (last_signal) and the process died of that one or of a
// SIGKILL (a tree kill, the heal).
bool ended_by_harness(bool killed_by_harness, int last_signal, int sig) {
  return killed_by_harness && (sig == SIGKILL || sig == last_signal);
}

// Whether the process runs still: it exists and is no zombie (dead, its
// parent not yet told).
bool running(pid_t pid) {
  char st = 0;
  return proc_state(pid, &st) && st != 'Z' && st != 'X';
}

// The wait status of a zombie that is not our child, as its parent's
// waitpid() would give it: /proc/<pid>/stat field 52 (exit_code). False if
// the process is not (or no longer) a zombie.
bool zombie_status(pid_t pid, int* wstatus) {
  std::string f;
  if (!stat_fields(pid, &f) || f.empty() || f[0] != 'Z') return false;
  // Fields after the comm: state is field 3; exit_code is field 52.
  int field = 3;
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (f[i] != ' ') continue;
    if (++field == 52) {
      *wstatus = std::atoi(f.c_str() + i + 1);
      return true;
    }
  }
  return false;
}

// The pid a process has in its own (innermost) pid namespace: the last field
// of NSpid in /proc/<pid>/status. `pid` itself when it shares ours.
pid_t own_pid(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("NSpid:", 0) != 0) continue;
    auto last = line.find_last_of(" \t");
    if (last != std::string::npos) return static_cast<pid_t>(std::atoi(line.c_str() + last + 1));
  }
  return pid;
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

// Adds a delivery's times to a fault event (docs/worker-protocol.md).
void add_delivery(Json& e, const Delivery& d) {
  e["t"] = d.before;
  e["sent_t"] = d.sent;
  e["effect"] = d.effect_name;
  e["lag_ns"] = (d.effect ? d.effect : d.sent) - d.before;
  if (d.effect) e["effect_t"] = d.effect;
}

struct Worker {
  int job = -1, rank = -1;
  bool launcher = false;             // the job's launcher (torchrun's agent), not a rank
  int last_signal = 0;               // the last terminating signal the harness sent it
  std::int64_t spawned_t = 0;        // when it was started: its settings (rlimits, fiu, uid) hold from here
  pid_t self_pid = 0;                // its pid as it sees it (its container's), logged in events
  const WorkerPlan* plan = nullptr;  // null for the cleanup step
  bool alive = true;
  bool killed_by_harness = false;
  bool teardown = false;
  bool stopped_by_harness = false;   // a SIGSTOP of ours is in effect
  bool self_stop_seen = false;       // its OnStop has fired
};

// A container of the trial: a pid namespace whose pid 1 does nothing but reap,
// with its own mount namespace for its own /proc (/dev/shm is the trial's).
struct Container {
  pid_t init = -1;
  int pid_ns_fd = -1;
  int mnt_ns_fd = -1;
};

// A process of the trial the supervisor did not start and learns of from its
// own `start` event: a loader worker a rank forked, or a rank a launcher
// started. Its exit is logged like a worker's: the supervisor watches it
// through a pidfd (exit time), reads its status from its zombie before its
// parent reaps it, or reaps it itself once it is re-parented here.
struct Tracked {
  int job = -1, rank = -1, worker = -1;
  pid_t self_pid = 0;
  std::string role;
  int pidfd = -1;
  bool alive = true;
  bool killed_by_harness = false;
  int last_signal = 0;
  bool teardown = false;
};

// A launcher that ended, and the processes of its job that were alive then
// (job.teardown): each is watched until it is gone.
struct Teardown {
  int job = -1;
  pid_t launcher_self = 0;
  std::int64_t t = 0;
  std::int64_t bound_ns = 0;
  struct Member {
    pid_t pid;        // ours
    pid_t self_pid;   // as it sees itself
    std::string role;
    std::int64_t gone_t = 0;  // 0: still alive
  };
  std::vector<Member> members;
};

class Supervisor {
 public:
  Supervisor(const TrialPlan& p, const SupervisorConfig& c, bool pid_ns) : plan_(p), cfg_(c), pid_ns_(pid_ns) {}

  int run() {
    trial_dir_ = fs::absolute(cfg_.trial_dir).string();
    log_ = EventLog(trial_dir_ + "/history.jsonl");
    if (!log_.ok()) return 3;
    ::chmod((trial_dir_ + "/history.jsonl").c_str(), 0666);  // workers may run as another uid
    isolate();
    if (isolation_ == "name-root") shared_before_ = shm_entries();
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, nullptr);

    start_ = mono_ns();
    prev_look_wait_ = cpu_wait_ns();
    log_.emit({{"type", "trial"}, {"phase", "start"}, {"t", start_}, {"isolation", isolation_}, {"root", root_},
               {"pid_namespace", pid_ns_}, {"scenario", plan_.scenario}, {"trial", plan_.trial}, {"seed", plan_.seed}});
    log_settings(-1, -1, 0, start_);  // the trial's world (a small /dev/shm) is set from here
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
    for (const Ghost& g : plan_.ghosts) run_ghost(g);
    for (const auto& w : plan_.workers) {
      if (w.container >= 0 && !containers_.contains(w.container)) make_container(w.container);
    }
    make_gate();
    for (const auto& w : plan_.workers) {
      if (launcher_of(plan_, w.job)) continue;  // its launcher starts it
      if (start_worker(w, w.env, "job" + std::to_string(w.job) + "-rank" + std::to_string(w.rank)) <= 0) {
        log_.emit({{"type", "harness-error"}, {"message", "spawn failed for job " + std::to_string(w.job) + " rank " + std::to_string(w.rank)}});
        continue;
      }
      awaiting_.insert({w.job, w.rank});
    }
    for (const LauncherPlan& lp : plan_.launchers) {
      if (start_launcher(lp) <= 0) continue;
      for (const auto& w : plan_.workers) {
        if (w.job == lp.job) awaiting_.insert({w.job, w.rank});
      }
    }
    main_loop();
    heal_and_teardown();
    reap_until_workers_gone(mono_ns() + 5'000'000'000LL);
    if (plan_.final_cleanup) cleanup_step();
    audit();
    if (!gate_path_.empty()) ::unlink(gate_path_.c_str());  // a trial that ended before its gate opened
    log_.emit({{"type", "trial"}, {"phase", "end"}, {"timed_out", timed_out_}});
    return 0;
  }

 private:
  // A launcher listens on loopback ports of its own (torchrun's store): the
  // trial gets its own network namespace, so trials running side by side
  // never meet on a port, and brings its loopback up.
  void own_network() {
    if (plan_.launchers.empty() || ::unshare(CLONE_NEWNET) != 0) return;
    int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    struct ifreq ifr{};
    std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    if (::ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
      ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
      ::ioctl(fd, SIOCSIFFLAGS, &ifr);
    }
    ::close(fd);
  }

  void isolate() {
    lock_dir_ = trial_dir_ + "/locks";
    fs::create_directories(lock_dir_);
    ::chmod(lock_dir_.c_str(), 01777);  // like /tmp: workers may run as another uid
    if (cfg_.allow_mount_ns && ::unshare(CLONE_NEWNS) == 0 &&
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
        ::mount("shmstress", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
                ("size=" + shm_size() + ",mode=1777").c_str()) == 0) {
      isolation_ = "mount-namespace";
      root_ = cfg_.shm_root.value_or("shmstress.");
      own_network();
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

  // The trial's /dev/shm: a fault's size (enospc), else the subject's own
  // (joblib uses /dev/shm only with 2 GB free), else 256m. A tmpfs size is a
  // limit, not an allocation.
  std::string shm_size() const {
    if (!plan_.shm_size.empty()) return plan_.shm_size;
    return cfg_.shm_size.empty() ? std::string("256m") : cfg_.shm_size;
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
    base_env_.erase("SHMCOORD_PAUSE_AT");
    base_env_.erase("FIU_ENABLE");
    return base_env_;
  }

  struct SpawnOptions {
    const WorkerPlan* w = nullptr;
    int events_fd = -1;   // default: the history
    bool native = false;  // the native worker even when the subject is external
    // A launcher: argv is `launcher... <the worker command> worker`.
    std::vector<std::string> launcher;
  };

  pid_t spawn(const std::map<std::string, std::string>& extra, const std::string& label) {
    return spawn(extra, label, SpawnOptions{});
  }

  pid_t spawn(const std::map<std::string, std::string>& extra, const std::string& label, SpawnOptions o) {
    const WorkerPlan* w = o.w;
    std::map<std::string, std::string> env = base_env();
    for (const auto& [k, v] : extra) env[k] = v;
    std::string lock_dir = lock_dir_;
    if (w && !w->lock_subdir.empty()) {  // misconfiguration: this rank's TMPDIR differs
      lock_dir += "/" + w->lock_subdir;
      fs::create_directories(lock_dir);
      ::chmod(lock_dir.c_str(), 01777);
      lock_subdirs_.insert(lock_dir);
    }
    if (o.events_fd < 0) env["SHMSTRESS_EVENTS"] = trial_dir_ + "/history.jsonl";
    // Also open, as fd 3: a worker running as another uid may not reach the path.
    env["SHMSTRESS_EVENTS_FD"] = std::to_string(kEventsFd);
    // A job in a namespace nested in the trial's ([job] root_suffix), and a
    // rank misconfigured with /dev/shm as its lock dir.
    env["SHMSTRESS_ROOT"] = root_ + (extra.contains("SHMSTRESS_ROOT_SUFFIX") ? extra.at("SHMSTRESS_ROOT_SUFFIX") : "");
    env["SHMSTRESS_LOCK_DIR"] =
        extra.contains("SHMSTRESS_LOCK_DIR_OVERRIDE") ? extra.at("SHMSTRESS_LOCK_DIR_OVERRIDE") : lock_dir;
    env["TMPDIR"] = lock_dir;  // subjects that put lock files in $TMPDIR stay inside the trial
    if (cfg_.allow_shared_shm) env["SHMSTRESS_ALLOW_SHARED_SHM"] = "1";  // the user said so
    if (!gate_path_.empty()) env["SHMSTRESS_GATE"] = gate_path_;
    std::vector<std::string> kvs;
    for (const auto& [k, v] : env) kvs.push_back(k + "=" + v);
    fs::path dir = trial_dir_ + "/" + label;
    fs::create_directories(dir);
    // Everything the child needs is prepared here: after fork it only makes syscalls.
    std::vector<char*> envp;
    for (auto& kv : kvs) envp.push_back(kv.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = o.launcher;
    for (const auto& a : cfg_.command.empty() || o.native ? std::vector<std::string>{cfg_.exe} : cfg_.command) {
      args.push_back(a);
    }
    args.push_back("worker");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string exe = args.front();
    const Container* box = nullptr;
    if (w && w->container >= 0) {
      auto it = containers_.find(w->container);
      if (it == containers_.end() || it->second.init <= 0) {
        log_.emit({{"type", "harness-error"}, {"message", "no container " + std::to_string(w->container) + " for " + label}});
        return -1;
      }
      box = &it->second;
    }
    // O_APPEND: once cap_logs() cuts a log, what the worker writes next goes
    // after the cut, not into a hole at its old offset. O_NOFOLLOW: a worker
    // of an earlier spawn may have put a symlink there (it runs in this dir).
    int out = ::open((dir / "stdout.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    int err = ::open((dir / "stderr.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    // cap_logs() works on these files through fds of its own, never by path:
    // the worker may rename them or put a symlink in their place.
    for (int fd : {out, err}) {
      if (fd >= 0) logs_.emplace_back(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
    }
    if (out < 0 || err < 0) {
      log_.emit({{"type", "harness-error"}, {"message", "cannot open the logs of " + label + ": " + std::strerror(errno)}});
      if (out >= 0) ::close(out);
      if (err >= 0) ::close(err);
      return -1;
    }
    // It starts in its own dir (docs/worker-protocol.md): a subject's
    // relative writes land in the trial, not where shmstress was started.
    const int own_dir = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (own_dir < 0) {
      log_.emit({{"type", "harness-error"}, {"message", "cannot open the dir of " + label + ": " + std::strerror(errno)}});
      ::close(out), ::close(err);
      return -1;
    }
    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) report[0] = report[1] = -1;
    ChildSetup c;
    c.parent = box ? 0 : ::getpid();
    c.exe = exe.c_str();
    c.argv = argv.data();
    c.envp = envp.data();
    c.events_fd = o.events_fd >= 0 ? o.events_fd : log_.fd();
    c.out_fd = out;
    c.err_fd = err;
    c.uid = w ? w->uid : -1;
    c.gid = w ? w->gid : -1;
    c.nofile = w ? w->nofile : -1;
    c.report_fd = report[1];
    c.mnt_ns_fd = box ? box->mnt_ns_fd : -1;
    c.cwd_fd = own_dir;
    // A container's worker is forked into its pid namespace (our children's
    // namespace for this one fork), so it stays our child to reap and signal.
    if (box && ::setns(box->pid_ns_fd, CLONE_NEWPID) != 0) {
      log_.emit({{"type", "harness-error"}, {"message", "cannot enter container " + std::to_string(w->container) + ": " + std::strerror(errno)}});
      ::close(out), ::close(err), ::close(own_dir);
      if (report[0] >= 0) ::close(report[0]), ::close(report[1]);
      return -1;
    }
    pid_t pid = ::fork();
    if (pid == 0) exec_worker(c);
    if (box) ::setns(self_pid_ns_fd_, CLONE_NEWPID);
    ::close(out);
    ::close(err);
    ::close(own_dir);
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

  // Settings (time-0 actions without a signal: emfile, fiu-errno, ... for a
  // worker, a small /dev/shm for the trial's world, job -1) hold from the
  // worker's start, or the trial's: logged right then, with that time, so a
  // worker that fails on one and exits before the supervisor's first round of
  // actions never has a failure no fault explains. Once per action (a
  // replacement worker of the same rank inherits nothing to log).
  void log_settings(int job, int rank, pid_t self_pid, std::int64_t t) {
    for (const Action& a : plan_.actions) {
      if (a.signal != 0 || a.job != job || (job >= 0 && a.rank != rank) || a.at_ns != 0 || !a.on_type.empty() ||
          !settings_logged_.insert(&a).second)
        continue;
      Json e = {{"type", "fault"}, {"kind", a.fault}, {"phase", a.phase}, {"job", a.job}, {"rank", a.rank},
                {"detail", a.detail}, {"t", t}};
      if (job >= 0) e["pid"] = self_pid, e["signal"] = 0;
      log_.emit(std::move(e));
    }
  }

  pid_t start_worker(const WorkerPlan& w, const std::map<std::string, std::string>& env, const std::string& label) {
    // Taken before the fork: the worker may run, fail on its settings and
    // log it before spawn() returns here.
    const std::int64_t before_fork = mono_ns();
    pid_t pid = spawn(env, label, {.w = &w});
    if (pid > 0) {
      Worker x{w.job, w.rank};
      x.spawned_t = before_fork;
      x.plan = &w;
      x.self_pid = w.container >= 0 ? own_pid(pid) : pid;
      workers_[pid] = x;
      log_settings(x.job, x.rank, x.self_pid, x.spawned_t);
    }
    return pid;
  }

  // A job's launcher: torchrun's elastic agent, which starts the job's ranks
  // (`--no_python <worker command> worker`) and restarts them after a
  // failure. Every rank finds its own settings in SHMSTRESS_RANK_ENV. The
  // rendezvous is torchrun's static one on a port of the trial's own network;
  // its per-rank logs go to files (Debian's torch 1.13 on Python 3.11 cannot
  // parse its own default, "0", for --redirects and --tee).
  pid_t start_launcher(const LauncherPlan& lp) {
    const WorkerPlan* first = nullptr;
    Json ranks = Json::object();
    int n = 0;
    for (const auto& w : plan_.workers) {
      if (w.job != lp.job) continue;
      if (!first) first = &w;
      ranks[std::to_string(w.local_rank)] = w.env;
      ++n;
    }
    if (!first) return -1;
    const std::string label = "job" + std::to_string(lp.job) + "-launcher";
    std::vector<std::string> argv = {"/usr/bin/python3", "-m", "torch.distributed.run",
                                     "--nnodes", "1", "--nproc_per_node", std::to_string(n),
                                     "--max_restarts", std::to_string(lp.max_restarts),
                                     "--monitor_interval", "0.1",
                                     "--master_addr", "127.0.0.1", "--master_port", std::to_string(29500 + lp.job),
                                     "--redirects", "1", "--tee", "2",
                                     "--log_dir", trial_dir_ + "/" + label + "/logs"};
    if (!lp.run_id.empty()) argv.insert(argv.end(), {"--rdzv_id", lp.run_id});
    argv.push_back("--no_python");
    std::map<std::string, std::string> env = {{"SHMSTRESS_ROLE", "rank"},
                                              {"SHMSTRESS_JOB", std::to_string(lp.job)},
                                              {"SHMSTRESS_RANK_ENV", ranks.dump()}};
    WorkerPlan agent = *first;  // its container, if any; no per-rank setting
    agent.env.clear();
    agent.uid = agent.gid = -1;
    agent.nofile = -1;
    agent.lock_subdir.clear();
    agent.on_stop.reset();
    agent.rank = -1;
    replacements_.push_back(std::move(agent));
    pid_t pid = spawn(env, label, {.w = &replacements_.back(), .launcher = argv});
    if (pid <= 0) {
      log_.emit({{"type", "harness-error"}, {"message", "cannot start the launcher of job " + std::to_string(lp.job)}});
      return pid;
    }
    Worker x{lp.job, -1};
    x.launcher = true;
    x.self_pid = first->container >= 0 ? own_pid(pid) : pid;
    workers_[pid] = x;
    log_.emit({{"type", "start"}, {"role", "launcher"}, {"job", lp.job}, {"rank", -1}, {"pid", x.self_pid},
               {"launcher", lp.kind}, {"max_restarts", lp.max_restarts}, {"teardown_ms", lp.teardown_ns / 1000000}});
    return pid;
  }

  // Creates container #id: a pid namespace (pid 1: a process that only reaps)
  // with its own mount namespace and /proc, over our /dev/shm.
  void make_container(int id) {
    Container box;
    containers_[id] = box;  // a failed one stays: its workers are refused
    if (!pid_ns_) {
      log_.emit({{"type", "harness-error"}, {"message", "containers need the trial's own pid namespace (run as root)"}});
      return;
    }
    if (self_pid_ns_fd_ < 0) self_pid_ns_fd_ = ::open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
    int ready[2];
    if (self_pid_ns_fd_ < 0 || ::pipe2(ready, O_CLOEXEC) != 0) return;
    if (::unshare(CLONE_NEWPID) != 0) {
      log_.emit({{"type", "harness-error"}, {"message", std::string("cannot make a container: ") + std::strerror(errno)}});
      ::close(ready[0]), ::close(ready[1]);
      return;
    }
    pid_t init = ::fork();
    if (init == 0) {
      char ok = 1;
      if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
          ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
        ok = 0;
      }
      (void)!::write(ready[1], &ok, 1);
      ::syscall(SYS_close_range, 0, ~0U, 0);
      // Init of the container: reap whatever is re-parented to us (SIGCHLD
      // stays blocked, as the supervisor had it, so it waits for sigwaitinfo).
      sigset_t chld;
      sigemptyset(&chld);
      sigaddset(&chld, SIGCHLD);
      for (;;) {
        while (::waitpid(-1, nullptr, WNOHANG) > 0) {
        }
        ::sigwaitinfo(&chld, nullptr);
      }
    }
    ::setns(self_pid_ns_fd_, CLONE_NEWPID);  // our later children are ours again
    ::close(ready[1]);
    char ok = 0;
    if (init < 0 || ::read(ready[0], &ok, 1) != 1 || !ok) {
      log_.emit({{"type", "harness-error"}, {"message", "container " + std::to_string(id) + " could not mount its /proc"}});
      if (init > 0) ::kill(init, SIGKILL), ::waitpid(init, nullptr, 0);
      ::close(ready[0]);
      return;
    }
    ::close(ready[0]);
    box.init = init;
    box.pid_ns_fd = ::open(("/proc/" + std::to_string(init) + "/ns/pid").c_str(), O_RDONLY | O_CLOEXEC);
    box.mnt_ns_fd = ::open(("/proc/" + std::to_string(init) + "/ns/mnt").c_str(), O_RDONLY | O_CLOEXEC);
    containers_[id] = box;
    Json jobs = Json::array();
    for (const auto& w : plan_.workers) {
      if (w.container == id && (jobs.empty() || jobs.back() != w.job)) jobs.push_back(w.job);
    }
    Json detail = {{"container", id}, {"jobs", jobs}, {"init_pid", init}};
    log_.emit({{"type", "fault"}, {"kind", "containers"}, {"phase", "start"}, {"job", -1}, {"rank", -1}, {"detail", detail}});
    seeded_.push_back({"containers", detail});
  }

  // The trial goes on while any process it follows lives: its workers, and
  // the loader workers and launched ranks it learned of (a rank orphaned by
  // its launcher's death still runs its workload).
  bool any_worker_alive() const {
    for (const auto& [pid, w] : workers_) {
      if (w.alive) return true;
    }
    for (const auto& [pid, t] : tracked_) {
      if (t.alive) return true;
    }
    return false;
  }

  pid_t pid_of(int job, int rank) const {
    for (const auto& [pid, w] : workers_) {
      if (w.job == job && w.rank == rank && !w.launcher && w.alive) return pid;
    }
    for (const auto& [pid, t] : tracked_) {  // a rank its launcher started
      if (t.job == job && t.rank == rank && t.worker < 0 && t.alive) return pid;
    }
    return -1;
  }

  // A launcher ended: the processes of its job still alive now are watched
  // until they are gone (job.teardown). They are its process group (ranks,
  // their loader workers and trackers stay in it) and the job's tracked
  // processes, whatever group they moved to.
  void launcher_gone(pid_t pid, const Worker& w) {
    const LauncherPlan* lp = launcher_of(plan_, w.job);
    Teardown td;
    td.job = w.job;
    td.launcher_self = w.self_pid;
    td.t = mono_ns();
    td.bound_ns = lp ? lp->teardown_ns : 0;
    std::set<pid_t> seen;
    for (const Json& m : group_members(pid)) {
      const pid_t p = m.get<pid_t>();
      if (p == pid || !running(p) || !seen.insert(p).second) continue;
      td.members.push_back({p, self_pid_of(p), "", 0});
    }
    for (const auto& [p, t] : tracked_) {
      if (t.job != w.job || !t.alive || !running(p) || !seen.insert(p).second) continue;
      td.members.push_back({p, t.self_pid, "", 0});
    }
    for (auto& m : td.members) {
      auto t = tracked_.find(m.pid);
      m.role = t != tracked_.end() ? (t->second.worker >= 0 ? "loader" : t->second.role) : "other";
    }
    teardowns_.push_back(std::move(td));
  }

  // Marks the members of ended launchers' jobs that are gone by now.
  void watch_teardowns() {
    for (auto& td : teardowns_) {
      for (auto& m : td.members) {
        if (m.gone_t == 0 && !running(m.pid)) m.gone_t = mono_ns();
      }
    }
  }

  void log_teardowns() {
    watch_teardowns();
    for (const auto& td : teardowns_) {
      Json members = Json::array();
      for (const auto& m : td.members) {
        Json x = {{"pid", m.self_pid}, {"role", m.role}};
        if (m.gone_t) x["gone_t"] = m.gone_t;
        members.push_back(std::move(x));
      }
      log_.emit({{"type", "teardown"}, {"job", td.job}, {"launcher_pid", td.launcher_self}, {"t", td.t},
                 {"bound_ms", td.bound_ns / 1000000}, {"members", members}});
    }
    teardowns_.clear();
  }

  pid_t self_pid_of(pid_t pid) const {
    if (auto t = tracked_.find(pid); t != tracked_.end()) return t->second.self_pid;
    if (auto w = workers_.find(pid); w != workers_.end()) return w->second.self_pid;
    return pid;
  }

  // Whom an action aims at: a rank, one of its loader workers, or the job's launcher.
  pid_t target_of(const Action& a) const {
    if (a.launcher) {
      for (const auto& [pid, w] : workers_) {
        if (w.job == a.job && w.launcher && w.alive) return pid;
      }
      return -1;
    }
    if (a.worker < 0) return pid_of(a.job, a.rank);
    for (const auto& [pid, t] : tracked_) {
      if (t.job == a.job && t.rank == a.rank && t.worker == a.worker && t.alive) return pid;
    }
    return -1;
  }
  // The worker a setting went to: the live one, else one that already exited.
  // A setting is in its environment from exec, so a worker that failed and
  // exited before the supervisor got to log it (a loaded machine) had it all
  // the same.
  pid_t pid_started(int job, int rank) const {
    pid_t any = -1;
    for (const auto& [pid, w] : workers_) {
      if (w.job != job || w.rank != rank) continue;
      if (w.alive) return pid;
      any = pid;
    }
    return any;
  }

  // Reaps every exited descendant and logs the workers' exits; notices
  // workers that stopped themselves at a failpoint (WUNTRACED).
  void reap() {
    // The supervisor's own wait for a CPU before this look: a process that
    // exits after it is reaped with at most what the supervisor waits from
    // here on counted in its exit's lateness (reaper_wait_ns).
    const std::int64_t look_wait = cpu_wait_ns();
    for (;;) {
      // Peek first (WNOWAIT): an exited worker is still a zombie, whose
      // final CPU wait (cpu_wait_ns) is readable until it is reaped.
      siginfo_t si{};
      if (::waitid(P_ALL, 0, &si, WEXITED | WSTOPPED | WNOHANG | WNOWAIT) != 0 || si.si_pid <= 0) break;
      const pid_t peeked = si.si_pid;
      const bool exited = si.si_code == CLD_EXITED || si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED;
      const std::int64_t final_wait = exited && workers_.contains(peeked) ? cpu_wait_ns_of(peeked) : -1;
      int st = 0;
      pid_t pid = ::waitpid(peeked, &st, WNOHANG | WUNTRACED);
      if (pid <= 0) break;
      if (pid == cleanup_pid_) cleanup_done_ = true;
      if (auto t = tracked_.find(pid); t != tracked_.end()) {
        if (!WIFSTOPPED(st)) tracked_gone(t->second, st);
        continue;
      }
      auto it = workers_.find(pid);
      if (it == workers_.end()) continue;  // a resource tracker, helper or other descendant
      Worker& w = it->second;
      if (WIFSTOPPED(st)) {
        if (w.plan && w.plan->on_stop && !w.self_stop_seen && !w.stopped_by_harness) self_stopped(pid, w);
        continue;
      }
      w.alive = false;
      Json e = {{"type", "exit"}, {"job", w.job}, {"rank", w.rank}, {"pid", w.self_pid}};
      if (w.launcher) e["role"] = "launcher";
      if (WIFEXITED(st)) {
        e["exit_code"] = WEXITSTATUS(st);
      } else if (WIFSIGNALED(st)) {
        e["signal"] = WTERMSIG(st);
        e["by_harness"] = ended_by_harness(w.killed_by_harness, w.last_signal, WTERMSIG(st));
        e["teardown"] = w.teardown;
      }
      if (final_wait >= 0) e["cpu_wait_ns"] = final_wait;
      if (w.launcher) launcher_gone(pid, w);
      // The exit's t is when we saw it. The worker died after our previous
      // look began; what we waited for a CPU since then (read before t) is
      // how much later than need be we saw it, at most.
      const std::int64_t mine = cpu_wait_ns();
      if (mine >= 0 && prev_look_wait_ >= 0 && mine >= prev_look_wait_) e["reaper_wait_ns"] = mine - prev_look_wait_;
      e["t"] = mono_ns();
      log_.emit(std::move(e));
    }
    prev_look_wait_ = look_wait;
  }

  // Sleeps until `until` (at most 50 ms) or until something happens: a child
  // changed state (SIGCHLD, through a signalfd), a tracked process exited
  // (its pidfd), or a line was appended to the history (inotify, while the
  // supervisor follows it).
  void wait_chld(std::int64_t until) {
    std::int64_t left = until - mono_ns();
    if (left <= 0) return;
    left = std::min<std::int64_t>(left, 50'000'000);
    if (sig_fd_ < 0) {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGCHLD);
      sig_fd_ = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
      if (sig_fd_ < 0) {
        struct timespec ts{static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
        ::sigtimedwait(&set, nullptr, &ts);
        return;
      }
    }
    std::vector<struct pollfd> fds{{sig_fd_, POLLIN, 0}};
    if (following() && inotify_fd_ >= 0) fds.push_back({inotify_fd_, POLLIN, 0});
    for (const auto& [pid, t] : tracked_) {
      if (t.alive && t.pidfd >= 0) fds.push_back({t.pidfd, POLLIN, 0});
    }
    struct timespec ts{static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
    if (::ppoll(fds.data(), fds.size(), &ts, nullptr) <= 0) return;
    char drain[4096];
    while (::read(sig_fd_, drain, sizeof drain) > 0) {
    }
    if (inotify_fd_ >= 0) {
      while (::read(inotify_fd_, drain, sizeof drain) > 0) {
      }
    }
  }

  // Whether the history must be followed as it grows: the gate is closed,
  // an event may trigger an action, or processes of the trial announce
  // themselves (loader workers, launched ranks).
  bool following() const { return !gate_open_ || triggers_pending_ || tracks_processes_; }

  // The start gate (docs/worker-protocol.md, aligned start): a FIFO whose
  // only writer is ours. Workers block reading it until it is closed.
  void make_gate() {
    gate_path_ = trial_dir_ + "/gate";
    ::unlink(gate_path_.c_str());
    if (::mkfifo(gate_path_.c_str(), 0666) != 0 || ::chmod(gate_path_.c_str(), 0666) != 0) {
      log_.emit({{"type", "harness-error"}, {"message", std::string("cannot make the start gate: ") + std::strerror(errno)}});
      gate_path_.clear();
      return;
    }
    gate_fd_ = ::open(gate_path_.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
    inotify_fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (inotify_fd_ >= 0) ::inotify_add_watch(inotify_fd_, (trial_dir_ + "/history.jsonl").c_str(), IN_MODIFY);
    tracks_processes_ = !plan_.launchers.empty() ||
                        std::any_of(plan_.workers.begin(), plan_.workers.end(),
                                    [](const WorkerPlan& w) { return w.loader_workers > 0; });
  }

  // Opens the gate: every worker waiting there runs from this moment, and
  // time-placed actions count from it.
  void open_gate(const char* why) {
    gate_open_ = true;
    gate_t_ = mono_ns();
    if (gate_fd_ >= 0) ::close(gate_fd_);
    gate_fd_ = -1;
    // A worker that opens the gate after this finds no FIFO and goes on, as
    // it would at a closed one; the trial dir keeps no FIFO that a copy, an
    // archive or `report` would block on.
    if (!gate_path_.empty()) ::unlink(gate_path_.c_str());
    Json waiting = Json::array();
    for (const auto& [job, rank] : awaiting_) waiting.push_back({{"job", job}, {"rank", rank}});
    log_.emit({{"type", "gate"}, {"phase", "open"}, {"t", gate_t_}, {"by", why}, {"waiting", waiting},
               {"after_ms", (gate_t_ - start_) / 1'000'000}});
    for (auto& t : gate_timers_) {
      t.at += gate_t_;
      timers_.push_back(std::move(t));
    }
    gate_timers_.clear();
  }

  // A worker is at the gate (or past it) once it said anything but `start`:
  // `ready`, or, for a subject of the first protocol, its first op.
  void note_ready(const Json& e) {
    const std::string type = str_of(e, "type");
    if (gate_open_ || type == "start" || e.contains("worker") || type == "fault" || type == "exit") return;
    // A subject of protocol 2 says so at once, and its `ready` follows.
    if (type == "subject" && int_of(e, "protocol", 1) >= 2) return;
    awaiting_.erase({static_cast<int>(int_of(e, "job", -2)), static_cast<int>(int_of(e, "rank", -2))});
  }

  // A process that announced itself: a loader worker, or a rank its launcher started.
  void note_process(const Json& e) {
    if (str_of(e, "type") != "start") return;
    const int job = static_cast<int>(int_of(e, "job", -1)), rank = static_cast<int>(int_of(e, "rank", -1));
    const int worker = static_cast<int>(int_of(e, "worker", -1));
    const pid_t self = static_cast<pid_t>(int_of(e, "pid", 0));
    if (job < 0 || rank < 0 || self <= 0) return;
    if (worker < 0 && !launcher_of(plan_, job)) return;  // a rank we started ourselves
    const pid_t pid = resolve_pid(job, self);
    if (pid <= 0 || workers_.contains(pid) || tracked_.contains(pid)) return;
    Tracked t;
    t.job = job, t.rank = rank, t.worker = worker, t.self_pid = self;
    t.role = str_of(e, "role");
    t.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (t.pidfd < 0) {  // already gone and reaped by its parent
      t.alive = false;
      log_.emit(tracked_exit_event(t, -1));
      return;
    }
    tracked_[pid] = t;
  }

  // Our pid of a process of `job` that calls itself `self` (its pid in its
  // container, if the job runs in one).
  pid_t resolve_pid(int job, pid_t self) const {
    int box = -1;
    for (const auto& w : plan_.workers) {
      if (w.job == job) box = w.container;
    }
    if (box < 0) return self;
    auto it = containers_.find(box);
    if (it == containers_.end() || it->second.init <= 0) return -1;
    struct stat theirs{};
    if (::stat(("/proc/" + std::to_string(it->second.init) + "/ns/pid").c_str(), &theirs) != 0) return -1;
    for (pid_t p : proc_pids()) {
      struct stat ns{};
      if (own_pid(p) == self && ::stat(("/proc/" + std::to_string(p) + "/ns/pid").c_str(), &ns) == 0 &&
          ns.st_ino == theirs.st_ino) {
        return p;
      }
    }
    return -1;
  }

  // Whether the rank that forked a loader worker is gone (dead or a zombie):
  // its loader workers die with it (PR_SET_PDEATHSIG, or DataLoader's watchdog).
  bool rank_gone(const Tracked& t) const {
    if (t.worker < 0) return false;
    for (const auto& [pid, w] : workers_) {
      if (w.job != t.job || w.rank != t.rank || w.launcher) continue;
      if (w.alive && running(pid)) return false;
    }
    for (const auto& [pid, r] : tracked_) {
      if (r.job != t.job || r.rank != t.rank || r.worker >= 0) continue;
      if (r.alive && running(pid)) return false;
    }
    return true;
  }

  Json tracked_exit_event(const Tracked& t, int wstatus) {
    Json e = {{"type", "exit"}, {"job", t.job}, {"rank", t.rank}, {"pid", t.self_pid}, {"role", t.role}};
    if (t.worker >= 0) e["worker"] = t.worker;
    if (wstatus < 0) {
      e["status_unknown"] = true;  // its parent reaped it before we could read it
    } else if (WIFEXITED(wstatus)) {
      e["exit_code"] = WEXITSTATUS(wstatus);
    } else if (WIFSIGNALED(wstatus)) {
      e["signal"] = WTERMSIG(wstatus);
      e["by_harness"] = ended_by_harness(t.killed_by_harness, t.last_signal, WTERMSIG(wstatus));
      e["teardown"] = t.teardown;
      if (!t.killed_by_harness && rank_gone(t)) e["parent_gone"] = true;
      // A launcher stops its ranks (SIGTERM, then SIGKILL) when it restarts
      // them or is stopped itself: its doing, not a crash.
      if (!e["by_harness"].get<bool>() && t.worker < 0 && t.role == "rank" && launcher_of(plan_, t.job) &&
          (WTERMSIG(wstatus) == SIGTERM || WTERMSIG(wstatus) == SIGKILL)) {
        e["by_launcher"] = true;
      }
    }
    e["t"] = mono_ns();
    return e;
  }

  void tracked_gone(Tracked& t, int wstatus) {
    if (!t.alive) return;
    t.alive = false;
    if (t.pidfd >= 0) ::close(t.pidfd);
    t.pidfd = -1;
    log_.emit(tracked_exit_event(t, wstatus));
  }

  // Tracked processes whose pidfd says they exited: their status from the
  // zombie, while their parent has not reaped it.
  void poll_tracked() {
    for (auto& [pid, t] : tracked_) {
      if (!t.alive || t.pidfd < 0) continue;
      struct pollfd pfd{t.pidfd, POLLIN, 0};
      if (::poll(&pfd, 1, 0) <= 0) continue;
      int st = -1;
      if (!zombie_status(pid, &st)) {
        // Reaped by its parent already, or re-parented to us: waitpid tells.
        int ours = 0;
        if (::waitpid(pid, &ours, WNOHANG) == pid) st = ours;
      }
      tracked_gone(t, st);
    }
  }

  // Event-triggered actions: the history is tailed for the trigger, then the
  // action fires at_ns after it. Timed actions keep their plan order.
  struct Trigger {
    const Action* a;
    int seen = 0;
    std::int64_t fire_at = -1;
    bool done = false;
  };

  // New complete lines of the history since the last call.
  std::vector<Json> tail_history() {
    std::vector<Json> out;
    if (tail_fd_ < 0) tail_fd_ = ::open((trial_dir_ + "/history.jsonl").c_str(), O_RDONLY | O_CLOEXEC);
    char buf[65536];
    ssize_t n;
    while (tail_fd_ >= 0 && (n = ::read(tail_fd_, buf, sizeof buf)) > 0) tail_buf_.append(buf, static_cast<std::size_t>(n));
    std::size_t nl;
    while ((nl = tail_buf_.find('\n')) != std::string::npos) {
      auto e = Json::parse(tail_buf_.substr(0, nl), nullptr, false);
      tail_buf_.erase(0, nl + 1);
      if (e.is_object()) out.push_back(std::move(e));
    }
    return out;
  }

  // Reads what was appended to the history since the last look: readiness
  // for the gate, processes that announce themselves, and triggers.
  void follow_history(std::vector<Trigger>& triggers) {
    triggers_pending_ = false;
    for (const auto& t : triggers) triggers_pending_ |= !t.done;
    if (!following()) return;
    for (const Json& e : tail_history()) {
      note_ready(e);
      note_process(e);
      for (auto& t : triggers) {
        if (t.done || t.fire_at >= 0) continue;
        const Action& a = *t.a;
        if (str_of(e, "type") != a.on_type || int_of(e, "job", -2) != a.on_job || int_of(e, "rank", -2) != a.on_rank) continue;
        if (int_of(e, "worker", -1) != a.on_worker) continue;
        if (str_of(e, "op") != a.on_op && str_of(e, "name") != a.on_op) continue;
        if (++t.seen == a.on_nth) t.fire_at = int_of(e, "t", mono_ns()) + a.at_ns;
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

  // Something to do at a time the plan could not fix in advance (the end of
  // a pause that began when a worker stopped itself, a lock's release).
  struct Timer {
    std::int64_t at;
    std::function<void()> fn;
    bool at_heal = false;  // also run if the trial ends first (a SIGCONT that closes a window)
  };

  void run_timers() {
    const std::int64_t now = mono_ns();
    std::vector<Timer> due;
    for (auto it = timers_.begin(); it != timers_.end();) {
      if (it->at <= now) {
        due.push_back(std::move(*it));
        it = timers_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto& t : due) t.fn();
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
    const std::int64_t gate_deadline = start_ + plan_.gate_timeout_ns;
    if (gate_path_.empty()) open_gate("no-gate");
    while (true) {
      reap();
      poll_tracked();
      watch_teardowns();
      run_timers();
      cap_logs(false);
      if (!any_worker_alive()) {
        if (!gate_open_) open_gate("no-workers");
        return;
      }
      follow_history(triggers);
      std::int64_t now = mono_ns();
      if (!gate_open_) {
        // Exited workers wait at no gate.
        for (const auto& [pid, w] : workers_) {
          if (w.alive) continue;
          if (!w.launcher) awaiting_.erase({w.job, w.rank});
          // (a copy: clang 14, the fuzz build's, cannot capture a structured binding)
          if (const int job = w.job; w.launcher) std::erase_if(awaiting_, [job](const auto& k) { return k.first == job; });
        }
        if (awaiting_.empty()) {
          open_gate("all-ready");
        } else if (now >= gate_deadline) {
          open_gate("deadline");
        }
      }
      std::vector<const Action*> due;
      while (gate_open_ && next < timed.size() && gate_t_ + timed[next]->at_ns <= now) due.push_back(timed[next++]);
      if (!due.empty()) act_all(due);
      if (now >= deadline) {
        timed_out_ = true;
        log_.emit({{"type", "trial"}, {"phase", "timeout"}, {"timed_out", true}});
        return;
      }
      std::int64_t wake = deadline;
      if (!gate_open_) wake = std::min(wake, gate_deadline);
      if (gate_open_ && next < timed.size()) wake = std::min(wake, gate_t_ + timed[next]->at_ns);
      for (const auto& t : timers_) wake = std::min(wake, t.at);
      for (const auto& t : triggers) {
        if (!t.done && t.fire_at >= 0) wake = std::min(wake, t.fire_at);
      }
      // Without inotify the history is tailed every millisecond while followed.
      if (following() && inotify_fd_ < 0) wake = std::min(wake, mono_ns() + 1'000'000);
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
    bool present = proc_state(pid, &st);
    if (sig == SIGKILL && (!present || st == 'Z' || st == 'X')) return "exited";
    if (sig == SIGSTOP && present && (st == 'T' || st == 't')) return "stopped";
    if (sig == SIGCONT && present && st != 'T' && st != 't') return "continued";
    return nullptr;
  }

  // Watches each delivery for its effect, for at most 100 ms in all.
  static void observe(const std::vector<std::pair<pid_t, int>>& targets, const std::vector<Delivery*>& ds) {
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

  static Delivery send_and_observe(pid_t pid, int sig, bool tree) {
    Delivery d = send(pid, sig, tree);
    observe({{pid, sig}}, {&d});
    return d;
  }

  // The members of a process group (the worker's tree), zombies included.
  static Json group_members(pid_t pgid) {
    Json out = Json::array();
    for (pid_t p : proc_pids()) {
      ProcStat ps;
      if (proc_stat(p, &ps) && ps.pgrp == pgid) out.push_back(p);
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
        if (settings_logged_.contains(&a)) continue;  // logged at the trial's start
        log_.emit({{"type", "fault"}, {"kind", a.fault}, {"phase", a.phase}, {"job", -1}, {"rank", -1}, {"detail", a.detail}});
        continue;
      }
      if (a.signal == 0) {  // a setting the worker started with (emfile, fiu-errno, ...): log it
        if (settings_logged_.contains(&a)) continue;  // logged as the worker started
        const pid_t started = pid_started(a.job, a.rank);
        if (started <= 0) continue;  // never started: nothing happened, nothing to log
        // In force from the worker's start, whenever the supervisor gets to log it.
        log_.emit({{"type", "fault"}, {"kind", a.fault}, {"phase", a.phase}, {"job", a.job}, {"rank", a.rank},
                   {"pid", workers_[started].self_pid}, {"signal", 0}, {"detail", a.detail},
                   {"t", workers_[started].spawned_t}});
        continue;
      }
      pid_t pid = target_of(a);
      if (pid <= 0) continue;  // the target already exited: nothing happened, nothing to log
      if (!running(pid)) continue;  // exited by itself, not yet reaped
      const bool ends = a.signal == SIGKILL || a.signal == SIGTERM || a.signal == SIGINT;
      if (auto t = tracked_.find(pid); t != tracked_.end()) {
        if (ends) t->second.killed_by_harness = true, t->second.last_signal = a.signal;
      } else {
        Worker& w = workers_[pid];
        if (ends) w.killed_by_harness = true, w.last_signal = a.signal;
        if (a.signal == SIGSTOP) w.stopped_by_harness = true;
        if (a.signal == SIGCONT) w.stopped_by_harness = false;
      }
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
      if (!sent[i].a->tree || !sent[i].d.ok) continue;
      trees[i] = group_members(sent[i].pid);
      if (sent[i].a->signal != SIGKILL) continue;
      for (const Json& m : trees[i]) {  // loader workers and launched ranks die of it too
        if (auto t = tracked_.find(m.get<pid_t>()); t != tracked_.end()) t->second.killed_by_harness = true;
      }
    }
    observe(targets, ds);
    for (std::size_t i = 0; i < sent.size(); ++i) {
      const Action& a = *sent[i].a;
      const Delivery& d = sent[i].d;
      if (!d.ok) continue;
      Json e = {{"type", "fault"}, {"kind", a.fault}, {"phase", a.phase}, {"job", a.job}, {"rank", a.rank},
                {"pid", self_pid_of(sent[i].pid)}, {"signal", a.signal}, {"detail", a.detail}};
      if (a.worker >= 0) e["worker"] = a.worker;
      if (a.launcher) e["launcher"] = true;
      add_delivery(e, d);
      if (a.tree) {
        e["tree"] = true;
        e["tree_pids"] = trees[i];
      }
      log_.emit(std::move(e));
    }
  }

  // The first round a replacement of (job, rank) runs: the one after the last
  // round the dead worker entered (it had arrived there), from the history.
  int first_round_after(pid_t self_pid, int job, int rank) {
    std::ifstream f(trial_dir_ + "/history.jsonl");
    std::string line;
    int last = -1;
    while (std::getline(f, line)) {
      auto e = Json::parse(line, nullptr, false);
      if (!e.is_object() || str_of(e, "type") != "invoke" || str_of(e, "op") != "barrier") continue;
      if (int_of(e, "job", -2) != job || int_of(e, "rank", -2) != rank || int_of(e, "pid", -2) != self_pid) continue;
      const Json args = e.contains("args") ? e["args"] : Json::object();
      if (args.is_object() && args.contains("round") && args["round"].is_number_integer()) {
        last = std::max(last, args["round"].get<int>());
      }
    }
    return last + 1;
  }

  // A worker stopped itself at its failpoint (WorkerPlan::OnStop).
  void self_stopped(pid_t pid, Worker& w) {
    const std::int64_t seen = mono_ns();
    w.self_stop_seen = true;
    const WorkerPlan::OnStop& os = *w.plan->on_stop;
    if (os.first_of_trial && first_stop_taken_) {  // another worker was first: not the fault
      ::kill(pid, SIGCONT);
      return;
    }
    if (os.first_of_trial) first_stop_taken_ = true;
    Json start = {{"type", "fault"}, {"kind", os.fault}, {"phase", "start"}, {"job", w.job}, {"rank", w.rank},
                  {"pid", w.self_pid}, {"signal", SIGSTOP}, {"detail", os.detail},
                  // It stopped itself at or before t (the supervisor saw the stop at t).
                  {"t", seen}, {"effect", "stopped"}, {"effect_t", seen}, {"self", true}};
    log_.emit(start);
    // The window ends in a SIGCONT also when the trial ends first.
    timers_.push_back({seen + os.hold_ns, [this, pid, os, &heal = healing_] {
      auto it = workers_.find(pid);
      if (it == workers_.end() || !it->second.alive) return;
      Worker& v = it->second;
      Json end = {{"type", "fault"}, {"kind", os.fault}, {"phase", "end"}, {"job", v.job}, {"rank", v.rank},
                  {"pid", v.self_pid}, {"detail", os.detail}};
      if (os.then == "continue" || heal) {
        Delivery d = send_and_observe(pid, SIGCONT, false);
        end["signal"] = SIGCONT;
        add_delivery(end, d);
        log_.emit(std::move(end));
        return;
      }
      // replace / reuse-pid: the worker dies where it stopped, with its tree.
      ProcStat before;
      proc_stat(pid, &before);
      Json tree = group_members(pid);
      v.killed_by_harness = true;
      Delivery d = send_and_observe(pid, SIGKILL, true);
      end["signal"] = SIGKILL;
      end["tree"] = true;
      end["tree_pids"] = tree;
      add_delivery(end, d);
      if (os.then == "replace") {
        const int job = v.job, rank = v.rank;
        const WorkerPlan& plan = *v.plan;
        std::map<std::string, std::string> env = plan.env;
        env.erase("SHMCOORD_PAUSE_AT");
        int first = first_round_after(v.self_pid, job, rank);
        env["SHMSTRESS_FIRST_ROUND"] = std::to_string(first);
        env["SHMSTRESS_START_DELAY_MS"] = "0";
        reap();  // log the victim's exit before its replacement's events
        WorkerPlan again = plan;
        again.on_stop.reset();
        replacements_.push_back(std::move(again));
        pid_t fresh = start_worker(replacements_.back(), env,
                                   "job" + std::to_string(job) + "-rank" + std::to_string(rank) + "-replacement");
        end["detail"]["replacement_pid"] = fresh > 0 ? workers_[fresh].self_pid : -1;
        end["detail"]["first_round"] = first;
        log_.emit(std::move(end));
        return;
      }
      reap();
      reuse_pid(pid, before.start, std::move(end));
    }, true});
  }

  // After `pid` died (a zombie or reaped): give its number to a new, unrelated
  // process whose start time differs, which lives until the heal (ours, via
  // ns_last_pid; or any process of the trial that happened to fork into the
  // freed number first - an unrelated live process with another start time
  // just the same). Logs `event` (the kill), then the reused-pid window; if
  // neither works out, the kill's detail says so (`reused: false`).
  void reuse_pid(pid_t pid, std::uint64_t old_start, Json event) {
    while (true) {  // it must be reaped for its number to be free
      ProcStat ps;
      if (!proc_stat(pid, &ps)) break;
      if (ps.state == 'Z') {
        reap();
        if (!proc_stat(pid, &ps)) break;
      }
      struct timespec ts{0, 200'000};
      ::nanosleep(&ts, nullptr);
    }
    pid_t ours = -1;
    std::uint64_t new_start = 0;
    std::string why;
    for (int attempt = 0; attempt < 8; ++attempt) {
      ProcStat taken;
      if (proc_stat(pid, &taken)) {  // someone forked into it meanwhile
        if (taken.start != old_start) {
          new_start = taken.start;
        } else {
          why = "the process that took it started in the same clock tick";
        }
        break;
      }
      int fd = ::open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
      std::string last = std::to_string(pid - 1);
      if (fd < 0 || ::write(fd, last.data(), last.size()) != static_cast<ssize_t>(last.size())) {
        why = std::string("cannot set ns_last_pid: ") + std::strerror(errno);
        if (fd >= 0) ::close(fd);
        break;
      }
      ::close(fd);
      pid_t r = ::fork();
      if (r == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        ::syscall(SYS_close_range, 0, ~0U, 0);
        for (;;) ::pause();
      }
      if (r < 0) {
        why = std::string("fork: ") + std::strerror(errno);
        break;
      }
      ProcStat ps;
      if (r == pid && proc_stat(r, &ps) && ps.start != old_start) {
        ours = r;
        new_start = ps.start;
        break;
      }
      ::kill(r, SIGKILL);
      while (::waitpid(r, nullptr, 0) < 0 && errno == EINTR) {
      }
      why = r == pid ? "the new process started in the same clock tick" : "another process took the pid";
      // Same clock tick as the dead one: its start time would match. Wait for
      // the tick (10 ms at USER_HZ 100) to pass; the clock is what we wait for.
      if (r == pid) {
        struct timespec ts{0, 11'000'000};
        ::nanosleep(&ts, nullptr);
      }
    }
    Json& detail = event["detail"];
    if (!detail.is_object()) detail = Json::object();
    if (new_start == 0) {
      detail["reused"] = false;
      detail["why"] = why;
      log_.emit(std::move(event));
      return;
    }
    if (ours > 0) helpers_.push_back(ours);
    detail["reused"] = true;
    detail["reused_pid"] = pid;
    detail["old_start_time"] = old_start;
    detail["new_start_time"] = new_start;
    detail["reused_by"] = ours > 0 ? "harness" : "a process of the trial";
    Json window = {{"type", "fault"}, {"kind", "reused-pid"}, {"phase", "start"}, {"job", -1}, {"rank", -1},
                   {"detail", detail}};
    window["detail"]["holder_pid"] = pid;
    log_.emit(std::move(event));  // the kill
    log_.emit(window);            // the pid's new life, until the heal
    seeded_.push_back({"reused-pid", window["detail"]});
  }

  // A ghost (Ghost in plan.h): a native worker outside the scenario's jobs
  // writes the subject's records and stops itself at its failpoint; its tree
  // is killed and its pid reused before the scenario's workers start.
  void run_ghost(const Ghost& g) {
    if (!pid_ns_) {
      log_.emit({{"type", "harness-error"}, {"message", "reused-pid needs the trial's own pid namespace (run as root)"}});
      return;
    }
    const std::string label = "ghost-" + std::to_string(ghost_count_++);
    const std::string events = trial_dir_ + "/" + label + ".jsonl";
    int fd = ::open(events.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    pid_t pid = spawn(g.worker.env, label, {.w = &g.worker, .events_fd = fd, .native = true});
    ::close(fd);
    if (pid <= 0) return;
    // Wait (at most 10 s) for it to stop itself, or to end without doing so.
    const std::int64_t until = mono_ns() + 10'000'000'000LL;
    bool stopped = false;
    while (mono_ns() < until) {
      int st = 0;
      pid_t r = ::waitpid(pid, &st, WNOHANG | WUNTRACED);
      if (r == pid && WIFSTOPPED(st)) {
        stopped = true;
        break;
      }
      if (r == pid) {
        pid = -1;
        break;
      }
      wait_chld(until);
    }
    if (!stopped) {
      if (pid > 0) ::kill(-pid, SIGKILL), ::kill(pid, SIGKILL), ::waitpid(pid, nullptr, 0);
      log_.emit({{"type", "harness-error"}, {"message", "reused-pid: " + label + " never reached its failpoint (see " + events + ")"}});
      return;
    }
    ProcStat before;
    proc_stat(pid, &before);
    Json tree = group_members(pid);
    Delivery d = send_and_observe(pid, SIGKILL, true);
    Json kill = {{"type", "fault"}, {"kind", "reused-pid"}, {"phase", "instant"}, {"job", -1}, {"rank", -1},
                 {"pid", pid}, {"signal", SIGKILL}, {"tree", true}, {"tree_pids", tree}};
    add_delivery(kill, d);
    kill["detail"] = g.worker.on_stop ? g.worker.on_stop->detail : Json::object();
    // What the ghost holds, from its own events: the prefix it was granted.
    std::ifstream f(events);
    std::string line;
    while (std::getline(f, line)) {
      auto e = Json::parse(line, nullptr, false);
      if (e.is_object() && str_of(e, "type") == "ok" && str_of(e, "op") == "acquire" && e.contains("value") &&
          e["value"].is_object()) {
        kill["detail"]["prefix"] = int_of(e["value"], "prefix", -1);
      }
    }
    kill["detail"]["ghost"] = label;
    reuse_pid(pid, before.start, std::move(kill));
  }

  // The trial's seeded files and the helpers that hold lock files, each a
  // fault window from now until the heal (or the seed's release time).
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
      pid_t holder = -1;
      if (!sd.held_by.empty()) {
        holder = hold_lock(path, sd.held_by == "inherited");
        if (holder <= 0) {
          log_.emit({{"type", "harness-error"}, {"message", "cannot hold the lock " + path + ": it is held already"}});
          continue;
        }
        helpers_.push_back(holder);
        detail["held_by"] = sd.held_by;
        detail["holder_pid"] = holder;
        detail["protect"] = true;  // no cleanup may remove it while it is held
      }
      log_.emit({{"type", "fault"}, {"kind", sd.fault}, {"phase", "start"}, {"job", -1}, {"rank", -1}, {"detail", detail}});
      seeded_.push_back({sd.fault, detail});
      if (holder > 0 && sd.release_at_ns >= 0) {
        const std::size_t index = seeded_.size() - 1;
        gate_timers_.push_back({sd.release_at_ns, [this, holder, index] {
          // The window ends when the lock may first be free: before the kill
          // (a cleanup blocked on it may take it before we log).
          const std::int64_t before = mono_ns();
          release_helper(holder);
          auto& [kind, d] = seeded_[index];
          d["protect"] = false;
          log_.emit({{"type", "fault"}, {"kind", kind}, {"phase", "end"}, {"job", -1}, {"rank", -1}, {"detail", d},
                     {"t", before}});
          kind.clear();  // closed: the heal does not close it again
        }});
      }
    }
  }

  // Kills a lock-holding helper and waits until it is dead (its lock with it).
  void release_helper(pid_t h) {
    ::kill(h, SIGKILL);
    ::kill(h, SIGCONT);
    while (::waitpid(h, nullptr, 0) < 0 && errno == EINTR) {
    }
    std::erase(helpers_, h);
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
      // Never waits: a lock someone holds already is refused, not a hang.
      if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) ::_exit(1);
      if (inherited) {
        pid_t grandchild = ::fork();
        if (grandchild == 0) {
          // Outlive its parent (that is the point), but not the supervisor: once
          // reparented to it (we are its subreaper, or init), die with it.
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

  // The heal: helpers go (their locks with them), every stopped worker
  // continues, every open fault window closes; on timeout every worker is killed.
  void heal_and_teardown() {
    healing_ = true;
    std::vector<Timer> left = std::move(timers_);
    timers_.clear();
    for (auto& t : left) {
      if (t.at_heal) t.fn();
    }
    const std::int64_t helpers_killed = mono_ns();  // their windows end here, before the kills
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
      if (kind.empty() || kind == "containers") continue;  // containers close after the audit
      Json d = detail;
      if (d.is_object() && d.contains("protect")) d["protect"] = false;
      log_.emit({{"type", "fault"}, {"kind", kind}, {"phase", "end"}, {"job", -1}, {"rank", -1}, {"detail", d},
                 {"t", helpers_killed}});
    }
    for (auto& [pid, w] : workers_) {
      if (w.alive) ::kill(pid, SIGCONT);
    }
    for (auto& [pid, t] : tracked_) {
      if (t.alive) ::kill(pid, SIGCONT);
    }
    if (!timed_out_) return;
    for (auto& [pid, t] : tracked_) {
      if (!t.alive) continue;
      t.killed_by_harness = true;
      t.teardown = true;
      ::kill(pid, SIGKILL);
    }
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
      poll_tracked();
      wait_chld(until);
    }
    reap();
    poll_tracked();
  }

  // One cleanup per namespace the trial used: the trial's own and each
  // nested one ([job] root_suffix). Roots are prefix-free to a correct
  // subject, so the outer namespace's cleanup never takes the inner one's
  // names: each namespace is cleaned by its own, as its users would.
  void cleanup_step() {
    std::set<std::string> suffixes = {""};
    for (const WorkerPlan& w : plan_.workers) {
      if (auto it = w.env.find("SHMSTRESS_ROOT_SUFFIX"); it != w.env.end()) suffixes.insert(it->second);
    }
    int n = 0;
    for (const std::string& suffix : suffixes) {
      std::map<std::string, std::string> env = {
          {"SHMSTRESS_ROLE", "cleanup"}, {"SHMSTRESS_JOB", "-1"}, {"SHMSTRESS_RANK", "-1"}};
      if (!suffix.empty()) env["SHMSTRESS_ROOT_SUFFIX"] = suffix;
      cleanup_done_ = false;
      cleanup_pid_ = spawn(env, n++ == 0 ? "cleanup" : "cleanup-" + std::to_string(n - 1));
      if (cleanup_pid_ <= 0) return;
      Worker c{-1, -1};
      c.self_pid = cleanup_pid_;
      workers_[cleanup_pid_] = c;
      std::int64_t until = mono_ns() + 10'000'000'000LL;
      while (!cleanup_done_ && mono_ns() < until) {
        reap();
        wait_chld(until);
      }
      if (!cleanup_done_) {
        ::kill(cleanup_pid_, SIGKILL);
        log_.emit({{"type", "harness-error"}, {"message", "cleanup step did not finish in 10 s"}});
        return;
      }
    }
  }

  // Names in /dev/shm with their inodes.
  static std::map<std::string, ino_t> shm_entries() {
    std::map<std::string, ino_t> out;
    if (DIR* d = ::opendir("/dev/shm")) {
      while (auto* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") out.emplace(std::move(n), e->d_ino);
      }
      ::closedir(d);
    }
    return out;
  }

  bool is_container_init(pid_t p) const {
    for (const auto& [id, box] : containers_) {
      if (box.init == p) return true;
    }
    return false;
  }

  // The trial's processes still alive besides us and our container inits. In
  // our own pid namespace that is everything in /proc (containers' processes
  // included): however a process forked, double-forked or left its group, it
  // is in there. Without one, it is our children (we are the subreaper): a
  // grandchild of a live orphan is only found once that orphan is gone, so
  // the audit scans again after each kill.
  std::vector<pid_t> descendants() const {
    std::vector<pid_t> out;
    const pid_t me = ::getpid();
    for (pid_t p : proc_pids()) {
      ProcStat ps;
      if (p == me || is_container_init(p) || !proc_stat(p, &ps) || ps.state == 'Z' || ps.state == 'X') continue;
      if (pid_ns_ || ps.ppid == me) out.push_back(p);
    }
    return out;
  }

  // Who a leftover entry belongs to: its owner uid if it is not ours.
  static int foreign_owner(const std::string& path) {
    struct stat st{};
    if (::lstat(path.c_str(), &st) != 0) return -1;
    return st.st_uid != ::geteuid() ? static_cast<int>(st.st_uid) : -1;
  }

  // A worker's stdout/stderr.log holds at most kMaxWorkerLogBytes and then a
  // line saying it was cut: a subject that prints without end must not fill
  // the disk (one trial dir reached 201 MB). Checked every 100 ms while the
  // trial runs and once more when every writer is gone (`final`).
  void cap_logs(bool final) {
    static constexpr off_t kMaxWorkerLogBytes = off_t{1} << 20;
    static const std::string kMark =
        "\n[shmstress: log cut at " + std::to_string(kMaxWorkerLogBytes) + " bytes; the worker wrote more]\n";
    const std::int64_t now = mono_ns();
    if (!final && now < next_log_check_) return;
    next_log_check_ = now + 100'000'000;
    for (auto& log : logs_) {
      struct stat st{};
      if (log.fd < 0 || ::fstat(log.fd, &st) != 0 || st.st_size <= kMaxWorkerLogBytes) continue;
      if (log.cut && st.st_size == kMaxWorkerLogBytes + static_cast<off_t>(kMark.size())) continue;
      if (::ftruncate(log.fd, kMaxWorkerLogBytes) != 0) continue;
      (void)!::write(log.fd, kMark.data(), kMark.size());
      log.cut = true;
    }
  }

  void audit() {
    // Stragglers (resource trackers of killed workers, pool workers outliving
    // their killed parent) get a moment to finish: 1 s, or the scenario's
    // eventual bound (deadlines.cleanup), what they need to clean up on their own.
    const std::int64_t wait_ns = std::max<std::int64_t>(1'000'000'000LL, plan_.settle_ns);
    std::int64_t until = mono_ns() + wait_ns;
    std::optional<std::int64_t> settled_t;
    for (;;) {
      reap();
      watch_teardowns();
      if (descendants().empty()) {
        settled_t = mono_ns();
        break;
      }
      if (mono_ns() >= until) break;
      wait_chld(std::min(until, mono_ns() + 20'000'000));
    }
    reap();
    log_teardowns();  // before the audit kills whoever outlived its launcher
    Json orphans = Json::array();
    std::set<pid_t> seen;
    for (int round = 0; round < 50; ++round) {
      std::vector<pid_t> left = descendants();
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
    // In the shared /dev/shm, outside the trial's root: new since the trial
    // began (a subject that ignores SHMSTRESS_ROOT, a daemon it left). Not
    // provably the trial's (with --allow-shared-shm other programs share
    // it), so reported, never removed.
    Json shared_new = Json::array();
    if (isolation_ == "name-root") {
      for (const auto& [n, ino] : shm_entries()) {
        auto before = shared_before_.find(n);
        if (n.rfind(root_, 0) == 0 || n.rfind("shmstress.", 0) == 0) continue;  // ours, or another trial's
        if (before == shared_before_.end() || before->second != ino) shared_new.push_back(n);
      }
    }
    std::map<int, Json> foreign;  // uid -> names another user's workers left
    const bool uid_faults = std::any_of(plan_.workers.begin(), plan_.workers.end(), [](const WorkerPlan& w) { return w.uid >= 0; });
    auto note_owner = [&](const std::string& path, const std::string& name) {
      if (!uid_faults) return;
      if (int uid = foreign_owner(path); uid >= 0) foreign[uid].push_back(name);
    };
    if (DIR* d = ::opendir("/dev/shm")) {
      while (auto* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n == "." || n == "..") continue;
        if (isolation_ == "mount-namespace" || n.rfind(root_, 0) == 0) {
          shm.push_back(n);
          note_owner("/dev/shm/" + n, n);
        }
      }
      ::closedir(d);
    }
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(lock_dir_, ec)) {
      std::string path = e.path().string();
      if (!lock_subdirs_.contains(path)) {
        locks.push_back(path);
        note_owner(path, path);
        continue;
      }
      // A lock dir the misconfig fault made for one rank: the harness's own,
      // not a leftover; what the rank left in it is.
      for (const auto& inner : fs::directory_iterator(path, ec)) {
        locks.push_back(inner.path().string());
        note_owner(inner.path().string(), inner.path().string());
      }
    }
    // Entries an unprivileged worker created are another user's: root's
    // cleanup is rightly forbidden to remove them, so they are no leak.
    for (const auto& [uid, names] : foreign) {
      log_.emit({{"type", "fault"}, {"kind", "unprivileged"}, {"phase", "instant"}, {"job", -1}, {"rank", -1},
                 {"detail", {{"uid", uid}, {"foreign", true}, {"names", names},
                             {"why", "left by a worker running as uid " + std::to_string(uid) + ": another user's"}}}});
    }
    Json audit = {{"type", "audit"}, {"leftover_shm", shm}, {"leftover_locks", locks}, {"orphans", orphans},
                  {"straggler_wait_ms", wait_ns / 1'000'000}, {"stragglers_exited", settled_t.has_value()}};
    if (settled_t) audit["settled_t"] = *settled_t;
    if (!shared_new.empty()) audit["shared_shm_new"] = shared_new;
    log_.emit(std::move(audit));
    // The trial's own leftovers go now that they are on record (a mount namespace drops them anyway).
    if (isolation_ != "mount-namespace") {
      for (const auto& n : shm) ::shm_unlink(("/" + n.get<std::string>()).c_str());
    }
    fs::remove_all(lock_dir_, ec);
    // The containers go last: killing a container's init kills all in it.
    for (auto& [id, box] : containers_) {
      if (box.init <= 0) continue;
      ::kill(box.init, SIGKILL);
      while (::waitpid(box.init, nullptr, 0) < 0 && errno == EINTR) {
      }
      for (auto& [kind, detail] : seeded_) {
        if (kind == "containers" && detail.value("container", -1) == id) {
          log_.emit({{"type", "fault"}, {"kind", kind}, {"phase", "end"}, {"job", -1}, {"rank", -1}, {"detail", detail}});
        }
      }
    }
    cap_logs(true);  // every writer is gone
  }

  const TrialPlan& plan_;
  const SupervisorConfig& cfg_;
  const bool pid_ns_;  // we are init of the trial's own pid namespace
  EventLog log_;
  std::string trial_dir_;  // absolute: a container's worker starts elsewhere
  std::string isolation_, root_, lock_dir_;
  std::string proc_error_;  // set if the trial's pid namespace has no /proc of its own
  std::map<pid_t, Worker> workers_;
  std::map<std::string, ino_t> shared_before_;         // name-root: the shared /dev/shm as the trial began
  // Every worker's stdout.log and stderr.log, as the fd cap_logs() cuts it
  // through (the harness's own, O_APPEND; closed with the supervisor).
  struct WorkerLog {
    explicit WorkerLog(int f) : fd(f) {}
    WorkerLog(WorkerLog&& o) noexcept : fd(std::exchange(o.fd, -1)), cut(o.cut) {}
    WorkerLog& operator=(WorkerLog&&) = delete;
    ~WorkerLog() {
      if (fd >= 0) ::close(fd);
    }
    int fd = -1;
    bool cut = false;  // cap_logs() has cut it and written the mark
  };
  std::vector<WorkerLog> logs_;
  std::int64_t next_log_check_ = 0;
  std::map<std::string, std::string> base_env_;
  std::vector<pid_t> helpers_;                         // fault helpers holding lock files or reused pids
  std::set<std::string> lock_subdirs_;                 // lock dirs made for misconfigured ranks
  std::map<int, Container> containers_;
  std::deque<WorkerPlan> replacements_;                // plans of replacement workers (stable addresses)
  std::vector<Timer> timers_;
  int self_pid_ns_fd_ = -1;
  int ghost_count_ = 0;
  int tail_fd_ = -1;                                   // reading history.jsonl for event triggers
  std::map<pid_t, Tracked> tracked_;                   // processes of the trial we did not start, by our pid
  std::set<const Action*> settings_logged_;           // settings faults logged at their worker's start
  std::string gate_path_;                              // the start gate's FIFO ("" without one)
  int gate_fd_ = -1;                                   // its only writer, closed to open it
  bool gate_open_ = false;
  std::int64_t gate_t_ = 0;
  std::set<std::pair<int, int>> awaiting_;             // (job, rank) not yet at the gate
  std::vector<Timer> gate_timers_;                     // timers placed relative to the gate's opening
  bool triggers_pending_ = false;
  bool tracks_processes_ = false;                      // loader workers or launched ranks announce themselves
  int sig_fd_ = -1, inotify_fd_ = -1;
  std::vector<Teardown> teardowns_;                    // launchers that ended, and their jobs' survivors
  std::string tail_buf_;
  std::vector<std::pair<std::string, Json>> seeded_;  // open seed fault windows (kind "" once closed)
  std::int64_t start_ = 0;
  std::int64_t prev_look_wait_ = -1;  // our cpu_wait_ns() when the previous reap() began
  bool timed_out_ = false;
  bool healing_ = false;
  bool first_stop_taken_ = false;  // a first_of_trial OnStop has fired  // the trial is over: pauses end in SIGCONT, nothing new starts
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
