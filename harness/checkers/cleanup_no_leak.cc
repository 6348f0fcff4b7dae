// cleanup.no-leak: after the trial and its cleanup step nothing of it remains
// in /dev/shm or the lock dir (DESIGN §4). Judged from the harness's audit;
// entries a fault seeded as another user's are expected to stay (cleanup must
// never remove them). Without a cleanup step, leftovers of killed jobs are
// expected, except what a job leaves whose holders were all killed alone (not
// their process trees): their resource trackers outlived them, and a tracker
// frees its process's prefix and removes its names once nobody else holds it
// (the audit waits for stragglers first). A prefix granted again afterwards
// is the new holder's and is not judged.
//
// Eventual cleanup (deadlines.cleanup): some subjects clean up after a dead
// holder only later, through processes it left behind — loky's resource
// tracker deletes a killed joblib parent's folder once the pool workers that
// share its pipe have exited. The audit then lets the trial's remaining
// processes run up to that bound before killing them and listing what is
// left; what is still there was not cleaned within the bound. A folder or
// file whose creator was killed and that is gone by the audit was cleaned by
// someone else: that is the eventual cleanup this bound is about.
#include <fmt/format.h>

#include <algorithm>
#include <csignal>

#include "checker.h"
#include "checkers/history_queries.h"

namespace harness {
namespace {

// Whether the exit of a killed holder came from a kill of its tree.
bool killed_with_tree(const History& h, const checks::RankHold& r) {
  for (const Fault& f : h.faults) {
    if (f.signal == SIGKILL && f.tree && checks::aims_at(f, r.job, r.rank, r.pid)) return true;
  }
  return false;
}

// The path the audit lists a leftover under: /dev/shm entries by name, lock
// dir entries by path.
bool listed(const History& h, const std::string& path) {
  for (const auto& n : h.audit.leftover_shm) {
    if (checks::under(path, "/dev/shm/" + n)) return true;
  }
  for (const auto& n : h.audit.leftover_locks) {
    if (checks::under(path, n)) return true;
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
    for (const auto* names : {&h.audit.leftover_shm, &h.audit.leftover_locks}) {
      for (const auto& n : *names) {
        if (checks::name_prefix(h, n) == j.prefix) list += (list.empty() ? "" : ", ") + n;
      }
    }
    if (!list.empty()) {
      rep.invalid(fmt::format("job {}'s holders of prefix {} (pids {}) were killed alone, their resource trackers "
                              "alive, yet after the trial {} remained: a tracker frees its process's prefix and "
                              "removes its names once nobody else holds it",
                              j.job, j.prefix, j.pids(), list));
    }
  }
}

// Who created a leftover folder or file, for the problem text.
std::string creator_of(const History& h, const std::string& name) {
  for (const Op& op : h.ops) {
    if ((op.op != "folder" && op.op != "file") || op.outcome != Outcome::kOk || !op.segment) continue;
    const std::string& path = op.segment->name;
    if (path != "/dev/shm/" + name && path != name) continue;
    const Exit* e = checks::exit_of(h, op.job, op.rank, op.pid);
    std::string end = e == nullptr ? "never reaped"
                      : e->signal > 0 ? fmt::format("killed at {}", checks::at(h, e->t))
                                      : fmt::format("exited at {}", checks::at(h, e->t));
    return fmt::format(" ({} by {} at {}, {})", op.op, checks::who(op), checks::at(h, op.complete_t), end);
  }
  return "";
}

CheckResult check_cleanup_no_leak(const History& h) {
  checks::Report rep("cleanup.no-leak");
  // Without a private /dev/shm, what appeared in the machine's own outside
  // the trial's root stays there for good: never lost silently, though
  // nobody can tell the subject's from another program's.
  if (!h.audit.shared_shm_new.empty()) {
    std::string list;
    for (const auto& n : h.audit.shared_shm_new) list += (list.empty() ? "" : ", ") + n;
    rep.unknown(fmt::format("new in the shared /dev/shm during the trial, outside its name root, and still "
                            "there (not removed: it may be another program's): {}",
                            list));
  }
  if (!h.meta.cleanup_step) {
    check_tracker_reaped(h, rep);
    return rep.take();
  }
  if (!h.audit.ran) {
    rep.unknown("no audit ran after the cleanup step, so leftovers are unknown");
    return rep.take();
  }
  const auto foreign = checks::foreign_names(h);
  const bool eventual = h.audit.straggler_wait_ns > 1'000'000'000LL;
  const std::string after =
      eventual ? fmt::format(" and {} for the trial's remaining processes to clean up ({})",
                             checks::ms(h.audit.straggler_wait_ns),
                             h.audit.stragglers_exited.value_or(false) ? "they all exited by then"
                                                                       : "killed at its end")
               : "";
  auto report = [&](const std::vector<std::string>& names, const char* where) {
    std::string list;
    for (const auto& n : names) {
      if (foreign.contains(n)) {
        rep.reach("foreign-entry-kept");
        continue;
      }
      list += (list.empty() ? "" : ", ") + n + creator_of(h, n);
    }
    if (!list.empty())
      rep.invalid(fmt::format("left in {} after the cleanup step{}: {}", where, after, list));
  };
  report(h.audit.leftover_shm, "/dev/shm");
  report(h.audit.leftover_locks, "the lock dir");

  // What a killed creator left and someone else cleaned by the audit.
  for (const Op& op : h.ops) {
    if ((op.op != "folder" && op.op != "file") || op.outcome != Outcome::kOk || !op.segment) continue;
    const Exit* e = checks::exit_of(h, op.job, op.rank, op.pid);
    if (e == nullptr || e->signal <= 0 || listed(h, op.segment->name)) continue;
    const bool removed_itself = std::any_of(h.ops.begin(), h.ops.end(), [&](const Op& r) {
      return r.op == "remove" && r.pid == op.pid && r.job == op.job && r.rank == op.rank &&
             r.outcome == Outcome::kOk && checks::under(op.segment->name, checks::json_string(r.args, "name"));
    });
    if (removed_itself) continue;
    rep.reach("cleaned-after-holder-killed");
    if (h.audit.settled_t && *h.audit.settled_t > e->t + 1'000'000'000LL) rep.reach("cleaned-eventually");
  }
  if (eventual && h.audit.stragglers_exited.value_or(false)) rep.reach("stragglers-exited-in-bound");
  return rep.take();
}

}  // namespace
}  // namespace harness

SHMSTRESS_REGISTER_CHECKER(
    "cleanup.no-leak",
    "after the trial and its cleanup (and deadlines.cleanup for what dead holders left) nothing of it remains in "
    "/dev/shm or the lock dir",
    harness::check_cleanup_no_leak,
    {"foreign-entry-kept", "killed-alone-tracker-reaps", "cleaned-after-holder-killed", "cleaned-eventually",
     "stragglers-exited-in-bound"});
