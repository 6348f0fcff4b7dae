// prefix.unique: no two live jobs hold the same prefix at the same time; a
// holder that died without releasing keeps counting as holding until something
// shows its resources gone (DESIGN §4).
//
// Verdicts, from the holds in checkers/history_queries.h:
// - invalid: two jobs *certainly* held one prefix at one moment (between their
//   acquires returning ok and their releases being invoked / their last sign
//   of life);
// - valid: they overlap only where an acquire or release was still in flight
//   (a linearization exists that hands the prefix over);
// - invalid too: one job's hold is the stale remainder of a dead job, and the
//   other job's grant lists (in "present") a segment the dead job created —
//   the same object by dev/ino, or, without them, a name the new job had not
//   created yet: the dead job's resources were certainly still there;
// - invalid too: one process certainly held one prefix for two of its datasets
//   at one moment (train and val under one job key): each is a holder of its
//   own, and releasing either frees the prefix under the other;
// - unknown: one job's hold is the stale remainder of a dead job that no
//   cleanup, restart or fresh grant (the worker saw nothing of the prefix
//   left when it got it) shows to be gone, and nothing shows it still there.
//
// At a cut (judges_cuts): the two-holder rules, as for exclusive-local (holds
// still running are certain up to their holders' last sign of life); the
// stale remainder of a dead job is not judged there.
#include <fmt/format.h>

#include "checker.h"
#include "checkers/history_queries.h"

