// The trial's world and the processes started in it: its namespaces (mount,
// network, pid), containers, the start gate, workers and launchers.
#include "supervisor_internal.h"
#include "worker_process.h"
#include "zygote.h"

namespace harness::supervision {
namespace {

// What a worker's process needs before exec. Prepared by the parent: the
// forked child only makes syscalls with it.
struct ChildSetup {
  WorkerProcess proc;  // what it is made before exec (worker_process.h)
  const char* exe = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  // The child shares our memory until it execs (vfork_worker): a failure
  // before exec is its errno, written here; 0 if exec worked.
  int* failed_errno = nullptr;
};

// Runs in a child that shares the supervisor's memory until it execs
// (vfork_worker, as posix_spawn does): only raw syscalls, no allocation, no
// glibc state. A failure before exec is its errno in *failed_errno, then
// _exit(127).
[[noreturn]] void exec_worker(const ChildSetup& c) {
  // (A free function, not a [[noreturn]] lambda: clang refuses the attribute there.)
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
  if (become_worker_process(c.proc)) ::execve(c.exe, c.argv, c.envp);
  *c.failed_errno = errno != 0 ? errno : EINVAL;
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

// Sends one message of `iov` with `nfds` fds in its SCM_RIGHTS (at most 4),
// whole or not at all: true if it went.
bool send_with_fds(int sock, struct iovec* iov, std::size_t iovlen, const int* fds, std::size_t nfds) {
  constexpr std::size_t kMax = 4;
  if (sock < 0 || nfds > kMax) return false;
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMax)] = {};
  struct msghdr m {};
  m.msg_iov = iov;
  m.msg_iovlen = iovlen;
  m.msg_control = control;
  m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
  struct cmsghdr* cm = CMSG_FIRSTHDR(&m);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
  std::memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < iovlen; ++i) bytes += iov[i].iov_len;
  return ::sendmsg(sock, &m, MSG_NOSIGNAL) == static_cast<ssize_t>(bytes);
}

// Sends the trial's zygote a request for a worker set up as `c` says, with
// environment `env` ("K=V" strings, each NUL-terminated). False if it
// could not be sent (the zygote is of no more use).
bool ask_zygote(int sock, const ChildSetup& c, const std::string& env) {
  zygote::Request q;
  q.uid = c.proc.uid;
  q.gid = c.proc.gid;
  q.nofile = c.proc.nofile;
  struct iovec iov[2] = {{&q, sizeof q}, {const_cast<char*>(env.data()), env.size()}};
  const int fds[zygote::kRequestFds] = {c.proc.events_fd, c.proc.out_fd, c.proc.err_fd, c.proc.cwd_fd};
  return send_with_fds(sock, iov, 2, fds, zygote::kRequestFds);
}

// The zygote's next answer (its hello first, then one per request, in
// order), or nothing if it did not give one within 10 s (it clones once per
// request) or the connection closed.
std::optional<zygote::Reply> zygote_answer(int sock) {
  if (sock < 0) return std::nullopt;
  struct pollfd pfd {
    sock, POLLIN, 0
  };
  int ready;
  while ((ready = ::poll(&pfd, 1, zygote::kPatienceMs)) < 0 && errno == EINTR) {
  }
  zygote::Reply r;
  if (ready != 1 || ::recv(sock, &r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) return std::nullopt;
  return r;
}

// Set by the dynamic loader and malloc as a process starts: a worker whose
// `extra` environment gives one of these a value other than the zygote's
// (which has the environment every worker starts from, `base`) must be
// exec'd to have it.
bool loader_env_differs(const std::map<std::string, std::string>& extra,
                        const std::map<std::string, std::string>& base) {
  return std::any_of(extra.begin(), extra.end(), [&](const auto& kv) {
    const std::string& k = kv.first;
    if (!k.starts_with("LD_") && k != "GLIBC_TUNABLES" && !k.starts_with("MALLOC_")) return false;
    auto it = base.find(k);
    return it == base.end() || it->second != kv.second;
  });
}

}  // namespace

