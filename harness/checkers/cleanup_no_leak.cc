// cleanup.no-leak: after the trial and its cleanup step nothing of it remains
// in /dev/shm or the lock dir (DESIGN §4). Judged from the harness's audit;
// entries a fault seeded as another user's are expected to stay (cleanup must
// never remove them). Without a cleanup step, leftovers of killed jobs are
// expected, except what a job leaves whose holders were all killed alone (not
// their process trees): their resource trackers outlived them, and a tracker
// frees its process's prefix and removes its names once nobody else holds it
// (the audit waits for stragglers first). A prefix granted again afterwards
// is the new holder's and is not judged.
#include <fmt/format.h>

#include "checker.h"
#include "checkers/common.h"

namespace harness {
namespace {

// Whether the exit of a killed holder came from a kill of its tree.
bool killed_with_tree(const History& h, const checks::RankHold& r) {
  for (const Fault& f : h.faults) {
    if (f.signal == 9 && f.tree && checks::aims_at(f, r.job, r.rank, r.pid)) return true;
  }
  return false;
}

// Without a cleanup step: a prefix whose last holders were all killed alone
// must have been reaped by their trackers.
void check_tracker_reaped(const History& h, checks::Report& rep) {
  if (!h.audit.ran) return;
  const auto holds = checks::prefix_holds(h);
  for (std::size_t i = 0; i < holds.size(); ++i) {
    const checks::JobHold& j = holds[i];
    if (!j.died_holding || !j.killed) continue;
    bool regranted = false;
    for (std::size_t k = i + 1; k < holds.size(); ++k) regranted |= holds[k].prefix == j.prefix;
    if (regranted) continue;
    bool alone = true;
    for (const auto& r : j.ranks) {
      alone = alone && r.end == checks::RankHold::End::kKilled && r.exit != nullptr &&
              r.exit->signal_sent_by_harness && !killed_with_tree(h, r);
    }
    if (!alone) continue;
    rep.reach("killed-alone-tracker-reaps");
    std::string list;
    for (const auto& n : h.audit.leftover_shm) {
      if (checks::name_prefix(h, n) == j.prefix) list += (list.empty() ? "" : ", ") + n;
    }
    for (const auto& n : h.audit.leftover_locks) {
      if (checks::name_prefix(h, n) == j.prefix) list += (list.empty() ? "" : ", ") + n;
    }
    if (!list.empty()) {
      rep.invalid(fmt::format("job {}'s holders of prefix {} (pids {}) were killed alone, their resource trackers "
                              "alive, yet after the trial {} remained: a tracker frees its process's prefix and "
                              "removes its names once nobody else holds it",
                              j.job, j.prefix, j.pids(), list));
    }
  }
}

CheckResult check_cleanup_no_leak(const History& h) {
  checks::Report rep("cleanup.no-leak");
  if (!h.meta.cleanup_step) {
    check_tracker_reaped(h, rep);
    return rep.take();
  }
  if (!h.audit.ran) {
    rep.unknown("no audit ran after the cleanup step, so leftovers are unknown");
    return rep.take();
  }
  const auto foreign = checks::foreign_names(h);
  auto report = [&](const std::vector<std::string>& names, const char* where) {
    std::string list;
    for (const auto& n : names) {
      if (foreign.contains(n)) {
        rep.reach("foreign-entry-kept");
        continue;
      }
      list += (list.empty() ? "" : ", ") + n;
    }
    if (!list.empty())
      rep.invalid(fmt::format("left in {} after the cleanup step: {}", where, list));
  };
  report(h.audit.leftover_shm, "/dev/shm");
  report(h.audit.leftover_locks, "the lock dir");
  return rep.take();
}

}  // namespace
}  // namespace harness

SHMSTRESS_REGISTER_CHECKER(
    "cleanup.no-leak",
    "after the trial and its cleanup nothing of it remains in /dev/shm or the lock dir",
    harness::check_cleanup_no_leak, {"foreign-entry-kept", "killed-alone-tracker-reaps"});
