// What a running worker shows: its CPU, the call it waits in, that it lives.
//
// An op that spins (a wait that retries without sleeping) writes nothing
// while it spins, so the history cannot show it until the op ends, which may
// be never: on a loaded machine such an op is not even late by the deadline
// rules, which do not count what it waited for a CPU. The kernel counts what
// it ran (schedstat's run_ns, the worker's cpu_run_ns at the invoke): the
// supervisor compares the two, and once the op spun by ops.no-spin's rule
// (harness::spun), logs its look as a `cpu` event, the evidence the checker
// judges.
//
// A silent worker also holds every cut back to its last line (cut.h: it may
// have stamped a line it has not written yet). But the native worker spends
// at most kEmitCpuNs of CPU between stamping a line and writing it, so once
// it has run more than that since a look at time B,
// while its history shows nothing new, it has no line stamped before B still
// to write: B is its quiet instant, and a cut may pass its last line up to B.
// The looks are made only at a worker silent for kSilentNs, only where cuts
// are judged (the native subject, no launcher, container or loader worker).
//
// A hold still running at a cut is certain only up to its holder's last
// sign of life (history_queries.cc, rank_hold): the rest of the trial might
// show it died right after. A holder that sleeps says nothing, so a violation
// about its hold (a cleanup that removed its segment) waited for its next
// line. The supervisor, its parent, sees it has not begun to exit
// (not_exiting: the kernel releases its locks only after that), and says so
// every kAliveEveryNs: an `alive` line, a sign of life like its own.
//
// A worker that sleeps runs nothing, so the CPU rule never passes it: one
// holding its prefix for a second held every cut back that long. But the
// worker's path from a line's stamp to its write makes only the calls
// `emit_op_event` and `EventLog::emit` make (the clocks, the schedstat file,
// lseek, write), never one that waits for another process. So a worker seen
// blocked in such a wait (`sleeps_between_lines`) at a look that began at B,
// with one thread (a second could be writing), wrote every line it stamped
// before B before it began to wait: B is a quiet instant too, from one look.
#include "supervisor_internal.h"

