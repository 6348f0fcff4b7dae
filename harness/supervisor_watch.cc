// Following the trial while it runs: reaping its processes (and those it
// learns of from their own events), tailing the history for triggers and
// announcements, timers, and the main loop that drives them.
#include "supervisor_internal.h"

namespace harness::supervision {

// The trial goes on while any process it follows lives: its workers, and
// the loader workers and launched ranks it learned of (a rank orphaned by
// its launcher's death still runs its workload).
bool Supervisor::any_worker_alive() const {
  for (const auto& [pid, w] : workers_) {
    if (w.alive) return true;
  }
  for (const auto& [pid, t] : tracked_) {
    if (t.alive) return true;
  }
  return false;
}

pid_t Supervisor::pid_of(int job, int rank) const {
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
void Supervisor::launcher_gone(pid_t pid, const Worker& w) {
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
void Supervisor::watch_teardowns() {
  for (auto& td : teardowns_) {
    for (auto& m : td.members) {
      if (m.gone_t == 0 && !running(m.pid)) m.gone_t = mono_ns();
    }
  }
}

void Supervisor::log_teardowns() {
  watch_teardowns();
  for (const auto& td : teardowns_) {
    Json members = Json::array();
    for (const auto& m : td.members) {
      Json x = {{"pid", m.self_pid}, {"role", m.role}};
      if (m.gone_t) x["gone_t"] = m.gone_t;
      members.push_back(std::move(x));
    }
    log_.emit({{"type", "teardown"},
               {"job", td.job},
               {"launcher_pid", td.launcher_self},
               {"t", td.t},
               {"bound_ms", td.bound_ns / 1000000},
               {"members", members}});
  }
  teardowns_.clear();
}

pid_t Supervisor::self_pid_of(pid_t pid) const {
  if (auto t = tracked_.find(pid); t != tracked_.end()) return t->second.self_pid;
  if (auto w = workers_.find(pid); w != workers_.end()) return w->second.self_pid;
  return pid;
}

// Whom an action aims at: a rank, one of its loader workers, or the job's launcher.
pid_t Supervisor::target_of(const Action& a) const {
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
pid_t Supervisor::pid_started(int job, int rank) const {
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
void Supervisor::reap() {
  // The supervisor's own wait for a CPU before this look: a process that
  // exits after it is reaped with at most what the supervisor waits from
  // here on counted in its exit's lateness (reaper_wait_ns).
  const std::int64_t look_wait = cpu_wait_ns();
  for (;;) {
    // Peek first (WNOWAIT): an exited worker is still a zombie, whose
    // final CPU wait (cpu_wait_ns) is readable until it is reaped.
    siginfo_t si{};
    if (::waitid(P_ALL, 0, &si, WEXITED | WSTOPPED | WNOHANG | WNOWAIT) != 0 || si.si_pid <= 0)
      break;
    const pid_t peeked = si.si_pid;
    const bool exited =
        si.si_code == CLD_EXITED || si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED;
    const std::int64_t final_wait =
        exited && workers_.contains(peeked) ? cpu_wait_ns_of(peeked) : -1;
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
      if (w.plan && w.plan->on_stop && w.self_stops_seen < w.plan->on_stop->stops &&
          !w.stopped_by_harness)
        self_stopped(pid, w);
      continue;
    }
    w.alive = false;
    w.exited_t = mono_ns();
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
    if (mine >= 0 && prev_look_wait_ >= 0 && mine >= prev_look_wait_)
      e["reaper_wait_ns"] = mine - prev_look_wait_;
    e["t"] = mono_ns();
    log_.emit(std::move(e));
  }
  prev_look_wait_ = look_wait;
}

// Sleeps until `until` (at most 50 ms) or until something happens: a child
// changed state (SIGCHLD, through a signalfd), a tracked process exited
// (its pidfd), or a line was appended to the history (inotify, while the
// supervisor follows it).
void Supervisor::wait_chld(std::int64_t until) {
  std::int64_t left = until - mono_ns();
  if (left <= 0) return;
  left = std::min<std::int64_t>(left, 50'000'000);
  if (sig_fd_ < 0) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sig_fd_ = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sig_fd_ < 0) {
      struct timespec ts {
        static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)
      };
      ::sigtimedwait(&set, nullptr, &ts);
      return;
    }
  }
  std::vector<struct pollfd> fds{{sig_fd_, POLLIN, 0}};
  if (following() && inotify_fd_ >= 0) fds.push_back({inotify_fd_, POLLIN, 0});
  for (const auto& [pid, t] : tracked_) {
    if (t.alive && t.pidfd >= 0) fds.push_back({t.pidfd, POLLIN, 0});
  }
  struct timespec ts {
    static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)
  };
  if (::ppoll(fds.data(), fds.size(), &ts, nullptr) <= 0) return;
  char drain[4096];
  while (::read(sig_fd_, drain, sizeof drain) > 0) {
  }
  if (inotify_fd_ >= 0) {
    while (::read(inotify_fd_, drain, sizeof drain) > 0) {
    }
  }
}

