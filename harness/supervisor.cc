// The trial's life, start to end (Supervisor::run), and the process that runs
// it (start_supervisor). The parts of that life are in supervisor_spawn.cc,
// supervisor_watch.cc, supervisor_faults.cc and supervisor_teardown.cc.
#include "supervisor_internal.h"

namespace harness {
namespace supervision {

int Supervisor::run() {
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
  log_.emit({{"type", "trial"},
             {"phase", "start"},
             {"t", start_},
             {"isolation", isolation_},
             {"root", root_},
             {"pid_namespace", pid_ns_},
             {"scenario", plan_.scenario},
             {"trial", plan_.trial},
             {"seed", plan_.seed}});
  log_settings(-1, -1, 0, start_);  // the trial's world (a small /dev/shm) is set from here
  if (!proc_error_.empty()) {  // pids would be looked up in another namespace's /proc: nothing is
                               // meaningful
    log_.emit({{"type", "harness-error"}, {"message", proc_error_}});
    log_.emit({{"type", "trial"}, {"phase", "end"}, {"timed_out", false}});
    return 3;
  }
  if (!cfg_.command.empty() && isolation_ != "mount-namespace" && !cfg_.allow_shared_shm) {
    // An external subject uses fixed names in /dev/shm and $TMPDIR: without a
    // private namespace it would meet (and clean up!) the machine's own.
    log_.emit({{"type", "harness-error"},
               {"message",
                "refusing to run an external subject without a private /dev/shm "
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
  std::vector<WorkerStart> first;
  for (const auto& w : plan_.workers) {
    if (!launcher_of(plan_, w.job)) first.push_back({&w, &w.env, worker_label(w.job, w.rank)});  // else its launcher starts it
  }
  const std::vector<pid_t> pids = start_workers(first);
  for (std::size_t i = 0; i < first.size(); ++i) {
    const WorkerPlan& w = *first[i].w;
    if (pids[i] <= 0) {
      log_.emit({{"type", "harness-error"},
                 {"message", "spawn failed for job " + std::to_string(w.job) + " rank " +
                                 std::to_string(w.rank)}});
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
  drop_history_watch();  // if the loop ended still following it
  heal_and_teardown();
  reap_until_workers_gone(mono_ns() + 5'000'000'000LL);
  // A trial stopped at a cut has its verdict: the cleanup step serves only
  // the audit's leak check, which a cut does not judge, and a subject whose
  // flaw hangs the trial's workers may hang it too (10 s). The audit still
  // records and removes the trial's leftovers.
  if (plan_.final_cleanup && !cut_) cleanup_step();
  finish_zygote();  // before the audit, which would find it left over
  audit();
  if (!gate_path_.empty())
    ::unlink(gate_path_.c_str());  // a trial that ended before its gate opened
  log_.emit({{"type", "trial"}, {"phase", "end"}, {"timed_out", timed_out_}});
  return 0;
}

}  // namespace supervision

namespace {

// The harness's own pid namespace and a pidfd of the harness, opened once:
// a supervisor is forked straight into a pid namespace of its own, and
// there its parent, outside, is not its getppid().
struct HarnessSelf {
  int pid_ns = ::open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0));
};

}  // namespace

pid_t start_supervisor(const TrialPlan& plan, const SupervisorConfig& cfg) {
  static const HarnessSelf self;
  static bool stuck = false;  // our children's pid namespace could not be put back
  if (stuck) {
    errno = EAGAIN;
    return -1;
  }
  const pid_t harness = ::getpid();
  // The trial's own pid namespace (with its own /proc, mounted by isolate()):
  // the supervisor is its init, so every process of the trial, however it
  // forked, is in its /proc for the orphan audit, and the kernel kills them
  // all when the supervisor exits or dies. unshare() only says where our
  // next child goes: we come back to our own namespace at once. (One fork
  // of this big process, not two: a process in between cost a fork and an
  // exit a trial.)
  const bool pid_ns = cfg.allow_mount_ns && self.pid_ns >= 0 && self.pidfd >= 0 &&
                      ::unshare(CLONE_NEWPID) == 0;
  pid_t pid = ::fork();
  if (pid != 0) {
    if (pid_ns && ::setns(self.pid_ns, CLONE_NEWPID) != 0) {
      // Every later child would be forked into that namespace, whose init
      // is this one: refuse it, and every later trial (a harness error
      // each; the run still ends with its reports).
      stuck = true;
      if (pid > 0) ::kill(pid, SIGKILL), ::waitpid(pid, nullptr, 0);
      errno = EAGAIN;
      return -1;
    }
    return pid;
  }
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (pid_ns) {
    // Our parent is outside our namespace (getppid() is 0 here): it is gone
    // if its pidfd says it exited.
    struct pollfd pfd {
      self.pidfd, POLLIN, 0
    };
    if (::poll(&pfd, 1, 0) != 0) ::_exit(3);
  } else if (::getppid() != harness) {
    ::_exit(3);
  }
  ::setpgid(0, 0);
  signal(SIGINT, SIG_IGN);  // the harness decides when a trial stops
  // As a pid namespace's init it takes only signals it handles (and SIGKILL,
  // SIGSTOP from outside): the harness ends a trial with SIGKILL.
  signal(SIGTERM, SIG_DFL);
  int rc = 3;
  try {
    rc = supervision::Supervisor(plan, cfg, pid_ns).run();
  } catch (...) {
    rc = 3;
  }
  ::_exit(rc);
}

}  // namespace harness
