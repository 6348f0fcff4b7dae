// The trial's world and the processes started in it: its namespaces (mount,
// network, pid), containers, the start gate, workers and launchers.
#include "supervisor_internal.h"

namespace harness::supervision {
namespace {

// What a worker's process needs before exec. Prepared by the parent: the
// forked child only makes syscalls with it.
struct ChildSetup {
  pid_t parent =
      0;  // getppid() must be this (0 in a container: its parent is outside its pid namespace)
  const char* exe = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  int events_fd = -1, out_fd = -1, err_fd = -1;
  int uid = -1, gid = -1;
  long nofile = -1;
  int mnt_ns_fd = -1;  // >= 0: enter this mount namespace (a container's, with its own /proc)
  int cwd_fd = -1;     // the worker's own dir (<trial>/<label>): where it starts, after any setns
  // The child shares our memory until it execs (vfork_worker): a failure
  // before exec is its errno, written here; 0 if exec worked.
  int* failed_errno = nullptr;
};

// What a worker's process must be before exec: the leader of its own process
// group, dead with the supervisor, with a clean signal state, events on fd 3,
// stdio in its log files, and the injected identity, limits and container.
// Runs in a child that shares the supervisor's memory until it execs
// (vfork_worker, as posix_spawn does): only raw syscalls, no allocation, no
// glibc state (setuid and friends as syscalls: glibc's wrappers would try
// to reach the supervisor's other threads). A failure before exec is its
// errno in *failed_errno, then _exit(127).
[[noreturn]] void exec_worker(const ChildSetup& c) {
  // (A free function, not a [[noreturn]] lambda: clang refuses the attribute there.)
  auto die = [&c](int) {
    *c.failed_errno = errno != 0 ? errno : EINVAL;
    ::_exit(127);
  };
  // No handler of the supervisor's (the harness's, inherited) may run here,
  // in its memory: every caught signal back to its default while all are
  // blocked (vfork_worker blocked them), ignored ones stay ignored as exec
  // keeps them. SIGINT, which the supervisor ignores, is the default again.
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction sa {};
    if (sig == SIGKILL || sig == SIGSTOP || ::sigaction(sig, nullptr, &sa) != 0) continue;
    if (sa.sa_handler == SIG_DFL || (sa.sa_handler == SIG_IGN && sig != SIGINT)) continue;
    sa.sa_handler = SIG_DFL;
    sa.sa_flags = 0;
    ::sigaction(sig, &sa, nullptr);
  }
  // Its own process group, so a whole-job kill (killpg) takes its whole tree.
  // It stays out of the terminal's foreground group like the supervisor.
  if (::setpgid(0, 0) != 0) die(110);
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != c.parent) die(111);
  if (c.mnt_ns_fd >= 0 && ::setns(c.mnt_ns_fd, CLONE_NEWNS) != 0) die(118);
  if (c.cwd_fd >= 0 && ::fchdir(c.cwd_fd) != 0) die(119);
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0 || ::dup2(devnull, 0) < 0 || ::dup2(c.out_fd, 1) < 0 || ::dup2(c.err_fd, 2) < 0)
    die(112);
  if (c.events_fd == kEventsFd) {
    if (::fcntl(kEventsFd, F_SETFD, 0) < 0) die(113);
  } else if (::dup2(c.events_fd, kEventsFd) < 0) {  // dup2 clears FD_CLOEXEC on fd 3
    die(113);
  }
  // Close every other inherited fd (our fd table is the child's own copy).
  ::syscall(SYS_close_range, kEventsFd + 1, ~0U, 0);
  if (c.nofile >= 0) {
    struct rlimit rl {
      static_cast<rlim_t>(c.nofile), static_cast<rlim_t>(c.nofile)
    };
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) die(114);
  }
  if (c.gid >= 0 && (::syscall(SYS_setgroups, 0, nullptr) != 0 || ::syscall(SYS_setgid, c.gid) != 0))
    die(115);
  if (c.uid >= 0 && ::syscall(SYS_setuid, c.uid) != 0) die(116);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(c.exe, c.argv, c.envp);
  *c.failed_errno = errno;
  ::_exit(127);
}