namespace harness::supervision {

namespace {
constexpr std::int64_t kSpinLookNs = 100'000'000;
// The native worker's logging between a line's stamp and its last write(2):
// its JSON, split into lines of PIPE_BUF bytes, and the writes
// (bench/emit_bench: 3 us for a line of a few names, 0.2 ms for a cleanup
// report of 150 names, 5 ms for 2,000; the catalog's longest line is 1.1 KB).
// The process CPU clock read here is exact at the read: no tick to allow for.
constexpr std::int64_t kEmitCpuNs = 20'000'000;
// A worker is looked at once it has written nothing for this long.
constexpr std::int64_t kSilentNs = 50'000'000;
// How often a silent worker found alive is logged as such (`alive`).
constexpr std::int64_t kAliveEveryNs = 100'000'000;
// Looks kept per silent worker: a sleeping worker runs nothing, so its looks
// would pile up for the length of the trial.
constexpr std::size_t kMaxLooks = 256;
}  // namespace

bool sleeps_between_lines(const BlockedIn& b, long threads) {
  if (threads != 1) return false;
  switch (b.nr) {
    case SYS_futex:
#ifdef SYS_futex_waitv
    case SYS_futex_waitv:
#endif
    case SYS_clock_nanosleep:
#ifdef SYS_nanosleep
    case SYS_nanosleep:
#endif
    case SYS_flock:
      return true;
    case SYS_fcntl:
      return b.arg1 == F_SETLKW || b.arg1 == F_OFD_SETLKW;
    default:
      return false;
  }
}

bool Supervisor::watches_spins() const {
  return cfg_.spin_budget_ns > 0 && !tracks_processes_ && pids_are_ours();
}

void Supervisor::spins(std::int64_t now) {
  if (now < next_spin_look_ || !watches_spins()) return;
  next_spin_look_ = now + kSpinLookNs;
  const std::string history = trial_dir_ + "/history.jsonl";
  open_ops_.update(history);
  struct Look {
    const Worker* w;
    std::int64_t id;
    CpuTimes cpu;
    std::int64_t t;  // after the read: what it ran by then is at least cpu.run_ns
  };
  std::vector<Look> looks;
  for (const auto& [pid, w] : workers_) {
    if (!w.alive || w.plan == nullptr) continue;
    auto it = open_ops_.open().find(w.self_pid);
    if (it == open_ops_.open().end()) continue;
    std::optional<std::pair<CpuTimes, std::int64_t>> read;  // once per worker
    for (const auto& [id, o] : it->second) {
      // An op cannot have run its budget in less time than that. One
      // invoked before this worker started is a dead one's that had its pid
      // (a reused pid): its end will never come, nor is it this process's.
      if (o.cpu_run_ns < 0 || now - o.invoke_t <= cfg_.spin_budget_ns || o.invoke_t < w.spawned_t ||
          spin_logged_.contains({w.self_pid, id}))
        continue;
      if (!read) {
        const CpuTimes cpu = cpu_times_of(pid);
        read.emplace(cpu, mono_ns());
      }
      looks.push_back({&w, id, read->first, read->second});
    }
  }
  if (looks.empty()) return;
  // An op whose end is written by now may have ended before its look, and
  // what the process ran since then is not the op's: only one still open is
  // judged. (One whose end is stamped but not yet written ran at most the
  // logging since, which kSpinReadSlackNs covers.)
  open_ops_.update(history);
  for (const Look& l : looks) {
    auto it = open_ops_.open().find(l.w->self_pid);
    if (it == open_ops_.open().end() || !it->second.contains(l.id) || l.cpu.run_ns < 0) continue;
    const OpenOps::Open& o = it->second.at(l.id);
    const std::int64_t waited = l.cpu.wait_ns >= 0 && o.cpu_wait_ns >= 0
                                    ? std::max<std::int64_t>(0, l.cpu.wait_ns - o.cpu_wait_ns)
                                    : 0;
    // Without the stops, which would only make the rule hold sooner.
    if (!spun(l.t - o.invoke_t, l.cpu.run_ns - o.cpu_run_ns, waited, 0, cfg_.spin_budget_ns))
      continue;
    Json e{{"type", "cpu"},     {"t", l.t},   {"pid", l.w->self_pid}, {"job", l.w->job},
           {"rank", l.w->rank}, {"id", l.id}, {"op", o.op},           {"run_ns", l.cpu.run_ns}};
    if (l.cpu.wait_ns >= 0) e["wait_ns"] = l.cpu.wait_ns;
    log_.emit(std::move(e));
    spin_logged_.insert({l.w->self_pid, l.id});
  }
}

void Supervisor::look_at_silent(std::int64_t now) {
  for (const auto& [pid, w] : workers_) {
    if (!w.alive || w.plan == nullptr) continue;
    const std::optional<std::int64_t> last = cut_point_.last_line(w.self_pid);
    if (!last || now - *last < kSilentNs) continue;
    const std::int64_t before = mono_ns();
    const BlockedIn blocked = blocked_in_of(pid);
    ProcStat ps;
    const bool read = proc_stat(pid, &ps);  // after the call it is in: its threads then
    if (read && sleeps_between_lines(blocked, ps.threads)) {
      auto& b = blocked_quiet_[pid];
      b = std::max(b, before);
    }
    auto& said = alive_said_[pid];
    if (said < w.spawned_t) said = 0;  // a dead process that had this pid
    if (read && before - said >= kAliveEveryNs && not_exiting(ps)) {
      log_.emit({{"type", "alive"},
                 {"t", before},
                 {"pid", w.self_pid},
                 {"job", w.job},
                 {"rank", w.rank}});
      said = before;
    }
    const std::int64_t run = cpu_run_ns_of(pid);
    if (run < 0) continue;
    auto& looks = silent_looks_[pid];
    // Looks at a dead process that had this pid say nothing about this one.
    if (!looks.empty() && looks.front().first < w.spawned_t) looks.clear();
    if (looks.size() >= kMaxLooks) looks.pop_front();
    looks.emplace_back(before, run);
  }
}

// After look_at_silent() and then a read of the history: the lines a worker
// stamped before its quiet instant were all written before that read.
// (A quiet instant stays one: the lines stamped before it stay written. One
// from a dead process that had the pid lies before the new one's start, when
// it had stamped nothing.)
std::map<int, std::int64_t> Supervisor::quiet_until() {
  std::map<int, std::int64_t> out;
  for (auto& [pid, looks] : silent_looks_) {
    auto w = workers_.find(pid);
    if (w == workers_.end() || !w->second.alive || looks.size() < 2) continue;
    const std::int64_t run_now = looks.back().second;
    // The latest earlier look it has run enough since.
    std::size_t k = looks.size() - 1;
    while (k > 0 && run_now - looks[k - 1].second <= kEmitCpuNs) --k;
    if (k == 0) continue;
    out[w->second.self_pid] = looks[k - 1].first;
    looks.erase(looks.begin(), looks.begin() + static_cast<std::ptrdiff_t>(k - 1));
  }
  for (const auto& [pid, b] : blocked_quiet_) {
    auto w = workers_.find(pid);
    if (w == workers_.end() || !w->second.alive) continue;
    auto [it, fresh] = out.emplace(w->second.self_pid, b);
    if (!fresh) it->second = std::max(it->second, b);
  }
  return out;
}

}  // namespace harness::supervision
