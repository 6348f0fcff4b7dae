// cleanup.safety: cleanup never removes a resource whose owner is alive,
// including a stopped (SIGSTOP) owner, and never another user's (DESIGN §4).
//
// A removed name belongs to the prefix of its "\d{6}_" token; the registry
// segment belongs to every holder. Removing it is invalid when some rank
// certainly held that prefix for the whole cleanup op (acquired before it
// started, neither released nor dead before it ended), or when a rank
// acquired the prefix *during* the cleanup and held it past its end while
// nothing of that prefix could have existed before (no earlier hold of it,
// by another job or by another rank of its own, nothing seeded under it):
// then the name was the new holder's. Valid when a hold only overlaps the
// cleanup op otherwise. Names a fault seeded as another user's must never be
// removed. A cleanup whose report was truncated cannot be judged in full:
// unknown.
//
// Witnesses (docs/worker-protocol.md): a rank that created a segment reports,
// before releasing and at the end, whether it is still there and the same
// object. Missing or replaced while its creator still held the prefix is
// invalid whoever removed it — a cleanup, a tracker, another job's sweep.
// A pool subject's folders and files (joblib) are held by the pool call they
// were created in: its `live` witnesses while that call runs must find them
// intact, unless the process itself had begun removing them (its own
// delete_folder, its tracker told to drop them): one pool's cleanup never
// removes another live pool's folder or files.
//
// At a cut (judges_cuts; docs/architecture.md, "Judging a running trial"):
// a hold still running there is certain only up to its holder's last sign of
// life (history_queries.cc), so a removal is called invalid only once the
// holder spoke after it; and no hold "began with nothing before it" while an
// acquire begun before it is still open at the cut.
#include <fmt/format.h>

#include "checker.h"
#include "checkers/history_queries.h"

#include <algorithm>
#include <set>

