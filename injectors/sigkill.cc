// sigkill: SIGKILL chosen ranks at seeded random times after the trial start.
// Params: job, rank (random if absent), at = "10-200ms", count = distinct ranks
// to kill (default 1; with `job` and no `rank`, ranks of that job).
#include <csignal>

#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"job", "rank", "at", "count"})) return e;
  MsRange at;
  if (auto e = param_range(f, "at", MsRange{Ms(0), Ms(200)}, &at)) return e;
  std::vector<std::pair<int, int>> chosen;
  if (auto e = pick_distinct_targets(f, s, rng, f.params.value("count", 1), &chosen)) return e;
  for (auto [job, rank] : chosen) {
    p.actions.push_back(Action{pick_ns(rng, at), job, rank, SIGKILL, "sigkill", "instant", {}});
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("sigkill", "SIGKILL chosen or random ranks at seeded random times", plan);

}  // namespace harness