int exec_worker_entry(void* c) { exec_worker(*static_cast<const ChildSetup*>(c)); }

// Starts a worker as posix_spawn does: clone(CLONE_VM | CLONE_VFORK), so the
// child borrows our memory instead of copying our page tables (a fork of
// the supervisor cost 0.6-0.8 ms a worker, serially), and we resume once it
// has exec'd or failed. All signals stay blocked in between (exec_worker
// resets the handlers before it unblocks them). Returns the pid, or -1 with
// errno (the clone's, or the child's failure before exec in *c.failed_errno).
pid_t vfork_worker(ChildSetup& c) {
  // The child's stack while it borrows our memory: one per supervisor,
  // reused (the child is done with it when clone returns).
  constexpr std::size_t kStack = 256 * 1024;
  static void* stack = nullptr;
  if (!stack) {
    stack = ::mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) {
      stack = nullptr;
      return -1;
    }
  }
  int failed = 0;
  c.failed_errno = &failed;
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid = ::clone(exec_worker_entry, static_cast<char*>(stack) + kStack, CLONE_VM | CLONE_VFORK | SIGCHLD, &c);
  const int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) {
    errno = clone_errno;
    return -1;
  }
  if (failed != 0) {  // never became a worker: reap what is left of it
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    errno = failed;
    return -2;
  }
  return pid;
}

}  // namespace

// A launcher listens on loopback ports of its own (torchrun's store): the
// trial gets its own network namespace, so trials running side by side
// never meet on a port, and brings its loopback up.
void Supervisor::own_network() {
  if (plan_.launchers.empty() || ::unshare(CLONE_NEWNET) != 0) return;
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  struct ifreq ifr {};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    ::ioctl(fd, SIOCSIFFLAGS, &ifr);
  }
  ::close(fd);
}