namespace harness {
namespace {

using checks::RankHold;

std::string holder(const History& h, const RankHold& r) {
  return fmt::format("{} (acquired {}, holding until {})", checks::who(r.job, r.rank, r.pid),
                     checks::at(h, r.sure_start), checks::at(h, r.sure_end));
}

// Whether rank `r`'s hold (in job hold `j`) is the first of its prefix in the
// trial and nothing was seeded under it: whatever existed under the prefix
// then was its own. An earlier hold of another job, or of another rank of its
// own job (one killed holding it, whose names a cleanup may then remove),
// means the prefix had a past. A rank of `j` that began later is judged on its own.
bool first_of_its_prefix(const History& h, const std::vector<checks::JobHold>& holds,
                         const checks::JobHold& j, const RankHold& r, const std::set<int>& seeded) {
  if (seeded.contains(j.prefix)) return false;
  for (const auto& other : holds) {
    if (&other != &j && other.prefix == j.prefix && other.maybe_start <= j.maybe_start) return false;
  }
  for (const RankHold& other : j.ranks) {
    if (&other != &r && other.maybe_start < r.sure_start) return false;
  }
  // Ranks cut off mid-acquire in another job may have claimed it first.
  // At a cut (History::cut_t), any acquire still open there, of any job, may
  // yet return this prefix and be the hold the whole record puts first.
  for (const Op& op : h.ops) {
    if (op.op == "acquire" && op.outcome == Outcome::kInfo && op.job != j.job &&
        op.invoke_t < j.maybe_start) {
      return false;
    }
    if (h.cut_t && op.op == "acquire" && op.info_cause == kCauseCut && op.invoke_t < r.sure_start)
      return false;
  }
  return true;
}

// The hold of one dataset that worker (job, rank, pid) certainly had at t.
const checks::RankHold* hold_at(const std::vector<checks::JobHold>& holds, int job, int rank,
                                int pid, std::int64_t dataset, std::int64_t t) {
  for (const auto& j : holds) {
    for (const auto& r : j.ranks) {
      if (r.certain && r.job == job && r.rank == rank && r.pid == pid && r.sure_start <= t &&
          t <= r.sure_end && r.acquire != nullptr && checks::dataset_of(*r.acquire) == dataset) {
        return &r;
      }
    }
  }
  return nullptr;
}

// Who reported removing `name` between `from` and `to`: a cleanup, an
// acquire's sweep, or another pool's own delete (a `remove` of it or of a
// folder holding it).
std::string removed_by(const History& h, const std::string& name, std::int64_t from,
                       std::int64_t to) {
  for (const Op& op : h.ops) {
    if ((op.op != "clean" && op.op != "remove" && op.op != "acquire") || op.complete_t < from ||
        op.invoke_t > to) {
      continue;
    }
    if (op.op != "remove" && op.outcome != Outcome::kOk) continue;
    bool named = std::find(op.removed.begin(), op.removed.end(), name) != op.removed.end();
    if (op.op == "remove") named = named || checks::under(name, checks::json_string(op.args, "name"));
    if (named) {
      return fmt::format("the {} by {} ({} to {}) reported removing it",
                         op.op == "clean" ? "cleanup" : op.op == "acquire" ? "acquire" : "delete",
                         checks::who(op),
                         checks::at(h, op.invoke_t), checks::at(h, op.complete_t));
    }
  }
  return "no cleanup reported removing it (a sweep, a tracker, another job's exit?)";
}

bool creates(const Op& op) { return op.op == "segment" || op.op == "folder" || op.op == "file"; }

void check_witnesses(const History& h, checks::Report& rep) {
  const auto holds = checks::prefix_holds(h);
  for (const Op& w : h.ops) {
    if (w.op != "witness" || w.outcome != Outcome::kOk) continue;
    const std::string by = fmt::format("{} witnessing at {} ({})", checks::who(w),
                                       checks::at(h, w.invoke_t), w.witness_when);
    if (w.truncated) rep.unknown(fmt::format("the report of {} was truncated", by));
    // Its own release (of the same dataset) came first: it no longer holds,
    // nothing to judge.
    const std::int64_t dataset = checks::dataset_of(w);
    bool released = false;
    for (const Op& op : h.ops) {
      released = released || (op.op == "release" && op.job == w.job && op.rank == w.rank &&
                               op.pid == w.pid && op.invoke_t < w.invoke_t &&
                               op.outcome != Outcome::kFail && checks::dataset_of(op) == dataset);
    }
    if (released) continue;
    for (const Sighting& s : w.sightings) {
      const Op* made = nullptr;
      for (const Op& op : h.ops) {
        if (creates(op) && op.outcome == Outcome::kOk && op.segment &&
            op.segment->name == s.name && op.job == w.job && op.rank == w.rank &&
            op.pid == w.pid && op.complete_t <= w.invoke_t && checks::dataset_of(op) == dataset) {
          made = &op;  // the latest creation before the witness
        }
      }
      if (made == nullptr) {
        rep.unknown(fmt::format("{} reported {}, which it never reported creating", by, s.name));
        continue;
      }
      const checks::RankHold* held = hold_at(holds, w.job, w.rank, w.pid, dataset, made->complete_t);
      const Op* pool = held == nullptr ? checks::pool_holding(h, *made) : nullptr;
      // Not created under a certain hold, or witnessed after its pool ended: nothing promised.
      if (held == nullptr && (pool == nullptr || w.complete_t > pool->complete_t)) continue;
      if (pool != nullptr && checks::removing_itself(h, w, s.name)) continue;  // its own cleanup
      const std::string what =
          held != nullptr
              ? fmt::format("segment {} that {} created at {} while holding prefix {}", s.name,
                            checks::who(w), checks::at(h, made->complete_t), held->prefix)
              : fmt::format("{} {} that {} created at {} inside its pool (invoked {})", made->op,
                            s.name, checks::who(w), checks::at(h, made->complete_t),
                            checks::at(h, pool->invoke_t));
      const char* holding = held != nullptr ? "still holding the prefix" : "its pool still running";
      switch (s.state) {
        case Sighting::State::kError:
          rep.unknown(fmt::format("{}: {} could not be observed ({})", by, what, s.error));
          break;
        case Sighting::State::kMissing:
          rep.reach("witness-saw-removal");
          rep.invalid(fmt::format("{} was gone when its creator, {}, "
                                  "witnessed it at {}: removed under a live holder; {}",
                                  what, holding, checks::at(h, w.complete_t),
                                  removed_by(h, s.name, made->complete_t, w.complete_t)));
          break;
        case Sighting::State::kPresent:
          if (made->segment->dev && made->segment->ino &&
              (*made->segment->dev != s.dev || *made->segment->ino != s.ino)) {
            rep.reach("witness-saw-removal");
            rep.invalid(fmt::format(
                "{} (dev {} ino {}) was another object (dev {} ino {}) when its creator, {}, "
                "witnessed it at {}: removed and re-created under a live holder; {}",
                what, *made->segment->dev, *made->segment->ino, s.dev, s.ino, holding,
                checks::at(h, w.complete_t),
                removed_by(h, s.name, made->complete_t, w.complete_t)));
          } else {
            rep.reach(held != nullptr ? "witness-segment-intact" : "pool-witness-intact");
          }
          break;
      }
    }
  }
}

// Two pools of different processes ran at once, each with something created inside.
void note_pools(const History& h, checks::Report& rep) {
  // The pools something was created in: one look per creation.
  std::set<const Op*> pools;
  for (const Op& c : h.ops) {
    if (!creates(c) || c.outcome != Outcome::kOk) continue;
    if (const Op* pool = checks::pool_holding(h, c)) pools.insert(pool);
  }
  for (const Op* a : pools) {
    for (const Op* b : pools) {
      if (a->pid != b->pid && checks::overlaps(a->invoke_t, a->complete_t, b->invoke_t, b->complete_t)) {
        rep.reach("pools-overlapped");
      }
    }
  }
}

CheckResult check_cleanup_safety(const History& h) {
  checks::Report rep("cleanup.safety");
  note_pools(h, rep);
  const auto holds = checks::prefix_holds(h);
  const auto owners = checks::foreign_owners(h);
  const auto seeded = checks::seeded_prefixes(h);
  for (const Op& clean : h.ops) {
    if (clean.op != "clean" || clean.outcome != Outcome::kOk) continue;
    if (!clean.kept.empty()) rep.reach("cleanup-kept-something");
    // A cleanup that ran wholly while a process of another job was stopped
    // (mid-acquire, between opening a file and locking it, ...): whatever
    // that process opened but did not hold yet was the cleanup's to judge.
    for (const Fault& f : h.faults) {
      if (checks::is_stop(f) && f.job >= 0 && f.job != clean.job && f.start_t <= clean.invoke_t &&
          clean.complete_t <= f.end_t) {
        rep.reach("cleanup-inside-pause");
      }
    }

    // What the cleanup ran next to: live holders, stopped ones.
    for (const auto& j : holds) {
      for (const RankHold& r : j.ranks) {
        if (!r.certain || r.sure_start > clean.invoke_t || r.sure_end < clean.complete_t) continue;
        rep.reach("cleanup-while-owner-alive");
        if (checks::stop_window_at(h, r.job, r.rank, r.pid, clean.complete_t) != nullptr) {
          rep.reach("cleanup-while-owner-stopped");
        }
      }
    }

    const std::string by =
        fmt::format("cleanup by {} ({} to {})", checks::who(clean), checks::at(h, clean.invoke_t),
                    checks::at(h, clean.complete_t));
    if (clean.truncated) {
      rep.unknown(fmt::format("the report of the {} was truncated: what it removed is not known "
                              "in full",
                              by));
    }
    // A lock a fault's helper held (stopped, or through an inherited fd) is a
    // live owner's for the whole window: removing it then is unsafe. The
    // removal happened somewhere in the cleanup op; only a cleanup that began
    // and ended inside the window certainly removed it while held (one that
    // waited for the lock and took it after the release did nothing wrong).
    for (const Fault& f : h.faults) {
      if (!f.protect || !f.detail.is_object()) continue;
      std::string held = checks::json_string(f.detail, "path");
      if (held.empty()) held = checks::json_string(f.detail, "name");
      if (held.empty() || !checks::overlaps(f.start_t, f.end_t, clean.invoke_t, clean.complete_t + 1)) continue;
      const bool inside = f.start_t <= clean.invoke_t && clean.complete_t <= f.end_t;
      for (const std::string& name : clean.removed) {
        if (name == held && inside) {
          std::string holder = checks::json_string(f.detail, "held_by");
          rep.invalid(fmt::format("{} removed {} while it was held by a live process ({})", by, name,
                                  holder.empty() ? "a live holder" : holder));
        }
      }
      for (const std::string& name : clean.kept) {
        if (name == held) rep.reach("cleanup-kept-held-lock");
      }
    }
    const int cleaner = checks::worker_uid(h, clean.job, clean.rank, clean.pid);
    for (const std::string& name : clean.removed) {
      if (auto owner = owners.find(name); owner != owners.end() && owner->second != cleaner) {
        rep.invalid(fmt::format("{} removed {}, which belongs to another user", by, name));
        continue;
      }
      const int prefix = checks::name_prefix(h, name);
      const bool registry = prefix < 0 && checks::is_registry_name(name);
      if (prefix < 0 && !registry) continue;
      if (prefix >= 0) rep.reach("cleanup-removed-prefix-entry");
      const int registry_ns = registry ? checks::registry_namespace(h, name) : -1;
      for (const auto& j : holds) {
        if (!registry && j.prefix != prefix) continue;
        if (registry && j.prefix / kNamespaceStride != registry_ns) continue;  // another namespace's registry
        for (const RankHold& r : j.ranks) {
          const Fault* stop = checks::stop_window_at(h, r.job, r.rank, r.pid, clean.complete_t);
          std::string stopped =
              stop == nullptr ? ""
                              : fmt::format(", stopped from {} to {}", checks::at(h, stop->start_t),
                                            checks::at(h, stop->end_t));
          if (r.certain && r.sure_start <= clean.invoke_t && r.sure_end >= clean.complete_t) {
            rep.invalid(fmt::format("{} removed {} while {} held prefix {}{}", by, name,
                                    holder(h, r), j.prefix, stopped));
          } else if (!registry && r.certain && r.sure_start > clean.invoke_t &&
                     r.sure_start <= clean.complete_t && r.sure_end >= clean.complete_t &&
                     first_of_its_prefix(h, holds, j, r, seeded)) {
            rep.invalid(fmt::format(
                "{} removed {} while {} held prefix {}{}: the hold began during the cleanup, "
                "and nothing of prefix {} existed before it (no earlier holder, nothing seeded), "
                "so the name was the new holder's",
                by, name, holder(h, r), j.prefix, stopped, j.prefix));
          }
          // A hold that only partly overlaps the cleanup (its acquire, release
          // or death in flight) has a valid order: the removal came after it.
        }
      }
    }
  }
  check_witnesses(h, rep);
  return rep.take();
}

}  // namespace
}  // namespace harness

SHMSTRESS_REGISTER_CHECKER(
    "cleanup.safety",
    "cleanup never removes a resource of a live (or stopped) owner, nor another user's",
    harness::check_cleanup_safety,
    {"cleanup-kept-something", "cleanup-while-owner-alive", "cleanup-while-owner-stopped",
     "cleanup-removed-prefix-entry", "cleanup-kept-held-lock", "witness-segment-intact",
     "witness-saw-removal", "cleanup-inside-pause", "pool-witness-intact", "pools-overlapped"},
    /*judges_cuts=*/true);
