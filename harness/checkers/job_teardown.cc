// job.teardown: when a job's launcher exits or is killed, no process of the
// job (its ranks, their loader workers, trackers and helpers) outlives it by
// more than the scenario's bound ([job.launcher] teardown) (DESIGN §4).
//
// The supervisor records, when it sees a launcher end, which processes of its
// job are alive (its process group and the job's tracked processes) and when
// each is gone; a member still alive when the trial ended outlived it.
// Why a bound and not zero: torch 1.13's agent SIGTERMs its direct children
// and SIGKILLs them 30 s later; a DataLoader worker notices its rank's death at
// its watchdog's next check (5 s). The scenario states what it defends.
#include <fmt/format.h>

#include "checker.h"
#include "checkers/history_queries.h"

namespace harness {
namespace {

CheckResult check_job_teardown(const History& h) {
  checks::Report rep("job.teardown");
  for (const Teardown& td : h.teardowns) {
    if (td.members.empty()) continue;
    rep.reach("launcher-ended-with-live-job");
    for (const auto& m : td.members) {
      if (m.gone_t == 0) {
        rep.invalid(fmt::format("the launcher of job {} (pid {}) ended at {}; its {} pid {} was still alive when the "
                                "trial ended (bound {})",
                                td.job, td.launcher_pid, checks::at(h, td.t), m.role, m.pid, checks::ms(td.bound_ns)));
        continue;
      }
      const std::int64_t late = m.gone_t - td.t;
      if (late > td.bound_ns) {
        rep.invalid(fmt::format("the launcher of job {} (pid {}) ended at {}; its {} pid {} lived on until {}, {} "
                                "later: past the bound {}",
                                td.job, td.launcher_pid, checks::at(h, td.t), m.role, m.pid, checks::at(h, m.gone_t),
                                checks::ms(late), checks::ms(td.bound_ns)));
      } else {
        rep.reach("job-torn-down-in-time");
      }
    }
  }
  return rep.take();
}

}  // namespace
}  // namespace harness

SHMSTRESS_REGISTER_CHECKER("job.teardown",
                           "when a job's launcher ends, no process of the job outlives it by more than the bound",
                           harness::check_job_teardown, {"launcher-ended-with-live-job", "job-torn-down-in-time"});
