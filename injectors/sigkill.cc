// sigkill: SIGKILL chosen ranks at seeded random times after the trial start.
// Params: job, rank (random if absent), at = "10-200ms", count = distinct ranks
// to kill (default 1; with `job` and no `rank`, ranks of that job).
#include <csignal>
#include <set>

#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"job", "rank", "at", "count"})) return e;
  MsRange at;
  if (auto e = param_range(f, "at", MsRange{Ms(0), Ms(200)}, &at)) return e;
  int count = f.params.value("count", 1);
  if (count < 1 || count > 256) return std::string("'count' must be in [1, 256]");
  std::set<std::pair<int, int>> chosen;
  for (int tries = 0; static_cast<int>(chosen.size()) < count && tries < 1000; ++tries) {
    int job, rank;
    if (auto e = pick_target(f, s, rng, &job, &rank)) return e;
    chosen.insert({job, rank});
  }
  if (static_cast<int>(chosen.size()) < count) return std::string("'count' exceeds the ranks it can choose from");
  for (auto [job, rank] : chosen) {
    p.actions.push_back(Action{pick_ns(rng, at), job, rank, SIGKILL, "sigkill", "instant", {}});
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("sigkill", "SIGKILL chosen or random ranks at seeded random times", plan);

}  // namespace harness