// Registers the trial with the run's zygote (zygote.h): a connection of its
// own, and the namespaces its workers are to be in. Only a supervisor that
// is init of the trial's pid namespace: a worker the zygote forks is
// re-parented to that init.
void Supervisor::start_zygote() {
  zygote_tried_ = true;
  if (cfg_.zygote_fd < 0 || !pid_ns_) return;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return;
  int fds[zygote::kRegisterFds] = {sv[1], ::open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC),
                                   ::open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC),
                                   ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)};
  bool sent = false;
  if (std::all_of(std::begin(fds), std::end(fds), [](int fd) { return fd >= 0; })) {
    char tag = 'r';
    struct iovec iov {
      &tag, 1
    };
    sent = send_with_fds(cfg_.zygote_fd, &iov, 1, fds, zygote::kRegisterFds);
  }
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  if (!sent) {
    ::close(sv[0]);
    return;
  }
  // A request that cannot be sent in time (a zygote that stopped reading)
  // fails like any other: the zygote is of no more use.
  zygote::bound_sends(sv[0]);
  zygote_fd_ = sv[0];
}

// Whether the trial has a native process the zygote may fork (prepare()
// decides for each): a worker outside containers and launchers, with the
// zygote's loader-time environment, a ghost, or the cleanup step.
bool Supervisor::wants_zygote() {
  if (cfg_.zygote_fd < 0 || !pid_ns_ || !cfg_.command.empty()) return false;
  if (plan_.final_cleanup || !plan_.ghosts.empty()) return true;
  return std::any_of(plan_.workers.begin(), plan_.workers.end(), [&](const WorkerPlan& w) {
    return w.container < 0 && !launcher_of(plan_, w.job) && !loader_env_differs(w.env, base_env());
  });
}

// The zygote forgets the trial (and its namespaces) when the connection closes.
void Supervisor::stop_zygote() {
  if (zygote_fd_ >= 0) ::close(zygote_fd_);
  zygote_fd_ = -1;
}

// Before the audit: the trial's zygote, if it is still coming up, says
// hello (or fails) and then goes, so it is neither half made nor left over
// when the audit looks.
void Supervisor::finish_zygote() {
  if (zygote_fd_ >= 0) zygote_ready();
  stop_zygote();
  if (zygote_pidfd_ < 0) return;
  struct pollfd pfd {
    zygote_pidfd_, POLLIN, 0
  };
  ::poll(&pfd, 1, 1000);  // it exits at end of file; reap() takes it
  ::close(zygote_pidfd_);
  zygote_pidfd_ = -1;
}

// The zygote's hello, once: its pid, or the reason it cannot start workers.
// Without a hello it is quietly not used (every worker is exec'd): it says
// hello before it reads a request, so nothing asked of it became a worker.
bool Supervisor::zygote_ready() {
  if (zygote_fd_ < 0) return false;
  if (zygote_pid_ > 0) return true;
  auto hello = zygote_answer(zygote_fd_);
  if (!hello || hello->error != 0 || hello->pid <= 0) {
    stop_zygote();  // one still coming up fails its hello on the closed connection and exits
    return false;
  }
  zygote_pid_ = hello->pid;
  zygote_pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, zygote_pid_, 0));
  return true;
}

