// The trial supervisor's parts, shared by the files that hold its life:
// supervisor.cc (the life from start to end, and the process that runs it),
// supervisor_spawn.cc, supervisor_watch.cc, supervisor_faults.cc and
// supervisor_teardown.cc. Private to harness/: the API is supervisor.h.
//
// One Supervisor runs one trial, single-threaded, as init of the trial's pid
// namespace (when it has one): every process of the trial is its descendant,
// and every event it writes goes to the trial's history.jsonl.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
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
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <utility>

#include "cut.h"
#include "events.h"
#include "supervisor.h"
#include "zygote.h"

extern char** environ;

namespace harness::supervision {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr int kEventsFd = 3;

// Subjects write the history too, so what the supervisor reads of it while
// the trial runs (triggers, a replacement's round, a ghost's prefix) takes a
// field only when it has the protocol's type; anything else reads as absent.
// A malformed line never throws out of the trial: check_trial_dir reports it
// afterwards as a history error.
inline std::string str_of(const Json& e, const char* key) {
  auto it = e.find(key);
  return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
}
inline std::int64_t int_of(const Json& e, const char* key, std::int64_t def) {
  auto it = e.find(key);
  if (it == e.end()) return def;
  if (it->is_number_integer() && !it->is_number_unsigned()) return it->get<std::int64_t>();
  if (it->is_number_unsigned() &&
      it->get<std::uint64_t>() <=
          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return static_cast<std::int64_t>(it->get<std::uint64_t>());
  }
  return def;
}
// A trigger's value filter (Action::on_value): null matches every event;
// otherwise the event's `value` must be an object holding each key with an
// equal JSON value. A subject's odd `value` never matches, never throws.
inline bool value_matches(const Json& e, const Json& want) {
  if (want.is_null()) return true;
  auto it = e.find("value");
  if (it == e.end() || !it->is_object() || !want.is_object()) return false;
  for (const auto& [k, v] : want.items()) {
    auto got = it->find(k);
    if (got == it->end() || *got != v) return false;
  }
  return true;
}

// The text of /proc/<pid>/<name> (a small file: its first KB). False if the
// process is gone or the file cannot be read.
inline bool proc_file(pid_t pid, const char* name, char (&buf)[1024]) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/%s", static_cast<int>(pid), name);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  return true;
}

// /proc/<pid>/stat after the command's closing parenthesis (the command may
// hold spaces and parentheses itself), from the field after it, the state.
// False if the process is gone.
inline bool stat_fields(pid_t pid, std::string* out) {
  char buf[1024];
  if (!proc_file(pid, "stat", buf)) return false;
  const char* p = std::strrchr(buf, ')');
  if (!p || p[1] != ' ') return false;
  out->assign(p + 2);
  return true;
}

// /proc/<pid>/stat after the command: state, ppid, pgrp, the kernel's flags,
// the number of threads and (field 22) the start time in clock ticks. False
// if the process is gone.
struct ProcStat {
  char state = 0;
  int ppid = 0, pgrp = 0;
  unsigned long flags = 0;
  long threads = 0;
  std::uint64_t start = 0;
};
inline bool proc_stat(pid_t pid, ProcStat* out) {
  std::string f;
  if (!stat_fields(pid, &f)) return false;
  // state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
  // stime cutime cstime priority nice threads itrealvalue starttime
  unsigned long long start = 0;
  if (std::sscanf(f.c_str(),
                  "%c %d %d %*d %*d %*d %lu %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %ld %*d %llu",
                  &out->state, &out->ppid, &out->pgrp, &out->flags, &out->threads, &start) != 6) {
    return false;
  }
  out->start = start;
  return true;
}
inline bool proc_state(pid_t pid, char* state) {
  ProcStat ps;
  if (!proc_stat(pid, &ps)) return false;
  *state = ps.state;
  return true;
}

// Whether a process ended by `sig` died of the harness's doing: it sent a
// terminating signal (last_signal) and the process died of that one or of a
// SIGKILL (a tree kill, the heal).
inline bool ended_by_harness(bool killed_by_harness, int last_signal, int sig) {
  return killed_by_harness && (sig == SIGKILL || sig == last_signal);
}

// Whether the process runs still: it exists and is no zombie (dead, its
// parent not yet told).
inline bool running(pid_t pid) {
  char st = 0;
  return proc_state(pid, &st) && st != 'Z' && st != 'X';
}

