// Delivering the plan's faults: signals and their observed effect, pauses
// that begin when a worker stops itself, reused pids, ghost jobs, seeded
// shared-memory state, and helpers holding locks.
#include "lock_holder.h"
#include "supervisor_internal.h"

namespace harness::supervision {

// Sends `sig` to the worker (or its whole process group: its tree).
Delivery Supervisor::send(pid_t pid, int sig, bool tree) {
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
const char* Supervisor::effect_of(pid_t pid, int sig) {
  char st = 0;
  bool present = proc_state(pid, &st);
  if (sig == SIGKILL && (!present || st == 'Z' || st == 'X')) return "exited";
  if (sig == SIGSTOP && present && (st == 'T' || st == 't')) return "stopped";
  if (sig == SIGCONT && present && st != 'T' && st != 't') return "continued";
  // Stopped again already (a worker stopping itself at its next pass, within
  // microseconds): a new stop waits to be reaped, the last one was, so it ran
  // in between. Without this look the watch would spin its 100 ms, blind to
  // the new stop meanwhile.
  siginfo_t si{};
  if (sig == SIGCONT && present &&
      ::waitid(P_PID, static_cast<id_t>(pid), &si, WSTOPPED | WNOHANG | WNOWAIT) == 0 &&
      si.si_pid == pid && si.si_code == CLD_STOPPED)
    return "continued";
  return nullptr;
}

// Watches each delivery for its effect, for at most 100 ms in all.
void Supervisor::observe(const std::vector<std::pair<pid_t, int>>& targets,
                         const std::vector<Delivery*>& ds) {
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
      struct timespec ts {
        0, 50'000
      };
      ::nanosleep(&ts, nullptr);
    } else {
      ::sched_yield();
    }
  }
}

Delivery Supervisor::send_and_observe(pid_t pid, int sig, bool tree) {
  Delivery d = send(pid, sig, tree);
  observe({{pid, sig}}, {&d});
  return d;
}

// The members of a process group (the worker's tree), zombies included.
Json Supervisor::group_members(pid_t pgid) {
  Json out = Json::array();
  for (pid_t p : proc_pids()) {
    ProcStat ps;
    if (proc_stat(p, &ps) && ps.pgrp == pgid) out.push_back(p);
  }
  return out;
}

// Carries out actions due at the same moment: every signal is sent first,
// then their effects are watched, then each is logged, so "together" means
// within microseconds, not one delivery check apart.
void Supervisor::act_all(const std::vector<const Action*>& due) {
  const std::int64_t began = mono_ns();  // before any stop's logged start
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
      log_.emit({{"type", "fault"},
                 {"kind", a.fault},
                 {"phase", a.phase},
                 {"job", -1},
                 {"rank", -1},
                 {"detail", a.detail}});
      continue;
    }
    if (a.signal == 0) {  // a setting the worker started with (emfile, fiu-errno, ...): log it
      if (settings_logged_.contains(&a)) continue;  // logged as the worker started
      const pid_t started = pid_started(a.job, a.rank);
      if (started <= 0) continue;  // never started: nothing happened, nothing to log
      // In force from the worker's start, whenever the supervisor gets to log it.
      log_.emit({{"type", "fault"},
                 {"kind", a.fault},
                 {"phase", a.phase},
                 {"job", a.job},
                 {"rank", a.rank},
                 {"pid", workers_[started].self_pid},
                 {"signal", 0},
                 {"detail", a.detail},
                 {"t", workers_[started].spawned_t}});
      continue;
    }
    pid_t pid = target_of(a);
    if (pid <= 0) continue;       // the target already exited: nothing happened, nothing to log
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
    const int sig = sent[i].a->signal;
    if (sig != SIGKILL && sig != SIGTERM && sig != SIGINT) continue;
    // Every member got the signal from us (a terminal's Ctrl-C reaches the
    // launched ranks and loader workers directly, not through their parent):
    // one that dies of it died of the fault.
    for (const Json& m : trees[i]) {
      if (auto t = tracked_.find(m.get<pid_t>()); t != tracked_.end()) {
        t->second.killed_by_harness = true;
        if (sig != SIGKILL) t->second.last_signal = sig;
      }
    }
  }
  observe(targets, ds);
  for (std::size_t i = 0; i < sent.size(); ++i) {
    const Action& a = *sent[i].a;
    const Delivery& d = sent[i].d;
    if (!d.ok) continue;
    Json e = {{"type", "fault"},    {"kind", a.fault},   {"phase", a.phase},
              {"job", a.job},       {"rank", a.rank},    {"pid", self_pid_of(sent[i].pid)},
              {"signal", a.signal}, {"detail", a.detail}};
    if (a.worker >= 0) e["worker"] = a.worker;
    if (a.launcher) e["launcher"] = true;
    add_delivery(e, d);
    if (a.tree) {
      e["tree"] = true;
      e["tree_pids"] = trees[i];
    }
    log_.emit(std::move(e));
    if (auto w = workers_.find(sent[i].pid); w != workers_.end()) {
      if (a.signal == SIGSTOP) w->second.stop_began(began);
      if (a.signal == SIGCONT) w->second.stop_ended(mono_ns());  // after its end event
    }
  }
}

