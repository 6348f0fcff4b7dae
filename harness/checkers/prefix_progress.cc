// prefix.progress: acquiring finishes or fails cleanly within its deadline,
// and the fds a worker holds after acquiring stay bounded (DESIGN §4).
//
// An acquire (or a release) may take acquire_deadline + grace, not counting the
// time its own process spent stopped (a SIGSTOPped process cannot meet any
// deadline) or waiting for a CPU (Op::cpu_wait_ns: an oversubscribed machine's
// delay, which the kernel measured, is not the subject's latency). One still open when the trial timed out hung: invalid. One cut
// off by a kill is judged by how long it had been open when it died.
#include <fmt/format.h>

#include "checker.h"
#include "checkers/history_queries.h"

#include <set>

namespace harness {
namespace {

CheckResult check_prefix_progress(const History& h) {
  checks::Report rep("prefix.progress");
  const std::int64_t limit = h.meta.acquire_deadline_ns + h.meta.grace_ns;
  {
    // An acquire that returned while many other jobs held prefixes: where a
    // walk over every live prefix (fds, time) would show.
    const auto holds = checks::prefix_holds(h);
    for (const Op& op : h.ops) {
      if (op.op != "acquire" || op.outcome != Outcome::kOk) continue;
      std::set<int> others;
      for (const auto& j : holds) {
        if (j.job != op.job && j.has_sure() && j.sure_start <= op.invoke_t &&
            j.sure_end >= op.complete_t) {
          others.insert(j.job);
        }
      }
      if (others.size() >= 8) rep.reach("acquired-beside-many-live-prefixes");
    }
  }
  for (const Op& op : h.ops) {
    if (op.op != "acquire" && op.op != "release") continue;
    if (op.outcome == Outcome::kFail && op.error_code == "timeout") rep.reach("acquire-timeout");
    if (op.outcome == Outcome::kInfo && op.info_cause == kCauseTrialTimeout) {
      rep.reach("hang-detected");
      rep.invalid(fmt::format("{} was still open when the trial timed out at {}: a hang",
                              checks::describe(h, op), checks::at(h, op.complete_t)));
      continue;
    }
    if (h.meta.acquire_deadline_ns <= 0) continue;
    const std::int64_t took = op.complete_t - op.invoke_t;
    const std::int64_t stopped =
        checks::stopped_ns(h, op.job, op.rank, op.pid, op.invoke_t, op.complete_t);
    const std::int64_t waited = op.cpu_wait_ns();
    if (took - stopped - waited <= limit) continue;
    std::string paused = checks::not_counted(stopped, op.measured_cpu_wait_ns());
    if (op.outcome == Outcome::kInfo) {
      rep.invalid(fmt::format(
          "{} had been open {}{} when it was cut off ({}), past its deadline {} + grace {}",
          checks::describe(h, op), checks::ms(took), paused, op.info_cause,
          checks::ms(h.meta.acquire_deadline_ns), checks::ms(h.meta.grace_ns)));
    } else {
      rep.invalid(
          fmt::format("{} {} after {}{}, past its deadline {} + grace {}", checks::describe(h, op),
                      op.outcome == Outcome::kOk ? "returned" : "failed", checks::ms(took), paused,
                      checks::ms(h.meta.acquire_deadline_ns), checks::ms(h.meta.grace_ns)));
    }
  }
  if (h.audit.max_fds > h.meta.fd_bound) {
    rep.reach("fd-bound-exceeded");
    rep.invalid(
        fmt::format("{} reported holding {} fds after acquire, more than the bound {}",
                    checks::who(h.audit.max_fds_job, h.audit.max_fds_rank, h.audit.max_fds_pid),
                    h.audit.max_fds, h.meta.fd_bound));
  }
  return rep.take();
}

}  // namespace
}  // namespace harness

SHMSTRESS_REGISTER_CHECKER("prefix.progress",
                           "acquiring finishes or fails within its deadline; open fds stay bounded",
                           harness::check_prefix_progress,
                           {"acquire-timeout", "hang-detected", "fd-bound-exceeded",
                            "acquired-beside-many-live-prefixes"});
