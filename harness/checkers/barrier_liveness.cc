// barrier.liveness: with all participants alive and running, every round
// completes within the deadline; if one dies, every survivor gets a clear
// error within the deadline — never a hang (DESIGN §4).
//
// - Every barrier op (attach, round, detach) ends, ok or failed, within
//   barrier_deadline + grace of its invoke, not counting time its own process
//   spent stopped or waiting for a CPU (Op::cpu_wait_ns); one still open at
//   the trial timeout hung.
// - A round that fails ("timeout" or "broken") although every participant had
//   entered it (its invoke, plus what it waited for a CPU in that op: it may
//   have arrived that much later), none was gone, no fault can cause that failure
//   (checkers/excuses.h: a stop explains a timeout, never a "broken") and no
//   other rank's barrier op had failed before it (one failure breaks the
//   barrier for everyone: the earliest is the one judged) is a round that
//   should have completed.
// - Death latency: once a participant that attached is gone (killed, exited,
//   detached) without entering round r, every other participant's round-r op
//   ends within liveness + slack of that (TrialMeta::liveness_ns, not counting
//   time its own process spent stopped or waiting for a CPU) — not at its
//   deadline. One killed inside round r (its op cut off) either arrived, and r
//   completes when the others arrive, or did not, and its death breaks r: so
//   once every participant has entered r (and nobody of the job is stopped
//   meanwhile), every other round-r op ends within the same bound of the
//   later of the death and the last entry. A barrier that forgot the dead
//   one's seat (reset as stale) waits for it until the deadline instead.
// - Exit path: a detach waits for no peer, only for the barrier's lock and
//   the init lock; a dead holder's are released by the kernel. A detach that
//   fails with "timeout" while no fault could keep a lock from it (no process
//   stopped, no fault holding the init lock: excuses.h fault_keeping_lock)
//   waited on a lock a running process kept after its op — an exit-path hang.
// - Release latency (only when the scenario sets deadlines.release): once
//   one participant left round r (so it was released), every other one that
//   completes r completes it within TrialMeta::release_ns, unless a fault
//   acted while it was late (one over before the first left leaves a state
//   the barrier must release from like any other). A waiter that slept
//   through the release and left only when its own liveness check came
//   round (a wake before the store it announces) shows here; scenarios raise
//   the subject's check interval (workload.barrier_liveness) far above the
//   bound so that a lost wake costs far more than any scheduling delay of a
//   loaded machine.
// At a cut (judges_cuts; docs/architecture.md, "Judging a running trial"):
// the deadline of an op that ended, an exit-path hang and release latency,
// which stay invalid however the trial goes on; not a failed round's
// explanation nor a death's latency.
#include <fmt/format.h>

#include <map>
#include <set>
#include <tuple>

#include "checker.h"
#include "checkers/history_queries.h"
#include "checkers/excuses.h"

