// harness.no-orphans: no process of a trial outlives the trial (DESIGN §4).
// Judged from the audit after teardown; a worker the history shows running
// but never reaped is not shown to be gone, so it makes the verdict unknown.
#include <fmt/format.h>

#include <set>
#include <tuple>

#include "checker.h"
#include "checkers/history_queries.h"

namespace harness {
namespace {

CheckResult check_no_orphans(const History& h) {
  checks::Report rep("harness.no-orphans");
  if (!h.audit.ran) {
    rep.unknown("no audit ran after teardown, so surviving processes are unknown");
    return rep.take();
  }
  for (int pid : h.audit.orphan_pids) {
    std::string known;
    for (const Op& op : h.ops) {
      if (op.pid == pid) {
        known = fmt::format(" (job {} rank {})", op.job, op.rank);
        break;
      }
    }
    rep.invalid(fmt::format("pid {}{} was still alive after the trial's teardown", pid, known));
  }
  std::set<std::tuple<int, int, int>> unreaped;
  for (const Op& op : h.ops) {
    if (checks::exit_of(h, op.job, op.rank, op.pid) == nullptr)
      unreaped.insert({op.job, op.rank, op.pid});
  }
  for (const auto& [job, rank, pid] : unreaped) {
    rep.unknown(
        fmt::format("{} was never reaped (no exit in the history)", checks::who(job, rank, pid)));
  }
  if (!h.exits.empty() && h.audit.orphan_pids.empty()) rep.reach("teardown-clean");
  return rep.take();
}

}  // namespace
}  // namespace harness

SHMSTRESS_REGISTER_CHECKER("harness.no-orphans", "no process of a trial outlives the trial",
                           harness::check_no_orphans, {"teardown-clean"});