// A zygote that said hello and then failed the trial (stopped taking
// requests, or did not answer one in 10 s): on record (the trial is a
// harness error, never a subject's) and killed. What it answered before it
// died stays (those workers are set up: launch() takes them in order); a
// request it may have received and not answered is never started again
// (launch()), and a clone it made for one is killed, so no rank runs twice.
void Supervisor::zygote_failed(const std::string& why) {
  log_.emit({{"type", "harness-error"},
             {"message", "the trial's zygote " + why +
                             "; the workers it did not answer for are not started, the rest are exec'd"}});
  zygote_lost_ = true;
  if (zygote_pidfd_ >= 0) {
    ::syscall(SYS_pidfd_send_signal, zygote_pidfd_, SIGKILL, nullptr, 0);
    struct pollfd pfd {
      zygote_pidfd_, POLLIN, 0
    };
    ::poll(&pfd, 1, 1000);
  }
  for (zygote::Reply r; zygote_fd_ >= 0;) {
    struct pollfd pfd {
      zygote_fd_, POLLIN, 0
    };
    if (::poll(&pfd, 1, 0) != 1 || ::recv(zygote_fd_, &r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) break;
    drained_.push_back(r);
  }
  stop_zygote();
  const pid_t me = ::getpid();
  auto answered = [this](pid_t p) {
    return std::any_of(drained_.begin(), drained_.end(), [p](const zygote::Reply& r) { return r.pid == p; });
  };
  for (pid_t p : descendants()) {
    ProcStat ps;
    if (!proc_stat(p, &ps) || ps.ppid != me || p == zygote_pid_ || workers_.contains(p) ||
        tracked_.contains(p) || answered(p) || p == cleanup_pid_ ||
        std::find(helpers_.begin(), helpers_.end(), p) != helpers_.end())
      continue;
    ::kill(-p, SIGKILL);  // its own group, if it got as far as making one
    ::kill(p, SIGKILL);
  }
}

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
  // Nothing is mounted unless this process has a mount namespace of its own.
  const bool own_mounts = cfg_.allow_mount_ns && ::unshare(CLONE_NEWNS) == 0 &&
                          ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
  if (own_mounts) {
    own_network();
    // The trial's zygote joins these namespaces while we mount the rest in
    // them: what it takes to start overlaps what is left to set up here.
    if (wants_zygote()) start_zygote();
  }
  if (own_mounts && ::mount("shmstress", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
                                     ("size=" + shm_size() + ",mode=1777").c_str()) == 0) {
    isolation_ = "mount-namespace";
    root_ = cfg_.shm_root.value_or("shmstress.");
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

// A process of the trial, ready to start: everything its child needs is
// made before it starts (after the fork the child only makes syscalls).
struct Supervisor::Prepared {
  std::string label, exe, blob;
  std::vector<std::string> kvs, args;
  std::vector<char*> envp, argv;
  int out = -1, err = -1, own_dir = -1;
  const Container* box = nullptr;
  int container = -1;
  ChildSetup c;
  bool forkable = false;  // may be forked from the zygote
  bool asked = false;     // its request is with the zygote
  Prepared() = default;
  Prepared(const Prepared&) = delete;
  Prepared& operator=(const Prepared&) = delete;
  ~Prepared() {
    for (int fd : {out, err, own_dir}) {
      if (fd >= 0) ::close(fd);
    }
  }
};

pid_t Supervisor::spawn(const std::map<std::string, std::string>& extra, const std::string& label) {
  return spawn(extra, label, SpawnOptions{});
}

pid_t Supervisor::spawn(const std::map<std::string, std::string>& extra, const std::string& label,
                        SpawnOptions o) {
  std::unique_ptr<Prepared> p = prepare(extra, label, o);
  if (!p) return -1;
  ask(*p);
  return launch(*p);
}

std::unique_ptr<Supervisor::Prepared> Supervisor::prepare(const std::map<std::string, std::string>& extra,
                                                          const std::string& label, const SpawnOptions& o) {
  auto p = std::make_unique<Prepared>();
  p->label = label;
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
  for (const auto& [k, v] : env) p->kvs.push_back(k + "=" + v);
  fs::path dir = trial_dir_ + "/" + label;
  fs::create_directories(dir);
  for (auto& kv : p->kvs) p->envp.push_back(kv.data());
  p->envp.push_back(nullptr);
  p->args = o.launcher;
  for (const auto& a :
       cfg_.command.empty() || o.native ? std::vector<std::string>{cfg_.exe} : cfg_.command) {
    p->args.push_back(a);
  }
  p->args.push_back("worker");
  for (auto& a : p->args) p->argv.push_back(a.data());
  p->argv.push_back(nullptr);
  p->exe = p->args.front();
  if (w && w->container >= 0) {
    auto it = containers_.find(w->container);
    if (it == containers_.end() || it->second.init <= 0) {
      log_.emit({{"type", "harness-error"},
                 {"message", "no container " + std::to_string(w->container) + " for " + label}});
      return nullptr;
    }
    p->box = &it->second;
    p->container = w->container;
  }
  // O_APPEND: once cap_logs() cuts a log, what the worker writes next goes
  // after the cut, not into a hole at its old offset. O_NOFOLLOW: a worker
  // of an earlier spawn may have put a symlink there (it runs in this dir).
  p->out = ::open((dir / "stdout.log").c_str(),
                  O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  p->err = ::open((dir / "stderr.log").c_str(),
                  O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  // cap_logs() works on these files through fds of its own, never by path:
  // the worker may rename them or put a symlink in their place.
  for (int fd : {p->out, p->err}) {
    if (fd >= 0) logs_.emplace_back(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
  }
  if (p->out < 0 || p->err < 0) {
    log_.emit({{"type", "harness-error"},
               {"message", "cannot open the logs of " + label + ": " + std::strerror(errno)}});
    return nullptr;
  }
  // It starts in its own dir (docs/worker-protocol.md): a subject's
  // relative writes land in the trial, not where shmstress was started.
  p->own_dir = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (p->own_dir < 0) {
    log_.emit({{"type", "harness-error"},
               {"message", "cannot open the dir of " + label + ": " + std::strerror(errno)}});
    return nullptr;
  }
  ChildSetup& c = p->c;
  c.exe = p->exe.c_str();
  c.argv = p->argv.data();
  c.envp = p->envp.data();
  WorkerProcess& proc = c.proc;
  proc.parent = p->box ? 0 : ::getpid();
  proc.events_fd = o.events_fd >= 0 ? o.events_fd : log_.fd();
  proc.out_fd = p->out;
  proc.err_fd = p->err;
  proc.uid = w ? w->uid : -1;
  proc.gid = w ? w->gid : -1;
  proc.nofile = w ? w->nofile : -1;
  proc.mnt_ns_fd = p->box ? p->box->mnt_ns_fd : -1;
  proc.cwd_fd = p->own_dir;
  // The native worker, outside containers, with the zygote's loader-time
  // environment, is forked from the trial's zygote (zygote.h); the rest, and
  // all of them once the zygote fails to answer, are exec'd.
  if (cfg_.zygote_fd >= 0 && !p->box && o.launcher.empty() && (cfg_.command.empty() || o.native) &&
      !loader_env_differs(extra, base_env())) {
    for (const auto& kv : p->kvs) p->blob.append(kv).push_back('\0');
    p->forkable = p->blob.size() + sizeof(zygote::Request) <= zygote::kMaxRequest;
  }
  return p;
}

// Hands `p` to the trial's zygote if it may be forked from it: its pid is
// the zygote's next answer (launch). Several may be asked before the first
// is launched: the zygote answers in order.
void Supervisor::ask(Prepared& p) {
  if (!p.forkable) return;
  if (!zygote_tried_) start_zygote();
  if (zygote_fd_ < 0 || zygote_lost_) return;
  p.asked = ask_zygote(zygote_fd_, p.c, p.blob);
  if (p.asked || errno == EMSGSIZE || errno == ENOBUFS) return;  // too big: this one is exec'd
  // The connection broke. Before its hello the zygote started nothing.
  if (zygote_ready()) zygote_failed("stopped taking requests");
}

// Starts `p`: the zygote's answer if it was asked, else an exec. Returns
// its pid, or -1 (logged).
pid_t Supervisor::launch(Prepared& p) {
  pid_t pid = -1;
  int spawn_errno = 0;
  std::optional<zygote::Reply> answer;
  if (p.asked && !zygote_lost_ && zygote_ready()) {
    answer = zygote_answer(zygote_fd_);
    if (!answer) zygote_failed("did not answer " + p.label + " in 10 s");
  }
  if (p.asked && zygote_lost_ && !answer) {  // an answer it left, or none: never started twice
    if (drained_.empty()) {
      log_.emit({{"type", "harness-error"},
                 {"message", "not starting " + p.label + ": its request was with the zygote that failed"}});
      return -1;
    }
    answer = drained_.front();
    drained_.pop_front();
  }
  if (answer) {
    if (answer->error == 0 && answer->pid > 0) {
      pid = answer->pid;
    } else {
      // It never became a worker: as a failed exec (what is left of it, ours, reaped).
      if (answer->pid > 0) {
        while (::waitpid(answer->pid, nullptr, 0) < 0 && errno == EINTR) {
        }
      }
      pid = -2;
      spawn_errno = answer->error != 0 ? answer->error : EPROTO;
    }
  }
  if (!answer) {
    // A container's worker is started in its pid namespace (our children's
    // namespace for this one clone), so it stays our child to reap and signal.
    if (p.box && ::setns(p.box->pid_ns_fd, CLONE_NEWPID) != 0) {
      log_.emit({{"type", "harness-error"},
                 {"message", "cannot enter container " + std::to_string(p.container) + ": " +
                                 std::strerror(errno)}});
      return -1;
    }
    pid = vfork_worker(p.c);
    spawn_errno = errno;
    if (p.box) ::setns(self_pid_ns_fd_, CLONE_NEWPID);
  }
  if (pid == -1) {
    log_.emit({{"type", "harness-error"},
               {"message", "fork failed for " + p.label + ": " + std::strerror(spawn_errno)}});
    return -1;
  }
  if (pid < 0) {  // never became a worker: the harness failed
    log_.emit({{"type", "harness-error"},
               {"message", "cannot start " + p.label + " (" + p.exe + "): " + std::strerror(spawn_errno)}});
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
  return start_workers({{&w, &env, label}}).front();
}

// Starts the workers in order, each asked of the zygote before the first
// answer is read (the zygote forks while we prepare the next). Returns their
// pids (-1: not started, logged).
std::vector<pid_t> Supervisor::start_workers(const std::vector<WorkerStart>& ws) {
  struct Pending {
    std::unique_ptr<Prepared> p;
    std::int64_t before_fork = 0;
  };
  // At most this many asked and not yet answered: the zygote's answers
  // wait in our socket's buffer meanwhile, which must never fill.
  constexpr std::size_t kAhead = 32;
  std::vector<Pending> pending;
  std::vector<pid_t> pids;
  auto launch_next = [&] {
    const std::size_t i = pids.size();
    const WorkerPlan& w = *ws[i].w;
    pid_t pid = pending[i].p ? launch(*pending[i].p) : -1;
    pending[i].p.reset();  // its fds, now the worker's
    if (pid > 0) {
      Worker x{w.job, w.rank};
      x.spawned_t = pending[i].before_fork;
      x.plan = &w;
      x.self_pid = w.container >= 0 ? own_pid(pid) : pid;
      workers_[pid] = x;
      log_settings(x.job, x.rank, x.self_pid, x.spawned_t);
    }
    pids.push_back(pid);
  };
  for (const WorkerStart& s : ws) {
    if (pending.size() - pids.size() >= kAhead) launch_next();
    // Taken before the fork: the worker may run, fail on its settings and
    // log it before launch() returns here.
    Pending x;
    x.before_fork = mono_ns();
    x.p = prepare(*s.env, s.label, {.w = s.w});
    if (x.p) ask(*x.p);
    pending.push_back(std::move(x));
  }
  while (pids.size() < ws.size()) launch_next();
  return pids;
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
