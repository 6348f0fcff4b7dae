// cleanup.safety: cleanup never removes a resource whose owner is alive,
// including a stopped (SIGSTOP) owner, and never another user's (DESIGN §4).
//
// A removed name belongs to the prefix of its "\d{6}_" token; the registry
// segment belongs to every holder. Removing it is invalid when some rank
// certainly held that prefix for the whole cleanup op (acquired before it
// started, neither released nor dead before it ended); valid when a hold
// only overlaps the cleanup op. Names a fault seeded as another user's must
// never be removed.
#include <fmt/format.h>

#include "checker.h"
#include "checkers/common.h"

namespace harness {
namespace {

using checks::RankHold;

std::string holder(const History& h, const RankHold& r) {
  return fmt::format("{} (acquired {}, holding until {})", checks::who(r.job, r.rank, r.pid),
                     checks::at(h, r.sure_start), checks::at(h, r.sure_end));
}

CheckResult check_cleanup_safety(const History& h) {
  checks::Report rep("cleanup.safety");
  const auto holds = checks::prefix_holds(h);
  const auto foreign = checks::foreign_names(h);
  for (const Op& clean : h.ops) {
    if (clean.op != "clean" || clean.outcome != Outcome::kOk) continue;
    if (!checks::json_strings(clean.value, "kept").empty()) rep.reach("cleanup-kept-something");

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
    // A lock a fault's helper held (stopped, or through an inherited fd) is a
    // live owner's for the whole window: removing it then is unsafe.
    for (const Fault& f : h.faults) {
      if (!f.detail.is_object() || !f.detail.value("protect", false)) continue;
      std::string held = f.detail.value("path", f.detail.value("name", std::string()));
      if (held.empty() || !checks::overlaps(f.start_t, f.end_t, clean.invoke_t, clean.complete_t + 1)) continue;
      for (const std::string& name : checks::json_strings(clean.value, "removed")) {
        if (name == held) {
          rep.invalid(fmt::format("{} removed {} while it was held by a live process ({})", by, name,
                                  f.detail.value("held_by", std::string("a live holder"))));
        }
      }
      for (const std::string& name : checks::json_strings(clean.value, "kept")) {
        if (name == held) rep.reach("cleanup-kept-held-lock");
      }
    }
    for (const std::string& name : checks::json_strings(clean.value, "removed")) {
      if (foreign.contains(name)) {
        rep.invalid(fmt::format("{} removed {}, which belongs to another user", by, name));
        continue;
      }
      const int prefix = checks::name_prefix(name);
      const bool registry = prefix < 0 && checks::is_registry_name(name);
      if (prefix < 0 && !registry) continue;
      if (prefix >= 0) rep.reach("cleanup-removed-prefix-entry");
      for (const auto& j : holds) {
        if (!registry && j.prefix != prefix) continue;
        for (const RankHold& r : j.ranks) {
          const Fault* stop = checks::stop_window_at(h, r.job, r.rank, r.pid, clean.complete_t);
          std::string stopped =
              stop == nullptr ? ""
                              : fmt::format(", stopped from {} to {}", checks::at(h, stop->start_t),
                                            checks::at(h, stop->end_t));
          if (r.certain && r.sure_start <= clean.invoke_t && r.sure_end >= clean.complete_t) {
            rep.invalid(fmt::format("{} removed {} while {} held prefix {}{}", by, name,
                                    holder(h, r), j.prefix, stopped));
          }
          // A hold that only partly overlaps the cleanup (its acquire, release
          // or death in flight) has a valid order: the removal came after it.
        }
      }
    }
  }
  return rep.take();
}

}  // namespace
}  // namespace harness

SHMSTRESS_REGISTER_CHECKER(
    "cleanup.safety",
    "cleanup never removes a resource of a live (or stopped) owner, nor another user's",
    harness::check_cleanup_safety,
    {"cleanup-kept-something", "cleanup-while-owner-alive", "cleanup-while-owner-stopped",
     "cleanup-removed-prefix-entry", "cleanup-kept-held-lock"});