void Supervisor::isolate() {
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
    if (pid_ns_ &&
        ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
      proc_error_ =
          std::string("cannot mount /proc for the trial's pid namespace: ") + std::strerror(errno);
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
std::string Supervisor::shm_size() const {
  if (!plan_.shm_size.empty()) return plan_.shm_size;
  return cfg_.shm_size.empty() ? std::string("256m") : cfg_.shm_size;
}

// The environment every worker starts from: ours, minus injection knobs,
// plus where the trial lives. Built once per trial.
const std::map<std::string, std::string>& Supervisor::base_env() {
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

pid_t Supervisor::spawn(const std::map<std::string, std::string>& extra, const std::string& label) {
  return spawn(extra, label, SpawnOptions{});
}

pid_t Supervisor::spawn(const std::map<std::string, std::string>& extra, const std::string& label,
                        SpawnOptions o) {
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
  env["SHMSTRESS_ROOT"] =
      root_ + (extra.contains("SHMSTRESS_ROOT_SUFFIX") ? extra.at("SHMSTRESS_ROOT_SUFFIX") : "");
  env["SHMSTRESS_LOCK_DIR"] = extra.contains("SHMSTRESS_LOCK_DIR_OVERRIDE")
                                  ? extra.at("SHMSTRESS_LOCK_DIR_OVERRIDE")
                                  : lock_dir;
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
  for (const auto& a :
       cfg_.command.empty() || o.native ? std::vector<std::string>{cfg_.exe} : cfg_.command) {
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
      log_.emit({{"type", "harness-error"},
                 {"message", "no container " + std::to_string(w->container) + " for " + label}});
      return -1;
    }
    box = &it->second;
  }
  // O_APPEND: once cap_logs() cuts a log, what the worker writes next goes
  // after the cut, not into a hole at its old offset. O_NOFOLLOW: a worker
  // of an earlier spawn may have put a symlink there (it runs in this dir).
  int out = ::open((dir / "stdout.log").c_str(),
                   O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  int err = ::open((dir / "stderr.log").c_str(),
                   O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  // cap_logs() works on these files through fds of its own, never by path:
  // the worker may rename them or put a symlink in their place.
  for (int fd : {out, err}) {
    if (fd >= 0) logs_.emplace_back(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
  }
  if (out < 0 || err < 0) {
    log_.emit({{"type", "harness-error"},
               {"message", "cannot open the logs of " + label + ": " + std::strerror(errno)}});
    if (out >= 0) ::close(out);
    if (err >= 0) ::close(err);
    return -1;
  }
  // It starts in its own dir (docs/worker-protocol.md): a subject's
  // relative writes land in the trial, not where shmstress was started.
  const int own_dir = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (own_dir < 0) {
    log_.emit({{"type", "harness-error"},
               {"message", "cannot open the dir of " + label + ": " + std::strerror(errno)}});
    ::close(out), ::close(err);
    return -1;
  }
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
  c.mnt_ns_fd = box ? box->mnt_ns_fd : -1;
  c.cwd_fd = own_dir;
  // A container's worker is started in its pid namespace (our children's
  // namespace for this one clone), so it stays our child to reap and signal.
  if (box && ::setns(box->pid_ns_fd, CLONE_NEWPID) != 0) {
    log_.emit({{"type", "harness-error"},
               {"message", "cannot enter container " + std::to_string(w->container) + ": " +
                               std::strerror(errno)}});
    ::close(out), ::close(err), ::close(own_dir);
    return -1;
  }
  pid_t pid = vfork_worker(c);
  const int spawn_errno = errno;
  if (box) ::setns(self_pid_ns_fd_, CLONE_NEWPID);
  ::close(out);
  ::close(err);
  ::close(own_dir);
  if (pid == -1) {
    log_.emit({{"type", "harness-error"},
               {"message", "fork failed for " + label + ": " + std::strerror(spawn_errno)}});
    return -1;
  }
  if (pid < 0) {  // never became a worker: the harness failed
    log_.emit(
        {{"type", "harness-error"},
         {"message", "cannot start " + label + " (" + exe + "): " + std::strerror(spawn_errno)}});
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
void Supervisor::log_settings(int job, int rank, pid_t self_pid, std::int64_t t) {
  for (const Action& a : plan_.actions) {
    if (a.signal != 0 || a.job != job || (job >= 0 && a.rank != rank) || a.at_ns != 0 ||
        !a.on_type.empty() || !settings_logged_.insert(&a).second)
      continue;
    Json e = {{"type", "fault"}, {"kind", a.fault}, {"phase", a.phase},
              {"job", a.job},    {"rank", a.rank},  {"detail", a.detail},
              {"t", t}};
    if (job >= 0) e["pid"] = self_pid, e["signal"] = 0;
    log_.emit(std::move(e));
  }
}

pid_t Supervisor::start_worker(const WorkerPlan& w, const std::map<std::string, std::string>& env,
                               const std::string& label) {
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
pid_t Supervisor::start_launcher(const LauncherPlan& lp) {
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
  std::vector<std::string> argv = {"/usr/bin/python3",
                                   "-m",
                                   "torch.distributed.run",
                                   "--nnodes",
                                   "1",
                                   "--nproc_per_node",
                                   std::to_string(n),
                                   "--max_restarts",
                                   std::to_string(lp.max_restarts),
                                   "--monitor_interval",
                                   "0.1",
                                   "--master_addr",
                                   "127.0.0.1",
                                   "--master_port",
                                   std::to_string(29500 + lp.job),
                                   "--redirects",
                                   "1",
                                   "--tee",
                                   "2",
                                   "--log_dir",
                                   trial_dir_ + "/" + label + "/logs"};
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
    log_.emit({{"type", "harness-error"},
               {"message", "cannot start the launcher of job " + std::to_string(lp.job)}});
    return pid;
  }
  Worker x{lp.job, -1};
  x.launcher = true;
  x.self_pid = first->container >= 0 ? own_pid(pid) : pid;
  workers_[pid] = x;
  log_.emit({{"type", "start"},
             {"role", "launcher"},
             {"job", lp.job},
             {"rank", -1},
             {"pid", x.self_pid},
             {"launcher", lp.kind},
             {"max_restarts", lp.max_restarts},
             {"teardown_ms", lp.teardown_ns / 1000000}});
  return pid;
}

// Creates container #id: a pid namespace (pid 1: a process that only reaps)
// with its own mount namespace and /proc, over our /dev/shm.
void Supervisor::make_container(int id) {
  Container box;
  containers_[id] = box;  // a failed one stays: its workers are refused
  if (!pid_ns_) {
    log_.emit({{"type", "harness-error"},
               {"message", "containers need the trial's own pid namespace (run as root)"}});
    return;
  }
  if (self_pid_ns_fd_ < 0) self_pid_ns_fd_ = ::open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
  int ready[2];
  if (self_pid_ns_fd_ < 0 || ::pipe2(ready, O_CLOEXEC) != 0) return;
  if (::unshare(CLONE_NEWPID) != 0) {
    log_.emit({{"type", "harness-error"},
               {"message", std::string("cannot make a container: ") + std::strerror(errno)}});
    ::close(ready[0]), ::close(ready[1]);
    return;
  }
  pid_t init = ::fork();
  if (init == 0) {
    char ok = 1;
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
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
    log_.emit({{"type", "harness-error"},
               {"message", "container " + std::to_string(id) + " could not mount its /proc"}});
    if (init > 0) ::kill(init, SIGKILL), ::waitpid(init, nullptr, 0);
    ::close(ready[0]);
    return;
  }
  ::close(ready[0]);
  box.init = init;
  box.pid_ns_fd =
      ::open(("/proc/" + std::to_string(init) + "/ns/pid").c_str(), O_RDONLY | O_CLOEXEC);
  box.mnt_ns_fd =
      ::open(("/proc/" + std::to_string(init) + "/ns/mnt").c_str(), O_RDONLY | O_CLOEXEC);
  containers_[id] = box;
  Json jobs = Json::array();
  for (const auto& w : plan_.workers) {
    if (w.container == id && (jobs.empty() || jobs.back() != w.job)) jobs.push_back(w.job);
  }
  Json detail = {{"container", id}, {"jobs", jobs}, {"init_pid", init}};
  log_.emit({{"type", "fault"},
             {"kind", "containers"},
             {"phase", "start"},
             {"job", -1},
             {"rank", -1},
             {"detail", detail}});
  seeded_.push_back({"containers", detail});
}

// The start gate (docs/worker-protocol.md, aligned start): a FIFO whose
// only writer is ours. Workers block reading it until it is closed.
void Supervisor::make_gate() {
  gate_path_ = trial_dir_ + "/gate";
  ::unlink(gate_path_.c_str());
  if (::mkfifo(gate_path_.c_str(), 0666) != 0 || ::chmod(gate_path_.c_str(), 0666) != 0) {
    log_.emit({{"type", "harness-error"},
               {"message", std::string("cannot make the start gate: ") + std::strerror(errno)}});
    gate_path_.clear();
    return;
  }
  gate_fd_ = ::open(gate_path_.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  inotify_fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_fd_ >= 0)
    history_watch_ =
        ::inotify_add_watch(inotify_fd_, (trial_dir_ + "/history.jsonl").c_str(), IN_MODIFY);
  tracks_processes_ = !plan_.launchers.empty() ||
                      std::any_of(plan_.workers.begin(), plan_.workers.end(),
                                  [](const WorkerPlan& w) { return w.loader_workers > 0; });
}

// Opens the gate: every worker waiting there runs from this moment, and
// time-placed actions count from it.
void Supervisor::open_gate(const char* why) {
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
  log_.emit({{"type", "gate"},
             {"phase", "open"},
             {"t", gate_t_},
             {"by", why},
             {"waiting", waiting},
             {"after_ms", (gate_t_ - start_) / 1'000'000}});
  for (auto& t : gate_timers_) {
    t.at += gate_t_;
    timers_.push_back(std::move(t));
  }
  gate_timers_.clear();
}

// A worker is at the gate (or past it) once it said anything but `start`:
// `ready`, or, for a subject of the first protocol, its first op.
void Supervisor::note_ready(const Json& e) {
  const std::string type = str_of(e, "type");
  if (gate_open_ || type == "start" || e.contains("worker") || type == "fault" || type == "exit")
    return;
  // A subject of protocol 2 says so at once, and its `ready` follows.
  if (type == "subject" && int_of(e, "protocol", 1) >= 2) return;
  awaiting_.erase(
      {static_cast<int>(int_of(e, "job", -2)), static_cast<int>(int_of(e, "rank", -2))});
}

}  // namespace harness::supervision
