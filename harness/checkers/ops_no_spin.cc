// ops.no-spin: an operation that waits sleeps while it waits.
//
// A waiter on a lock, a barrier round or a registry entry has nothing to do
// until another process acts; code that keeps asking (a retry loop with no
// sleep, a poll with a zero interval, a try-lock retried instead of failing)
// burns a CPU its peers need, and on a loaded machine it is also slow to
// notice anything, because it competes for the CPU with the processes it
// waits for. Such a wait is no slower by the clock that the deadline rules
// count (what the op waited for a CPU is not counted against it), so without
// this rule it shows only as a hang at the trial's timeout.
//
// The rule, for each wait op (acquire, release, barrier_attach, barrier,
// barrier_detach, clean) whose process measured its CPU time (cpu_run_ns,
// docs/worker-protocol.md): at its end (its own two reads) and at the
// supervisor's look while it was open (a `cpu` event), an op that had run
// more than meta.spin_budget_ns on a CPU, and more than a tenth of the time
// it could run (its time open, less what it waited for a CPU and spent
// stopped), is invalid (harness::spun, history.h). A correct op of the native worker ran
// at most 13 ms, also in a 3 s wait of polling; one that sleeps to a long
// deadline runs a small part of it.
//
// At a cut (judges_cuts): both looks are lines in the record, and what a
// process ran by a time only grows: an op invalid at a cut is invalid in
// every record the trial can go on to write.
#include <fmt/format.h>

#include <set>

#include "checker.h"
#include "checkers/history_queries.h"

namespace harness {
namespace {

struct Look {
  std::int64_t t = 0, run_ns = -1, wait_ns = -1;
  const char* what = "";
};

CheckResult check_ops_no_spin(const History& h) {
  checks::Report rep("ops.no-spin");
  static const std::set<std::string> kWaits = {"acquire", "release",        "barrier_attach",
                                               "barrier", "barrier_detach", "clean"};
  const std::int64_t budget = h.meta.spin_budget_ns;
  if (budget <= 0) return rep.take();
  for (const Op& op : h.ops) {
    if (!kWaits.contains(op.op) || op.invoke_run_ns < 0) continue;
    // Its end (if it ended and said) and the supervisor's look (if any): run_ns -1 where none.
    const Look looks[] = {
        op.outcome != Outcome::kInfo
            ? Look{op.complete_t, op.complete_run_ns, op.complete_wait_ns, "by its end"}
            : Look{},
        Look{op.sample_t, op.sample_run_ns, op.sample_wait_ns, "when the supervisor looked"}};
    for (const Look& l : looks) {
      if (l.run_ns < 0) continue;  // no such look
      const std::int64_t open = l.t - op.invoke_t;
      if (open > 1'000'000'000) rep.reach("long-wait-measured");
      const std::int64_t ran = l.run_ns - op.invoke_run_ns;
      if (!past_spin_budget(ran, budget)) continue;
      const std::int64_t waited = l.wait_ns >= 0 && op.invoke_wait_ns >= 0
                                      ? std::max<std::int64_t>(0, l.wait_ns - op.invoke_wait_ns)
                                      : 0;
      const std::int64_t stopped = checks::stopped_ns(h, op.job, op.rank, op.pid, op.invoke_t, l.t);
      if (!spun(open, ran, waited, stopped, budget)) continue;
      rep.reach("op-spun");
      rep.invalid(
          fmt::format("{} had run {} on a CPU {}, open {} ({} of it waiting for a CPU, {} "
                      "stopped): it spun instead of sleeping, past the {} budget",
                      checks::describe(h, op), checks::ms(ran), l.what, checks::ms(open),
                      checks::ms(waited), checks::ms(stopped), checks::ms(budget)));
      break;
    }
  }
  return rep.take();
}

}  // namespace
}  // namespace harness

SHMSTRESS_REGISTER_CHECKER("ops.no-spin",
                           "an operation that waits sleeps: none runs on a CPU past its budget, a "
                           "tenth of its time or more",
                           harness::check_ops_no_spin, {"long-wait-measured", "op-spun"},
                           /*judges_cuts=*/true);