// Whether the process, as `ps` read it, had not begun to exit: no zombie, and
// not PF_EXITING, which the kernel sets before it releases the process's
// locks, files and robust futexes. So whatever it held, it still held then.
inline bool not_exiting(const ProcStat& ps) {
  constexpr unsigned long kPfExiting = 0x4;  // include/linux/sched.h
  return ps.state != 'Z' && ps.state != 'X' && ps.state != 'x' && (ps.flags & kPfExiting) == 0;
}

// The system call a process's main thread is in, from /proc/<pid>/syscall,
// which names one only once the thread is off the CPU (sleeping, stopped, or
// preempted inside the call): nr -1 when it is running, in none, or gone.
struct BlockedIn {
  long nr = -1;
  long arg1 = 0;  // its second argument (a fcntl's command)
};
inline BlockedIn blocked_in_of(pid_t pid) {
  BlockedIn b;
  char buf[1024];
  // "NR ARG1 ARG2 ... SP PC", "-1 SP PC" outside any call, "running".
  long nr = -1;
  unsigned long arg1 = 0;
  if (proc_file(pid, "syscall", buf) && std::sscanf(buf, "%ld 0x%*x 0x%lx", &nr, &arg1) >= 1 &&
      nr >= 0) {
    b.nr = nr;
    b.arg1 = static_cast<long>(arg1);
  }
  return b;
}

// The wait status of a zombie that is not our child, as its parent's
// waitpid() would give it: /proc/<pid>/stat field 52 (exit_code). False if
// the process is not (or no longer) a zombie.
inline bool zombie_status(pid_t pid, int* wstatus) {
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
inline pid_t own_pid(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("NSpid:", 0) != 0) continue;
    auto last = line.find_last_of(" \t");
    if (last != std::string::npos) return static_cast<pid_t>(std::atoi(line.c_str() + last + 1));
  }
  return pid;
}