// A process that announced itself: a loader worker, or a rank its launcher started.
void Supervisor::note_process(const Json& e) {
  if (str_of(e, "type") != "start") return;
  const int job = static_cast<int>(int_of(e, "job", -1)),
            rank = static_cast<int>(int_of(e, "rank", -1));
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
pid_t Supervisor::resolve_pid(int job, pid_t self) const {
  int box = -1;
  for (const auto& w : plan_.workers) {
    if (w.job == job) box = w.container;
  }
  if (box < 0) return self;
  auto it = containers_.find(box);
  if (it == containers_.end() || it->second.init <= 0) return -1;
  struct stat theirs {};
  if (::stat(("/proc/" + std::to_string(it->second.init) + "/ns/pid").c_str(), &theirs) != 0)
    return -1;
  for (pid_t p : proc_pids()) {
    struct stat ns {};
    if (own_pid(p) == self &&
        ::stat(("/proc/" + std::to_string(p) + "/ns/pid").c_str(), &ns) == 0 &&
        ns.st_ino == theirs.st_ino) {
      return p;
    }
  }
  return -1;
}

// Whether the rank that forked a loader worker is gone (dead or a zombie):
// its loader workers die with it (PR_SET_PDEATHSIG, or DataLoader's watchdog).
bool Supervisor::rank_gone(const Tracked& t) const {
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

Json Supervisor::tracked_exit_event(const Tracked& t, int wstatus) {
  Json e = {
      {"type", "exit"}, {"job", t.job}, {"rank", t.rank}, {"pid", t.self_pid}, {"role", t.role}};
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
    if (!e["by_harness"].get<bool>() && t.worker < 0 && t.role == "rank" &&
        launcher_of(plan_, t.job) &&
        (WTERMSIG(wstatus) == SIGTERM || WTERMSIG(wstatus) == SIGKILL)) {
      e["by_launcher"] = true;
    }
  }
  e["t"] = mono_ns();
  return e;
}

void Supervisor::tracked_gone(Tracked& t, int wstatus) {
  if (!t.alive) return;
  t.alive = false;
  if (t.pidfd >= 0) ::close(t.pidfd);
  t.pidfd = -1;
  log_.emit(tracked_exit_event(t, wstatus));
}

// Tracked processes whose pidfd says they exited: their status from the
// zombie, while their parent has not reaped it.
void Supervisor::poll_tracked() {
  for (auto& [pid, t] : tracked_) {
    if (!t.alive || t.pidfd < 0) continue;
    struct pollfd pfd {
      t.pidfd, POLLIN, 0
    };
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

// New complete lines of the history since the last call.
HistoryTail::~HistoryTail() {
  if (fd_ >= 0) ::close(fd_);
}

void HistoryTail::read(const std::string& history, const std::function<void(std::string_view)>& line) {
  if (fd_ < 0) fd_ = ::open(history.c_str(), O_RDONLY | O_CLOEXEC);
  char chunk[65536];
  ssize_t n;
  while (fd_ >= 0 && (n = ::read(fd_, chunk, sizeof chunk)) > 0) buf_.append(chunk, static_cast<std::size_t>(n));
  std::size_t from = 0, nl;
  while ((nl = buf_.find('\n', from)) != std::string::npos) {
    line(std::string_view(buf_).substr(from, nl - from));
    from = nl + 1;
  }
  buf_.erase(0, from);
}

std::vector<Json> Supervisor::tail_history() {
  std::vector<Json> out;
  tail_.read(trial_dir_ + "/history.jsonl", [&](std::string_view line) {
    auto e = Json::parse(line, nullptr, false);
    if (e.is_object()) out.push_back(std::move(e));
  });
  return out;
}

// The kernel frees an inotify watch only after an SRCU grace period (7-10 ms
// here), and a process whose exit closes the last fd of an inotify instance
// still holding a watch waits that long inside exit_group: the harness sees
// the trial end that much later. Dropped as soon as it is not needed, the
// watch is freed in the background while the trial runs on and tears down.
void Supervisor::drop_history_watch() {
  if (inotify_fd_ < 0 || history_watch_ < 0) return;
  ::inotify_rm_watch(inotify_fd_, history_watch_);
  history_watch_ = -1;
}

// Reads what was appended to the history since the last look: readiness
// for the gate, processes that announce themselves, and triggers.
void Supervisor::follow_history(std::vector<Trigger>& triggers) {
  triggers_pending_ = false;
  for (const auto& t : triggers) triggers_pending_ |= !t.done;
  if (!following()) {  // for good: the gate stays open, done triggers stay done
    drop_history_watch();
    return;
  }
  for (const Json& e : tail_history()) {
    note_ready(e);
    note_process(e);
    for (auto& t : triggers) {
      if (t.done || t.fire_at >= 0) continue;
      const Action& a = *t.a;
      if (str_of(e, "type") != a.on_type || int_of(e, "job", -2) != a.on_job ||
          int_of(e, "rank", -2) != a.on_rank)
        continue;
      if (int_of(e, "worker", -1) != a.on_worker) continue;
      if (str_of(e, "op") != a.on_op && str_of(e, "name") != a.on_op) continue;
      if (!value_matches(e, a.on_value)) continue;
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

void Supervisor::run_timers() {
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

void Supervisor::main_loop() {
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
  // The gate is open and every setting logged (their lines carry a worker's
  // start time, not the time they are written): a cut may be judged.
  auto settled = [&] {
    return gate_open_ && std::none_of(timed.begin() + static_cast<std::ptrdiff_t>(next),
                                      timed.end(), [](const Action* a) { return a->at_ns == 0; });
  };
  while (true) {
    reap();
    poll_tracked();
    watch_teardowns();
    run_timers();
    cap_logs(false);
    if (!any_worker_alive()) {
      if (!gate_open_) {
        open_gate("no-workers");
      } else if (settled()) {
        // Every worker's last line is in: one last look, whatever the pace,
        // so a trial whose violation shows as its workers end is not kept
        // for a cleanup step that the same flaw may hang.
        next_cut_look_ = 0;
        cuts(mono_ns(), true);
      }
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
        if (const int job = w.job; w.launcher)
          std::erase_if(awaiting_, [job](const auto& k) { return k.first == job; });
      }
      if (awaiting_.empty()) {
        open_gate("all-ready");
      } else if (now >= gate_deadline) {
        open_gate("deadline");
      }
    }
    std::vector<const Action*> due;
    while (gate_open_ && next < timed.size() && gate_t_ + timed[next]->at_ns <= now)
      due.push_back(timed[next++]);
    if (!due.empty()) act_all(due);
    bool nothing_left = gate_open_ && next >= timed.size() && timers_.empty();
    for (const auto& t : triggers) nothing_left = nothing_left && t.done;
    if (std::string why = hangs(now, nothing_left); !why.empty()) {
      timed_out_ = true;  // as at the timeout: what is open is judged a hang
      log_.emit({{"type", "trial"}, {"phase", "timeout"}, {"timed_out", true}, {"hung", why}});
      return;
    }
    spins(now);
    const bool settled_now = settled();
    if (cuts(now, settled_now)) return;  // ends as at its end: nothing open is judged a hang
    if (now >= deadline) {
      timed_out_ = true;
      log_.emit({{"type", "trial"}, {"phase", "timeout"}, {"timed_out", true}});
      return;
    }
    std::int64_t wake = deadline;
    if (!gate_open_) wake = std::min(wake, gate_deadline);
    if (gate_open_ && next < timed.size()) wake = std::min(wake, gate_t_ + timed[next]->at_ns);
    for (const auto& t : timers_) wake = std::min(wake, t.at);
    if (nothing_left && watches_hangs()) wake = std::min(wake, std::max(next_hang_look_, now + 1'000'000));
    if (settled_now && watches_cuts())
      wake = std::min(wake, std::max(next_cut_look_, now + 1'000'000));
    if (watches_spins()) wake = std::min(wake, std::max(next_spin_look_, now + 1'000'000));
    for (const auto& t : triggers) {
      if (!t.done && t.fire_at >= 0) wake = std::min(wake, t.fire_at);
    }
    // Without inotify the history is tailed every millisecond while followed.
    if (following() && (inotify_fd_ < 0 || history_watch_ < 0))
      wake = std::min(wake, mono_ns() + 1'000'000);
    wait_chld(wake);
  }
}

}  // namespace harness::supervision