namespace harness {
namespace {

using checks::JobHold;

std::string span(const History& h, const JobHold& j, std::int64_t from, std::int64_t to) {
  return fmt::format("job {} (pids {}) from {} to {}", j.job, j.pids(), checks::at(h, from),
                     checks::at(h, to));
}

// A segment the dead job created that `acq` (a grant of the same prefix to
// another job) listed as present, or nullptr.
const Op* dead_segment_seen(const History& h, const JobHold& dead, const Op& acq) {
  for (const SegmentRef& seen : acq.present) {
    for (const Op& made : h.ops) {
      if (made.op != "segment" || made.outcome != Outcome::kOk || !made.segment ||
          made.job != dead.job || made.segment->name != seen.name ||
          made.complete_t > dead.maybe_end || made.invoke_t < dead.maybe_start) {
        continue;
      }
      if (seen.dev && made.segment->dev) {
        if (seen.same_object(*made.segment)) return &made;
        continue;  // the same name, another object: the new job's own
      }
      bool own = false;  // the new job may have created that name already
      for (const Op& mine : h.ops) {
        own = own || (mine.op == "segment" && mine.job == acq.job && mine.segment &&
                      mine.segment->name == seen.name && mine.invoke_t <= acq.complete_t);
      }
      if (!own) return &made;
    }
  }
  return nullptr;
}

CheckResult check_prefix_unique(const History& h) {
  checks::Report rep("prefix.unique");
  for (const Op& op : h.ops) {
    if (op.op == "acquire" && op.outcome == Outcome::kInfo && op.info_cause != kCauseTrialTimeout) {
      rep.reach("killed-during-acquire");
      // Killed while (probably) blocked on the registry lock that its pid
      // twin in another container held, stopped inside it.
      for (const Fault& f : h.faults) {
        if (f.kind == "pause-at-point" && f.job != op.job && f.pid == op.pid && f.start_t < op.invoke_t &&
            op.complete_t < f.end_t && checks::json_string(f.detail, "point").starts_with("crash/registry/")) {
          rep.reach("pid-twin-killed-blocked");
        }
      }
    }
  }
  for (const Op& a : h.ops) {  // the race the registry exists to win
    if (a.op != "acquire") continue;
    for (const Op& b : h.ops) {
      if (b.op == "acquire" && b.job > a.job &&
          checks::overlaps(a.invoke_t, a.complete_t, b.invoke_t, b.complete_t)) {
        rep.reach("concurrent-acquires");
      }
    }
  }
  const auto seeded = checks::seeded_prefixes(h);
  for (const Op& op : h.ops) {
    if (op.op == "acquire" && op.outcome == Outcome::kOk && op.prefix && seeded.contains(*op.prefix)) {
      rep.reach("prefix-granted-over-seeded-leftovers");
    }
  }
  std::vector<JobHold> holds = checks::prefix_holds(h);
  for (const JobHold& j : holds) {
    for (const checks::RankHold& r : j.ranks) {
      if (r.certain && r.end == checks::RankHold::End::kKilled) rep.reach("killed-holding-prefix");
    }
  }
  // Two datasets of one process: their holds of one prefix land in one job hold.
  std::vector<const checks::RankHold*> all;
  for (const JobHold& j : holds) {
    for (const checks::RankHold& r : j.ranks) {
      if (r.certain && r.acquire != nullptr) all.push_back(&r);
    }
  }
  for (std::size_t a = 0; a < all.size(); ++a) {
    for (std::size_t b = a + 1; b < all.size(); ++b) {
      const checks::RankHold& x = *all[a];
      const checks::RankHold& y = *all[b];
      if (x.job != y.job || x.rank != y.rank || x.pid != y.pid ||
          checks::dataset_of(*x.acquire) == checks::dataset_of(*y.acquire) ||
          !checks::overlaps(x.sure_start, x.sure_end, y.sure_start, y.sure_end)) {
        continue;
      }
      rep.reach("datasets-held-at-once");
      if (x.prefix != y.prefix) continue;
      rep.invalid(fmt::format(
          "prefix {} held twice by {}: for dataset {} from {} to {} and for dataset {} from {} to "
          "{} (both acquires returned ok; releasing either frees it under the other)",
          x.prefix, checks::who(x.job, x.rank, x.pid), checks::dataset_of(*x.acquire),
          checks::at(h, x.sure_start), checks::at(h, x.sure_end), checks::dataset_of(*y.acquire),
          checks::at(h, y.sure_start), checks::at(h, y.sure_end)));
    }
  }
  for (std::size_t a = 0; a < holds.size(); ++a) {
    for (std::size_t b = a + 1; b < holds.size(); ++b) {
      const JobHold& x = holds[a];
      const JobHold& y = holds[b];
      if (x.prefix != y.prefix || x.job == y.job) continue;
      if (x.has_sure() && y.has_sure() &&
          checks::overlaps(x.sure_start, x.sure_end, y.sure_start, y.sure_end)) {
        rep.invalid(fmt::format(
            "prefix {} held by {} and by {} at the same time (both acquires returned ok)", x.prefix,
            span(h, x, x.sure_start, x.sure_end), span(h, y, y.sure_start, y.sure_end)));
        continue;
      }
      if (checks::overlaps(x.maybe_start, x.maybe_end, y.maybe_start, y.maybe_end)) {
        // Only an in-flight acquire or release overlaps: some order of those
        // operations hands the prefix over cleanly, so the history is valid.
        rep.reach("prefix-handover-in-flight");
        continue;
      }
      // A dead job's stale remainder is not judged at a cut: what ends it (a
      // cleanup, a fresh grant, an acquire still in flight at the cut) may be
      // on record only after it, and end it earlier than the cut shows.
      if (h.cut_t) continue;
      bool stale_clash = false;
      for (const auto& [dead, live] : {std::pair{&x, &y}, std::pair{&y, &x}}) {
        if (!dead->died_holding || !checks::overlaps(dead->maybe_end, dead->stale_end,
                                                     live->maybe_start, live->maybe_end)) {
          continue;
        }
        const Op* evidence = nullptr;
        const Op* grant = nullptr;
        for (const checks::RankHold& r : live->ranks) {
          if (!r.certain || r.acquire == nullptr || r.acquire->truncated) continue;
          if (r.acquire->complete_t < dead->maybe_end || r.acquire->invoke_t > dead->stale_end) continue;
          if ((evidence = dead_segment_seen(h, *dead, *r.acquire))) {
            grant = r.acquire;
            break;
          }
        }
        if (evidence != nullptr) {
          stale_clash = true;
          rep.reach("prefix-granted-over-dead-holder");
          rep.invalid(fmt::format(
              "prefix {} was granted to {} at {} while segment {} of job {} (pids {}), which {} "
              "holding it by {}, was still there (the grant's present list shows it): the dead "
              "job still held the prefix",
              x.prefix, checks::who(*grant), checks::at(h, grant->complete_t),
              evidence->segment->name, dead->job, dead->pids(),
              dead->killed ? "was killed" : "exited", checks::at(h, dead->maybe_end)));
          continue;
        }
        if (!live->has_sure() || !checks::overlaps(dead->maybe_end, dead->stale_end,
                                                   live->sure_start, live->sure_end)) {
          // Only the live job's acquires in flight meet the time nothing yet
          // shows the dead job's names gone: some order (the grant after they
          // went) is clean, as with two live holds that meet only in flight.
          // (30-min soak, crash-points trial 237: one rank's acquire began
          // 0.2 ms before another's, whose grant saw nothing left, was.)
          rep.reach("prefix-handover-in-flight");
          continue;
        }
        stale_clash = true;
        rep.unknown(
            fmt::format("prefix {}: every holder of job {} (pids {}) {} holding it by {} and {}, "
                        "yet {} held it from {}: "
                        "nothing shows the dead job's resources were gone",
                        x.prefix, dead->job, dead->pids(), dead->killed ? "was killed" : "exited",
                        checks::at(h, dead->maybe_end), dead->stale_ended_by,
                        fmt::format("job {} (pids {})", live->job, live->pids()),
                        checks::at(h, live->sure_start)));
      }
      if (stale_clash) continue;
      rep.reach("prefix-reused");
      const JobHold& first = x.maybe_start <= y.maybe_start ? x : y;
      if (first.died_holding) rep.reach("prefix-reclaimed-from-dead-job");
    }
  }
  return rep.take();
}

}  // namespace
}  // namespace harness

SHMSTRESS_REGISTER_CHECKER(
    "prefix.unique",
    "no two live jobs hold the same prefix at once; a killed holder holds until cleaned",
    harness::check_prefix_unique,
    {"killed-during-acquire", "killed-holding-prefix", "prefix-reused",
     "prefix-reclaimed-from-dead-job", "prefix-handover-in-flight",
     "prefix-granted-over-dead-holder", "concurrent-acquires",
     "prefix-granted-over-seeded-leftovers", "datasets-held-at-once", "pid-twin-killed-blocked"},
    /*judges_cuts=*/true);
