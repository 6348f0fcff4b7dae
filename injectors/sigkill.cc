// sigkill: SIGKILL chosen ranks at seeded random times after the trial start.
// Params: job, rank (random if absent), at = "10-200ms", count = distinct ranks
// to kill (default 1; with `job` and no `rank`, ranks of that job), tree = true
// to kill each target's whole process tree (its process group: the worker and
// every child it started, e.g. CPython's resource tracker) as an OOM kill, a
// container stop or torchrun's killpg does, together = true to kill every
// target at the same instant (one time drawn from `at`). worker = n kills the
// rank's loader worker #n instead, target = "launcher" the job's launcher.
#include <csignal>

#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"job", "rank", "at", "count", "tree", "together", "worker", "target"})) return e;
  MsRange at;
  if (auto e = param_range(f, "at", MsRange{Ms(0), Ms(200)}, &at)) return e;
  int count = 1;
  if (auto e = param_int(f, "count", 1, 1, 256, &count)) return e;
  bool tree = false, together = false;
  if (auto e = param_bool(f, "tree", false, &tree)) return e;
  if (auto e = param_bool(f, "together", false, &together)) return e;
  std::vector<std::pair<int, int>> chosen;
  if (auto e = pick_distinct_targets(f, s, rng, count, &chosen)) return e;
  const std::int64_t once = pick_ns(rng, at);
  for (auto [job, rank] : chosen) {
    Action a{together ? once : pick_ns(rng, at), job, rank, SIGKILL, "sigkill", "instant", {}};
    if (auto e = pick_process(f, s, job, &a)) return e;
    a.tree = tree;
    if (tree) a.detail["tree"] = true;
    p.actions.push_back(std::move(a));
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("sigkill",
                            "SIGKILL chosen or random ranks (or their whole process trees) at seeded random times",
                            plan);

}  // namespace harness