// The first round a replacement of (job, rank) runs: the one after the last
// round the dead worker entered (it had arrived there), from the history.
int Supervisor::first_round_after(pid_t self_pid, int job, int rank) {
  std::ifstream f(trial_dir_ + "/history.jsonl");
  std::string line;
  int last = -1;
  while (std::getline(f, line)) {
    auto e = Json::parse(line, nullptr, false);
    if (!e.is_object() || str_of(e, "type") != "invoke" || str_of(e, "op") != "barrier") continue;
    if (int_of(e, "job", -2) != job || int_of(e, "rank", -2) != rank ||
        int_of(e, "pid", -2) != self_pid)
      continue;
    const Json args = e.contains("args") ? e["args"] : Json::object();
    if (args.is_object() && args.contains("round") && args["round"].is_number_integer()) {
      last = std::max(last, args["round"].get<int>());
    }
  }
  return last + 1;
}

// A worker stopped itself at its failpoint (WorkerPlan::OnStop).
void Supervisor::self_stopped(pid_t pid, Worker& w) {
  const std::int64_t seen = mono_ns();
  ++w.self_stops_seen;
  const WorkerPlan::OnStop& os = *w.plan->on_stop;
  if (os.first_of_trial && first_stop_taken_) {  // another worker was first: not the fault
    ::kill(pid, SIGCONT);
    return;
  }
  if (os.first_of_trial) first_stop_taken_ = true;
  Json start = {{"type", "fault"},
                {"kind", os.fault},
                {"phase", "start"},
                {"job", w.job},
                {"rank", w.rank},
                {"pid", w.self_pid},
                {"signal", SIGSTOP},
                {"detail", os.detail},
                // It stopped itself at or before t (the supervisor saw the stop at t).
                {"t", seen},
                {"effect", "stopped"},
                {"effect_t", seen},
                {"self", true}};
  log_.emit(start);
  w.stop_began(seen);
  // The window ends in a SIGCONT also when the trial ends first.
  timers_.push_back(
      {seen + os.hold_ns,
       [this, pid, os, &heal = healing_] {
         auto it = workers_.find(pid);
         if (it == workers_.end() || !it->second.alive) return;
         Worker& v = it->second;
         Json end = {{"type", "fault"}, {"kind", os.fault},  {"phase", "end"},     {"job", v.job},
                     {"rank", v.rank},  {"pid", v.self_pid}, {"detail", os.detail}};
         if (os.then == "continue" || heal) {
           Delivery d = send_and_observe(pid, SIGCONT, false);
           end["signal"] = SIGCONT;
           add_delivery(end, d);
           log_.emit(std::move(end));
           v.stop_ended(mono_ns());
           return;
         }
         if (os.then == "kill") {
           // A crash at the point, as SHMCOORD_CRASH_AT would: the process
           // alone dies there; its resource tracker and children live on.
           v.killed_by_harness = true;
           Delivery d = send_and_observe(pid, SIGKILL, false);
           end["signal"] = SIGKILL;
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
           pid_t fresh = start_worker(
               replacements_.back(), env,
               worker_label(job, rank) + "-replacement");
           end["detail"]["replacement_pid"] = fresh > 0 ? workers_[fresh].self_pid : -1;
           end["detail"]["first_round"] = first;
           log_.emit(std::move(end));
           return;
         }
         reap();
         reuse_pid(pid, before.start, std::move(end));
       },
       true});
}