namespace harness {
namespace {

// Entering this close to a failure may have raced the failing rank's own deadline.
constexpr std::int64_t kEntryMargin = 100'000'000;

// Whether a stop fault aimed at any process of `job` overlaps [a, b].
bool job_stopped_during(const History& h, int job, std::int64_t a, std::int64_t b) {
  for (const Fault& f : h.faults) {
    if (checks::is_stop(f) && f.job == job && f.start_t <= b && f.end_t >= a) return true;
  }
  return false;
}

bool is_barrier_op(const Op& op) { return op.op == "barrier" || op.op.starts_with("barrier_"); }

std::int64_t round_of(const Op& op, const std::vector<const Op*>& earlier_rounds) {
  return op.round.value_or(static_cast<std::int64_t>(earlier_rounds.size()));
}

// Deaths of the other participants of op's job before it completed, as "rank 1 (pid 12) died at
// +3.000ms".
std::string deaths_before(const History& h, const Op& op) {
  std::string out;
  for (const Exit& e : h.exits) {
    const int s = checks::seat(h, e);
    if (e.job != op.job || e.pid == op.pid || (s >= 0 && s == checks::seat(h, op)) || e.t > op.complete_t ||
        (e.signal <= 0 && e.exit_code == 0))
      continue;
    out += fmt::format("{}{} (pid {}) {} at {}", out.empty() ? "" : "; ",
                       s >= 0 ? checks::seat_name(h, e.job, s) : fmt::format("rank {}", e.rank), e.pid,
                       e.signal > 0 ? fmt::format("was killed by signal {}", e.signal)
                                    : fmt::format("exited {}", e.exit_code),
                       checks::at(h, e.t));
  }
  return out;
}

// Whether anything outside the barrier explains a failed round of `op`'s job.
bool failure_explained(const History& h, const Op& op, const std::map<int, const Op*>& entered,
                       const std::set<int>& participants) {
  for (int p : participants) {
    auto it = entered.find(p);
    // Its invoke was logged before it arrived at the barrier; what it waited
    // for a CPU in that round (at most) may lie in between.
    if (it == entered.end() ||
        it->second->invoke_t + it->second->cpu_wait_ns() > op.complete_t - kEntryMargin) {
      return true;
    }
  }
  const int me = checks::seat(h, op);
  for (const Exit& e : h.exits) {
    if (e.job == op.job && !(checks::seat(h, e) == me && (e.pid == op.pid || e.pid == 0)) &&
        checks::last_alive(h, e.job, e.rank, e.pid) < op.complete_t) {
      return true;  // someone was gone before this rank gave up
    }
  }
  if (checks::fault_causing_failure(h, op) != nullptr) return true;
  for (const Op& other : h.ops) {
    if (other.job != op.job || checks::seat(h, other) == me || other.invoke_t > op.complete_t) continue;
    if (other.op == "barrier_detach") return true;
    if (is_barrier_op(other) && other.outcome == Outcome::kFail &&
        other.complete_t < op.complete_t) {
      return true;  // broken for everyone by an earlier failure, judged on its own
    }
  }
  return false;
}

// When a participant stopped taking part: its detach, else its exit.
struct Gone {
  int seat = -1, rank = -1, pid = 0;
  std::int64_t t = 0;
  std::string how;
};

std::vector<Gone> gone_participants(const History& h, int job) {
  std::vector<Gone> out;
  std::set<std::tuple<int, int, int>> attached;  // seat, rank, pid
  for (const Op& op : h.ops) {
    if (op.job == job && op.op == "barrier_attach" && op.outcome == Outcome::kOk) {
      attached.insert({checks::seat(h, op), op.rank, op.pid});
    }
  }
  for (const auto& [seat, rank, pid] : attached) {
    Gone g{seat, rank, pid, checks::kNever, ""};
    for (const Op& op : h.ops) {
      if (op.job == job && op.rank == rank && op.pid == pid && op.op == "barrier_detach" &&
          op.outcome == Outcome::kOk && op.complete_t < g.t) {
        g.t = op.complete_t;
        g.how = "detached";
      }
    }
    if (const Exit* e = checks::exit_of(h, job, rank, pid); e != nullptr) {
      const std::int64_t dead = checks::dead_by(h, job, rank, pid);  // the kill seen, or the reap
      if (dead < g.t) {
        g.t = dead;
        g.how = e->signal > 0 ? fmt::format("was killed (signal {})", e->signal)
                              : fmt::format("exited {}", e->exit_code);
      }
    }
    if (g.t != checks::kNever) out.push_back(g);
  }
  return out;
}

// Release latency: in a round every participant completed ok, each leaves
// within release_ns of the first one to leave (which left only after the
// release: an anchor never earlier than the release, so a late anchor can
// only hide a slow waiter, never invent one). A waiter late while any fault
// window was open (a stop, a kill, anything) is not judged.
void check_release_latency(const History& h, const std::map<const Op*, std::int64_t>& round,
                           checks::Report& rep) {
  std::map<std::pair<int, std::int64_t>, std::vector<const Op*>> by_round;  // (job, round)
  for (const auto& [op, r] : round) by_round[{op->job, r}].push_back(op);
  for (const auto& [key, ops] : by_round) {
    const auto& [job, r] = key;
    if (job < 0 || static_cast<std::size_t>(job) >= h.meta.jobs.size() ||
        static_cast<int>(ops.size()) != checks::seats(h, job)) {
      continue;  // someone missing, or a seat twice (a replacement, a retry)
    }
    std::set<int> ranks;  // seats
    const Op* first = nullptr;
    bool all_ok = true;
    for (const Op* op : ops) {
      ranks.insert(checks::seat(h, *op));
      all_ok = all_ok && op->outcome == Outcome::kOk;
      if (first == nullptr || op->complete_t < first->complete_t) first = op;
    }
    if (!all_ok || ranks.size() != ops.size()) continue;
    rep.reach("barrier-release-judged");
    for (const Op* op : ops) {
      const std::int64_t late = op->complete_t - first->complete_t;
      if (late <= h.meta.release_ns) continue;
      // Only a fault acting while this waiter was late can have made it
      // late: one over before the first leave left a state the barrier must
      // release from like any other (a waker stopped between its wake and
      // its store is exactly the flaw this bound is for).
      bool touched = false;
      for (const Fault& f : h.faults) {
        touched = touched || checks::overlaps(f.start_t, std::max(f.end_t, f.start_t) + 1,
                                              first->complete_t, op->complete_t + 1);
      }
      if (touched) continue;
      rep.invalid(fmt::format(
          "{} left round {} at {}, {} after {} had left it at {} (so it was released): past the "
          "release bound {} (a waiter that slept through its round's release)",
          checks::describe(h, *op), r, checks::at(h, op->complete_t), checks::ms(late),
          checks::who(*first), checks::at(h, first->complete_t), checks::ms(h.meta.release_ns)));
    }
  }
}

CheckResult check_barrier_liveness(const History& h) {
  checks::Report rep("barrier.liveness");
  const std::int64_t limit = h.meta.barrier_deadline_ns + h.meta.grace_ns;

  std::map<int, std::set<int>> participants;
  std::map<std::tuple<int, int, int>, std::vector<const Op*>>
      rounds_of;  // (job, rank, pid) -> barrier rounds
  std::map<std::pair<int, std::int64_t>, std::map<int, const Op*>>
      entered;  // (job, round) -> rank -> first entry
  std::map<const Op*, std::int64_t> round;
  for (const Op& op : h.ops) {
    if (!is_barrier_op(op)) continue;
    const int me = checks::seat(h, op);
    participants[op.job].insert(me);
    if (op.op != "barrier") continue;
    auto& mine = rounds_of[{op.job, me, op.pid}];
    std::int64_t r = round_of(op, mine);
    mine.push_back(&op);
    round[&op] = r;
    auto& first = entered[{op.job, r}][me];
    if (first == nullptr || op.invoke_t < first->invoke_t) first = &op;
  }
  // At a cut (W) only what is final is judged: an op that ended before W
  // (its wait for a CPU is read at its end) and the faults begun before
  // it (one still open at W ends at W, no earlier than in the whole record).
  // Not judged there: an op still open at W (it may yet end in time), a
  // failed round's explanation (an exit after W may date a death before
  // it), and a death's latency (not audited for cuts yet).
  const bool at_cut = h.cut_t.has_value();
  for (std::size_t j = 0; j < h.meta.jobs.size(); ++j) {
    if (h.meta.jobs[j].barrier_rounds <= 0 || !participants.contains(static_cast<int>(j))) continue;
    for (int r = 0; r < checks::seats(h, static_cast<int>(j)); ++r) participants[static_cast<int>(j)].insert(r);
  }

  // A participant that died while another still had barrier work to do.
  for (const Exit& e : h.exits) {
    const int dead = checks::seat(h, e);
    if (e.signal <= 0 || dead < 0 || !participants[e.job].contains(dead)) continue;
    for (const Op& op : h.ops) {
      if (op.op == "barrier" && op.job == e.job && checks::seat(h, op) != dead && op.complete_t >= e.t) {
        rep.reach("barrier-participant-died");
        break;
      }
    }
  }

  // A participant that attached and died before a peer attached: the peer
  // finds a barrier whose only seated participants are dead.
  for (const Exit& e : h.exits) {
    if (e.signal <= 0) continue;
    bool attached = false;
    for (const Op& a : h.ops) {
      if (a.op == "barrier_attach" && a.job == e.job && a.pid == e.pid && a.outcome == Outcome::kOk) attached = true;
    }
    if (!attached) continue;
    for (const Op& op : h.ops) {
      if (op.op == "barrier_attach" && op.job == e.job && checks::seat(h, op) != checks::seat(h, e) &&
          op.invoke_t > e.t) {
        rep.reach("barrier-attached-after-peer-death");
        break;
      }
    }
  }

  for (const Op& op : h.ops) {
    if (!is_barrier_op(op)) continue;
    if (op.outcome == Outcome::kFail && op.error_code == "broken")
      rep.reach("barrier-broken-detected");
    if (op.outcome == Outcome::kFail && op.error_code == "timeout")
      rep.reach("barrier-timeout-detected");
    if (op.outcome == Outcome::kInfo && op.info_cause != kCauseTrialTimeout && op.op == "barrier") {
      rep.reach("killed-in-barrier");
    }
    if (job_stopped_during(h, op.job, op.invoke_t, op.complete_t)) rep.reach("barrier-participant-stopped");

    if (at_cut && op.outcome == Outcome::kInfo && op.info_cause == kCauseCut) continue;
    std::string deaths = deaths_before(h, op);
    std::string context = deaths.empty() ? "" : fmt::format(" (meanwhile {})", deaths);
    if (op.outcome == Outcome::kInfo && op.info_cause == kCauseTrialTimeout) {
      rep.reach("hang-detected");
      rep.invalid(fmt::format("{} was still waiting when the trial timed out at {}: a hang{}",
                              checks::describe(h, op), checks::at(h, op.complete_t), context));
      continue;
    }
    if (h.meta.barrier_deadline_ns > 0) {
      const std::int64_t took = op.complete_t - op.invoke_t;
      const std::int64_t stopped =
          checks::stopped_ns(h, op.job, op.rank, op.pid, op.invoke_t, op.complete_t);
      const std::int64_t waited = op.cpu_wait_ns();
      if (took - stopped - waited > limit) {
        std::string paused = checks::not_counted(stopped, op.measured_cpu_wait_ns());
        std::string how = op.outcome == Outcome::kOk     ? "completed"
                          : op.outcome == Outcome::kFail ? "failed"
                                                         : "was cut off (" + op.info_cause + ")";
        rep.invalid(fmt::format("{} {} after {}{}, past its deadline {} + grace {}{}",
                                checks::describe(h, op), how, checks::ms(took), paused,
                                checks::ms(h.meta.barrier_deadline_ns), checks::ms(h.meta.grace_ns),
                                context));
        continue;
      }
    }
    if (!at_cut && op.op == "barrier" && op.outcome == Outcome::kFail &&
        (op.error_code == "timeout" || op.error_code == "broken")) {
      std::int64_t r = round[&op];
      if (!failure_explained(h, op, entered[{op.job, r}], participants[op.job])) {
        rep.invalid(fmt::format(
            "{} failed round {} at {} ({}: {}) although every participant had entered it, all "
            "were alive and running, no fault can cause it and nothing had failed before",
            checks::describe(h, op), r, checks::at(h, op.complete_t), op.error_code,
            op.error_message));
      }
    }
  }

  for (const Op& op : h.ops) {
    if (op.op != "barrier_detach" || op.outcome != Outcome::kFail || op.error_code != "timeout") {
      continue;
    }
    if (checks::fault_keeping_lock(h, op) != nullptr) continue;
    const std::string deaths = deaths_before(h, op);
    rep.invalid(fmt::format(
        "{} failed at {} after {} ({}: {}) although no process was stopped and no fault held a "
        "lock meanwhile: a detach waits only for the barrier's lock and the init lock, so a "
        "running process kept one after its op{}",
        checks::describe(h, op), checks::at(h, op.complete_t),
        checks::ms(op.complete_t - op.invoke_t), op.error_code, op.error_message,
        deaths.empty() ? "" : " (meanwhile " + deaths + ")"));
  }

  if (h.meta.release_ns > 0) check_release_latency(h, round, rep);

  // Death latency: a gone participant breaks the rounds it never entered for
  // everyone else within the liveness bound.
  const std::int64_t bound = h.meta.liveness_ns + kLivenessSlackNs;
  for (const auto& [job, ranks] : participants) {
    if (at_cut) break;
    for (const Gone& g : gone_participants(h, job)) {
      std::set<std::int64_t> entered_rounds, died_in;
      for (const Op& op : h.ops) {
        if (op.job == job && op.rank == g.rank && op.pid == g.pid && op.op == "barrier" &&
            op.invoke_t <= g.t) {
          entered_rounds.insert(round[&op]);
          if (op.outcome == Outcome::kInfo && op.info_cause != kCauseTrialTimeout) died_in.insert(round[&op]);
        }
      }
      for (const Op& op : h.ops) {
        if (op.op != "barrier" || op.job != job || checks::seat(h, op) == g.seat) continue;
        if (op.complete_t <= g.t) continue;
        if (op.outcome == Outcome::kInfo && op.info_cause == kCauseTrialTimeout) continue;  // a hang, above
        std::int64_t from = std::max(g.t, op.invoke_t);
        const std::int64_t r = round[&op];
        if (died_in.contains(r)) {
          // It died inside round r: its arrival either counted (r completes
          // once the others arrive) or not (its death breaks r); both within
          // the bound of the last entry, unless someone was stopped meanwhile
          // or never entered (then r waits for them, as it should).
          const auto& who = entered[{job, r}];
          bool all_in = true;
          for (int p : ranks) {
            auto it = who.find(p);
            if (it == who.end()) {
              all_in = false;
              break;
            }
            from = std::max(from, it->second->invoke_t + it->second->cpu_wait_ns());
          }
          if (!all_in || op.complete_t <= from || job_stopped_during(h, job, from, op.complete_t)) continue;
        } else if (entered_rounds.contains(r)) {
          continue;
        }
        const std::int64_t stopped =
            checks::stopped_ns(h, op.job, op.rank, op.pid, from, op.complete_t);
        // The op's whole wait for a CPU: its invoke and completion are the
        // only readings, so a wait before the death counts too (lenient by
        // at most that).
        const std::int64_t waited = op.cpu_wait_ns();
        const std::int64_t took = op.complete_t - from - stopped - waited;
        if (took <= bound) {
          if (op.outcome == Outcome::kFail) rep.reach("barrier-death-detected-in-time");
          continue;
        }
        std::string how = op.outcome == Outcome::kOk     ? "completed"
                          : op.outcome == Outcome::kFail ? "failed (" + op.error_code + ")"
                                                         : "was cut off (" + op.info_cause + ")";
        rep.invalid(fmt::format(
            "{} {} at {}, {} after {} (pid {}) {} at {} {} round {}{}: past "
            "the death-detection bound {} (liveness {} + slack {})",
            checks::describe(h, op), how, checks::at(h, op.complete_t), checks::ms(took),
            checks::seat_name(h, job, g.seat), g.pid, g.how, checks::at(h, g.t),
            died_in.contains(r) ? "inside (every participant had entered)" : "without entering", r,
            checks::not_counted(stopped, op.measured_cpu_wait_ns(), /*of_it=*/false),
            checks::ms(bound), checks::ms(h.meta.liveness_ns), checks::ms(kLivenessSlackNs)));
      }
    }
  }
  return rep.take();
}

}  // namespace
}  // namespace harness

SHMSTRESS_REGISTER_CHECKER(
    "barrier.liveness",
    "every round completes within the deadline; if a participant dies, every survivor gets a "
    "clear error in time — never a hang",
    harness::check_barrier_liveness,
    {"barrier-participant-died", "barrier-broken-detected", "barrier-timeout-detected",
     "killed-in-barrier", "barrier-participant-stopped", "hang-detected",
     "barrier-death-detected-in-time", "barrier-release-judged",
     "barrier-attached-after-peer-death"},
    /*judges_cuts=*/true);