inline std::vector<pid_t> proc_pids() {
  std::vector<pid_t> out;
  if (DIR* d = ::opendir("/proc")) {
    while (auto* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (!n.empty() && n.find_first_not_of("0123456789") == std::string::npos)
        out.push_back(std::stoi(n));
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
  bool ok = false;  // kill(2) succeeded
};

// Adds a delivery's times to a fault event (docs/worker-protocol.md).
inline void add_delivery(Json& e, const Delivery& d) {
  e["t"] = d.before;
  e["sent_t"] = d.sent;
  e["effect"] = d.effect_name;
  e["lag_ns"] = (d.effect ? d.effect : d.sent) - d.before;
  if (d.effect) e["effect_t"] = d.effect;
}

struct Worker {
  int job = -1, rank = -1;
  bool launcher = false;  // the job's launcher (torchrun's agent), not a rank
  int last_signal = 0;    // the last terminating signal the harness sent it
  std::int64_t spawned_t =
      0;               // when it was started: its settings (rlimits, fiu, uid) hold from here
  pid_t self_pid = 0;  // its pid as it sees it (its container's), logged in events
  const WorkerPlan* plan = nullptr;  // null for the cleanup step
  bool alive = true;
  std::int64_t exited_t = 0;  // when it was reaped (alive false)
  bool killed_by_harness = false;
  bool teardown = false;
  bool stopped_by_harness = false;  // a SIGSTOP of ours is in effect
  int self_stops_seen = 0;          // times its OnStop has fired (up to OnStop::stops)
  // Its logged stops, [from, to): each covers the window the history shows
  // (from at or before its start event, to at or after its end event), so the
  // hang watcher leaves out at least what the checkers leave out of an op's
  // time. `to` is kStillStopped while it lasts.
  static constexpr std::int64_t kStillStopped = std::numeric_limits<std::int64_t>::max();
  std::vector<std::pair<std::int64_t, std::int64_t>> stops;
  void stop_began(std::int64_t t) {
    if (!stopped_now()) stops.emplace_back(t, kStillStopped);
  }
  void stop_ended(std::int64_t t) {
    if (stopped_now()) stops.back().second = t;
  }
  bool stopped_now() const { return !stops.empty() && stops.back().second == kStillStopped; }
  std::int64_t stopped_within(std::int64_t a, std::int64_t b) const {
    std::int64_t total = 0;
    for (const auto& [from, to] : stops)
      total += std::max<std::int64_t>(0, std::min(to, b) - std::max(from, a));
    return total;
  }
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
    pid_t pid;       // ours
    pid_t self_pid;  // as it sees itself
    std::string role;
    std::int64_t gone_t = 0;  // 0: still alive
  };
  std::vector<Member> members;
};

// A reader of history.jsonl as it grows: each call hands over the complete
// lines appended since the previous one (a line still being written waits for
// its end). Each reader has its own fd and offset. Reads, never writes.
class HistoryTail {
 public:
  HistoryTail() = default;
  HistoryTail(const HistoryTail&) = delete;
  HistoryTail& operator=(const HistoryTail&) = delete;
  ~HistoryTail();
  // Opens `history` the first time; calls `line` for each new complete line.
  void read(const std::string& history, const std::function<void(std::string_view)>& line);

 private:
  int fd_ = -1;
  std::string buf_;
};

// The ops each process of the trial has open, read from the history as it
// grows (a tail of its own, so it never disturbs the trigger follower), for
// the early end of a trial that can only hang (supervisor_hang.cc).
// Lives in the supervisor alone; reads the history, writes nothing.
class OpenOps {
 public:
  struct Open {
    std::string op;
    std::int64_t invoke_t = 0;
    std::int64_t cpu_wait_ns = -1;  // the process's at the invoke (-1: not reported)
    std::int64_t cpu_run_ns = -1;   // the same for its time on a CPU
  };
  // Reads what was appended since the last call (opens the file the first time).
  void update(const std::string& history);
  // By the pid the process logs (its own), then the op's id.
  const std::map<int, std::map<std::int64_t, Open>>& open() const { return open_; }

 private:
  HistoryTail tail_;
  std::map<int, std::map<std::int64_t, Open>> open_;
};

// Whether a native worker blocked as `b` says, with `threads` threads, has
// written every line it stamped: it waits in a call of the subject or the
// workload (a robust mutex or a futex word, a sleep, a file lock), none of
// which its logging makes, and has one thread (a second could be writing).
// Not read or poll: a worker preempted inside its read of schedstat, between
// a stamp and the write, shows that call too.
bool sleeps_between_lines(const BlockedIn& b, long threads);

class Supervisor {
 public:
  Supervisor(const TrialPlan& p, const SupervisorConfig& c, bool pid_ns)
      : plan_(p), cfg_(c), pid_ns_(pid_ns) {}
  int run();  // the trial's life, start to end (supervisor.cc)

 private:
  struct SpawnOptions {
    const WorkerPlan* w = nullptr;
    int events_fd = -1;   // default: the history
    bool native = false;  // the native worker even when the subject is external
    // A launcher: argv is `launcher... <the worker command> worker`.
    std::vector<std::string> launcher;
  };

  // Whether the history must be followed as it grows: the gate is closed,
  // an event may trigger an action, or processes of the trial announce
  // themselves (loader workers, launched ranks).
  bool following() const { return !gate_open_ || triggers_pending_ || tracks_processes_; }

  // Event-triggered actions: the history is tailed for the trigger, then the
  // action fires at_ns after it. Timed actions keep their plan order.
  struct Trigger {
    const Action* a;
    int seen = 0;
    std::int64_t fire_at = -1;
    bool done = false;
  };

  // Something to do at a time the plan could not fix in advance (the end of
  // a pause that began when a worker stopped itself, a lock's release).
  struct Timer {
    std::int64_t at;
    std::function<void()> fn;
    bool at_heal = false;  // also run if the trial ends first (a SIGCONT that closes a window)
  };

  void act(const Action& a) { act_all({&a}); }

  // supervisor_spawn.cc: the trial's world and the processes started in it
  // (namespaces, containers, the gate, workers, launchers).
  void own_network();
  void isolate();
  std::string shm_size() const;
  const std::map<std::string, std::string>& base_env();
  pid_t spawn(const std::map<std::string, std::string>& extra, const std::string& label);
  pid_t spawn(const std::map<std::string, std::string>& extra, const std::string& label,
              SpawnOptions o);
  struct Prepared;  // a process ready to start (supervisor_spawn.cc)
  std::unique_ptr<Prepared> prepare(const std::map<std::string, std::string>& extra,
                                    const std::string& label, const SpawnOptions& o);
  void ask(Prepared& p);
  pid_t launch(Prepared& p);
  struct WorkerStart {
    const WorkerPlan* w;
    const std::map<std::string, std::string>* env;
    std::string label;
  };
  std::vector<pid_t> start_workers(const std::vector<WorkerStart>& ws);
  void log_settings(int job, int rank, pid_t self_pid, std::int64_t t);
  pid_t start_worker(const WorkerPlan& w, const std::map<std::string, std::string>& env,
                     const std::string& label);
  pid_t start_launcher(const LauncherPlan& lp);
  void make_container(int id);
  void make_gate();
  void open_gate(const char* why);
  void note_ready(const Json& e);
  // The trial's connection to the run's zygote (zygote.h): made at the
  // first native worker it can start, closed before the audit.
  void start_zygote();
  void stop_zygote();
  void zygote_failed(const std::string& why);
  bool zygote_ready();
  void finish_zygote();
  bool wants_zygote();

  // supervisor_watch.cc: following the trial while it runs (reaping,
  // announced processes, the history, timers, the main loop).
  bool any_worker_alive() const;
  pid_t pid_of(int job, int rank) const;
  void launcher_gone(pid_t pid, const Worker& w);
  void watch_teardowns();
  void log_teardowns();
  pid_t self_pid_of(pid_t pid) const;
  pid_t target_of(const Action& a) const;
  pid_t pid_started(int job, int rank) const;
  void reap();
  void wait_chld(std::int64_t until);
  void note_process(const Json& e);
  pid_t resolve_pid(int job, pid_t self) const;
  bool rank_gone(const Tracked& t) const;
  Json tracked_exit_event(const Tracked& t, int wstatus);
  void tracked_gone(Tracked& t, int wstatus);
  void poll_tracked();
  std::vector<Json> tail_history();
  void follow_history(std::vector<Trigger>& triggers);
  void drop_history_watch();
  void run_timers();
  void main_loop();

  // supervisor_hang.cc: ends a trial that can only hang, at the moment every
  // live worker's open op is past SupervisorConfig::hang_after_ns, not at the
  // trial timeout. "" or why it hangs.
  std::string hangs(std::int64_t now, bool nothing_planned_left);
  // Whether this trial may still end early at all (hangs() looks only then;
  // main_loop wakes for its looks only then).
  bool watches_hangs() const;

  // supervisor_cut.cc: under --stop-on-violation, ends a trial whose record
  // is already invalid up to a point every writer has passed (harness/cut.h),
  // and marks that point in the history. `settled`: the gate is open and
  // every setting logged (their lines carry a worker's start time, not the
  // time they are written). True: the trial ended at a cut.
  bool cuts(std::int64_t now, bool settled);
  bool watches_cuts() const;
  // No launcher and no container: every pid a worker logs is one of the
  // processes we started, as our pid namespace names it. The early ends and
  // the CPU looks need that to map a logged pid to a process.
  bool pids_are_ours() const;

  // supervisor_spin.cc: what a running worker's CPU shows. spins() logs a
  // look at the CPU of an op that spun (ops.no-spin's evidence, which a
  // process that writes nothing more cannot give). look_at_silent() and
  // quiet_until() tell how far a live worker that has written nothing for a
  // while is known to have written every line it stamped, for cuts().
  void spins(std::int64_t now);
  bool watches_spins() const;
  void look_at_silent(std::int64_t now);
  std::map<int, std::int64_t> quiet_until();

  // supervisor_faults.cc: delivering faults (signals and their observed
  // effect, pauses, reused pids, ghosts, seeded state, held locks).
  static Delivery send(pid_t pid, int sig, bool tree);
  static const char* effect_of(pid_t pid, int sig);
  static void observe(const std::vector<std::pair<pid_t, int>>& targets,
                      const std::vector<Delivery*>& ds);
  static Delivery send_and_observe(pid_t pid, int sig, bool tree);
  static Json group_members(pid_t pgid);
  void act_all(const std::vector<const Action*>& due);
  int first_round_after(pid_t self_pid, int job, int rank);
  void self_stopped(pid_t pid, Worker& w);
  void reuse_pid(pid_t pid, std::uint64_t old_start, Json event);
  void run_ghost(const Ghost& g);
  void seed();
  void end_seeded(const std::string& kind, Json detail, std::int64_t t);
  void release_helper(pid_t h);

  // supervisor_teardown.cc: the trial's end (heal, teardown, the cleanup
  // step, the audit of what is left).
  void heal_and_teardown();
  void reap_until(const std::function<bool()>& done, std::int64_t until);
  void reap_until_workers_gone(std::int64_t until);
  void cleanup_step();
  static std::map<std::string, ino_t> shm_entries();
  bool is_container_init(pid_t p) const;
  std::vector<pid_t> descendants() const;
  static int foreign_owner(const std::string& path);
  void cap_logs(bool final);
  void audit();

  const TrialPlan& plan_;
  const SupervisorConfig& cfg_;
  const bool pid_ns_;  // we are init of the trial's own pid namespace
  EventLog log_;
  std::string trial_dir_;  // absolute: a container's worker starts elsewhere
  std::string isolation_, root_, lock_dir_;
  std::string proc_error_;  // set if the trial's pid namespace has no /proc of its own
  std::map<pid_t, Worker> workers_;
  std::map<std::string, ino_t> shared_before_;  // name-root: the shared /dev/shm as the trial began
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
  std::vector<pid_t> helpers_;          // fault helpers holding lock files or reused pids
  std::set<std::string> lock_subdirs_;  // lock dirs made for misconfigured ranks
  std::map<int, Container> containers_;
  std::deque<WorkerPlan> replacements_;  // plans of replacement workers (stable addresses)
  std::vector<Timer> timers_;
  int self_pid_ns_fd_ = -1;
  int zygote_fd_ = -1;         // our connection to the zygote; -1: none, every worker is exec'd
  pid_t zygote_pid_ = -1;      // the trial's zygote, once it said hello
  int zygote_pidfd_ = -1;      // the same, however its pid is reaped meanwhile
  bool zygote_lost_ = false;   // it said hello and then failed the trial (zygote_failed)
  std::deque<zygote::Reply> drained_;  // what it answered before it died, for launch() in order
  bool zygote_tried_ = false;  // once per trial: a zygote that failed is not asked again
  int ghost_count_ = 0;
  HistoryTail tail_;                         // reading history.jsonl for event triggers
  std::map<pid_t, Tracked> tracked_;         // processes of the trial we did not start, by our pid
  std::set<const Action*> settings_logged_;  // settings faults logged at their worker's start
  std::string gate_path_;                    // the start gate's FIFO ("" without one)
  int gate_fd_ = -1;                         // its only writer, closed to open it
  bool gate_open_ = false;
  std::int64_t gate_t_ = 0;
  std::set<std::pair<int, int>> awaiting_;  // (job, rank) not yet at the gate
  std::vector<Timer> gate_timers_;          // timers placed relative to the gate's opening
  bool triggers_pending_ = false;
  bool tracks_processes_ = false;  // loader workers or launched ranks announce themselves
  int sig_fd_ = -1, inotify_fd_ = -1;
  // The watch on history.jsonl, dropped as soon as the history needs no more
  // following (see drop_history_watch): -1 once dropped.
  int history_watch_ = -1;
  std::vector<Teardown> teardowns_;  // launchers that ended, and their jobs' survivors
  std::vector<std::pair<std::string, Json>>
      seeded_;  // open seed fault windows (kind "" once closed)
  std::int64_t start_ = 0;
  std::int64_t prev_look_wait_ = -1;  // our cpu_wait_ns() when the previous reap() began
  bool timed_out_ = false;
  OpenOps open_ops_;
  std::int64_t next_hang_look_ = 0;
  HistoryTail cut_tail_;  // reading history.jsonl for cuts()
  CutPoint cut_point_;
  std::int64_t next_cut_look_ = 0;
  std::int64_t last_cut_ = 0;           // the latest cut judged (valid) so far
  std::int64_t next_spin_look_ = 0;
  std::set<std::pair<int, std::int64_t>>
      spin_logged_;  // (self pid, op id) of each `cpu` event written
  // Per live worker (our pid): looks at its CPU while it wrote nothing, each
  // (the time before the read, its run_ns), oldest first.
  std::map<pid_t, std::deque<std::pair<std::int64_t, std::int64_t>>> silent_looks_;
  // Per worker (our pid): the latest look that began before it was seen
  // blocked in a wait its logging never makes (supervisor_spin.cc).
  std::map<pid_t, std::int64_t> blocked_quiet_;
  // Per worker (our pid): the t of the last `alive` line written for it.
  std::map<pid_t, std::int64_t> alive_said_;
  bool cut_ = false;  // the trial ended at a cut: its workers are torn down
  bool healing_ = false;
  bool first_stop_taken_ = false;  // a first_of_trial OnStop has fired  // the trial is over:
                                   // pauses end in SIGCONT, nothing new starts
  pid_t cleanup_pid_ = -1;
  bool cleanup_done_ = false;
};

}  // namespace harness::supervision