// After `pid` died (a zombie or reaped): give its number to a new, unrelated
// process whose start time differs, which lives until the heal (ours, via
// ns_last_pid; or any process of the trial that happened to fork into the
// freed number first - an unrelated live process with another start time
// just the same). Logs `event` (the kill), then the reused-pid window; if
// neither works out, the kill's detail says so (`reused: false`).
void Supervisor::reuse_pid(pid_t pid, std::uint64_t old_start, Json event) {
  // Its number is free only once it is reaped and so is every member of
  // the process group it led (its tracker, killed with it: a zombie still
  // holds the group's number). At most 2 s: they were all SIGKILLed.
  const std::int64_t until = mono_ns() + 2'000'000'000LL;
  for (;;) {
    reap();
    ProcStat ps;
    if ((!proc_stat(pid, &ps) && group_members(pid).empty()) || mono_ns() >= until) break;
    struct timespec ts {
      0, 200'000
    };
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
    why = r == pid ? "the new process started in the same clock tick"
                   : "another process took the pid";
    // Same clock tick as the dead one: its start time would match. Wait for
    // the tick (10 ms at USER_HZ 100) to pass; the clock is what we wait for.
    if (r == pid) {
      struct timespec ts {
        0, 11'000'000
      };
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
  Json window = {{"type", "fault"}, {"kind", "reused-pid"}, {"phase", "start"},
                 {"job", -1},       {"rank", -1},           {"detail", detail}};
  window["detail"]["holder_pid"] = pid;
  log_.emit(std::move(event));  // the kill
  log_.emit(window);            // the pid's new life, until the heal
  seeded_.push_back({"reused-pid", window["detail"]});
}

// A ghost (Ghost in plan.h): a native worker outside the scenario's jobs
// writes the subject's records and stops itself at its failpoint; its tree
// is killed and its pid reused before the scenario's workers start.
void Supervisor::run_ghost(const Ghost& g) {
  if (!pid_ns_) {
    log_.emit({{"type", "harness-error"},
               {"message", "reused-pid needs the trial's own pid namespace (run as root)"}});
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
    log_.emit({{"type", "harness-error"},
               {"message",
                "reused-pid: " + label + " never reached its failpoint (see " + events + ")"}});
    return;
  }
  ProcStat before;
  proc_stat(pid, &before);
  Json tree = group_members(pid);
  Delivery d = send_and_observe(pid, SIGKILL, true);
  Json kill = {{"type", "fault"},   {"kind", "reused-pid"}, {"phase", "instant"},
               {"job", -1},         {"rank", -1},           {"pid", pid},
               {"signal", SIGKILL}, {"tree", true},         {"tree_pids", tree}};
  add_delivery(kill, d);
  kill["detail"] = g.worker.on_stop ? g.worker.on_stop->detail : Json::object();
  // What the ghost holds, from its own events: the prefix it was granted.
  std::ifstream f(events);
  std::string line;
  while (std::getline(f, line)) {
    auto e = Json::parse(line, nullptr, false);
    if (e.is_object() && str_of(e, "type") == "ok" && str_of(e, "op") == "acquire" &&
        e.contains("value") && e["value"].is_object()) {
      kill["detail"]["prefix"] = int_of(e["value"], "prefix", -1);
    }
  }
  kill["detail"]["ghost"] = label;
  reuse_pid(pid, before.start, std::move(kill));
}

// The trial's seeded files and the helpers that hold lock files, each a
// fault window from now until the heal (or the seed's release time).
void Supervisor::seed() {
  for (const Seed& sd : plan_.seeds) {
    std::string path =
        sd.where == "lock" ? lock_dir_ + "/" + root_ + sd.name : "/dev/shm/" + root_ + sd.name;
    std::string logged = sd.where == "lock" ? path : "/" + root_ + sd.name;
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
      log_.emit({{"type", "harness-error"},
                 {"message", "cannot seed " + path + ": " + std::strerror(errno)}});
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
        log_.emit({{"type", "harness-error"},
                   {"message", "cannot hold the lock " + path + ": it is held already"}});
        continue;
      }
      helpers_.push_back(holder);
      detail["held_by"] = sd.held_by;
      detail["holder_pid"] = holder;
      detail["protect"] = true;  // no cleanup may remove it while it is held
    }
    log_.emit({{"type", "fault"},
               {"kind", sd.fault},
               {"phase", "start"},
               {"job", -1},
               {"rank", -1},
               {"detail", detail}});
    seeded_.push_back({sd.fault, detail});
    if (holder > 0 && sd.release_at_ns >= 0) {
      const std::size_t index = seeded_.size() - 1;
      gate_timers_.push_back({sd.release_at_ns, [this, holder, index] {
                                // The window ends when the lock may first be free: before the kill
                                // (a cleanup blocked on it may take it before we log).
                                const std::int64_t before = mono_ns();
                                release_helper(holder);
                                auto& [kind, d] = seeded_[index];
                                end_seeded(kind, d, before);
                                kind.clear();  // closed: the heal does not close it again
                              }});
    }
  }
}

// Closes a seeded fault's window at t: what it protected (a held lock, a
// live owner's name) is no longer protected from there.
void Supervisor::end_seeded(const std::string& kind, Json detail, std::int64_t t) {
  if (detail.is_object() && detail.contains("protect")) detail["protect"] = false;
  log_.emit({{"type", "fault"},
             {"kind", kind},
             {"phase", "end"},
             {"job", -1},
             {"rank", -1},
             {"detail", detail},
             {"t", t}});
}

// Kills a lock-holding helper and waits until it is dead (its lock with it).
void Supervisor::release_helper(pid_t h) {
  ::kill(h, SIGKILL);
  ::kill(h, SIGCONT);
  while (::waitpid(h, nullptr, 0) < 0 && errno == EINTR) {
  }
  std::erase(helpers_, h);
}

}  // namespace harness::supervision
