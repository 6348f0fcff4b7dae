// worker.exits: every worker exits by itself within the grace after its last
// operation; one that has to be killed at teardown is a violation naming it
// (DESIGN §4).
//
// A worker killed at the trial timeout with an acquire, release or barrier op
// still open is the hang of that op, reported by prefix.progress or
// barrier.liveness; here are the others: killed at teardown with no op open, or
// inside another op (clean, segment, witness, ...). A worker that exited by
// itself more than grace after its last op completed (not counting time it
// spent stopped, nor what the scheduler kept it or the supervisor that saw
// its exit waiting for a CPU: checks::exit_cpu_wait_ns) also breaks it. A trial that timed out without any worker
// killed at teardown is not shown to be fine: unknown.
#include <fmt/format.h>

#include "checker.h"
#include "checkers/history_queries.h"

namespace harness {
namespace {

bool reported_elsewhere(const Op& op) {
  return op.op == "acquire" || op.op == "release" || op.op == "barrier" ||
         op.op.starts_with("barrier_");
}

CheckResult check_worker_exits(const History& h) {
  checks::Report rep("worker.exits");
  bool teardown_kill = false;
  for (const Exit& e : h.exits) {
    const std::string who = checks::who(e.job, e.rank, e.pid);
    const Op* last = nullptr;  // its latest op by invoke
    for (const Op& op : h.ops) {
      if (op.job == e.job && op.rank == e.rank && (e.pid == 0 || op.pid == e.pid)) last = &op;
    }
    if (e.teardown) {
      teardown_kill = true;
      if (last != nullptr && last->outcome == Outcome::kInfo && reported_elsewhere(*last)) continue;
      rep.reach("worker-killed-at-teardown");
      if (last != nullptr && last->outcome == Outcome::kInfo) {
        rep.invalid(fmt::format("{} was still inside {} when the trial timed out and had to be "
                                "killed at teardown ({})",
                                who, checks::describe(h, *last), checks::at(h, e.t)));
      } else if (last != nullptr) {
        rep.invalid(fmt::format("{} did not exit after its last op ({}, ended {}) and had to be "
                                "killed at teardown ({})",
                                who, checks::describe(h, *last), checks::at(h, last->complete_t),
                                checks::at(h, e.t)));
      } else {
        rep.invalid(fmt::format("{} never logged an op and had to be killed at teardown ({})",
                                who, checks::at(h, e.t)));
      }
      continue;
    }
    if (e.signal > 0 || last == nullptr || last->outcome == Outcome::kInfo) continue;
    std::int64_t end = 0;  // when its last op ended
    for (const Op& op : h.ops) {
      if (op.job == e.job && op.rank == e.rank && (e.pid == 0 || op.pid == e.pid)) {
        end = std::max(end, op.complete_t);
      }
    }
    const Op* ended = nullptr;  // the op that ended last: its completion logged the last wait
    for (const Op& op : h.ops) {
      if (op.job == e.job && op.rank == e.rank && (e.pid == 0 || op.pid == e.pid) && op.complete_t == end) ended = &op;
    }
    const std::int64_t stopped = checks::stopped_ns(h, e.job, e.rank, e.pid, end, e.t);
    const std::int64_t waited = checks::exit_cpu_wait_ns(e, ended);
    const std::int64_t took = e.t - end - stopped - std::max<std::int64_t>(0, waited);
    if (took > h.meta.grace_ns) {
      rep.invalid(fmt::format(
          "{} exited {} after its last op ended ({}, at {}){}: more than the grace {}", who,
          checks::ms(took), last->op, checks::at(h, end),
          checks::not_counted(stopped, waited, /*of_it=*/false),
          checks::ms(h.meta.grace_ns)));
    } else {
      rep.reach("worker-exited-in-time");
    }
  }
  if (h.timed_out && !teardown_kill) {
    rep.unknown("the trial timed out, yet no worker is recorded as killed at teardown");
  }
  return rep.take();
}

}  // namespace
}  // namespace harness

SHMSTRESS_REGISTER_CHECKER(
    "worker.exits",
    "every worker exits by itself soon after its last op; one killed at teardown is a violation",
    harness::check_worker_exits, {"worker-killed-at-teardown", "worker-exited-in-time"});
