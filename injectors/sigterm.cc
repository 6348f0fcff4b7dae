// sigterm: SIGTERM a rank, one of its loader workers (worker = n) or the
// job's launcher (target = "launcher") at a seeded time: what a scheduler, a
// container stop or a user's `kill` sends first. torchrun's agent forwards it
// to its ranks (its direct children only) and SIGKILLs them 30 s later; what
// becomes of the ranks' loader workers and trackers is job.teardown's concern.
// Params: job (default 0), rank (random if absent), worker, target, at.
#include <csignal>

#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"job", "rank", "worker", "target", "at"})) return e;
  MsRange at;
  if (auto e = param_range(f, "at", MsRange{Ms(0), Ms(200)}, &at)) return e;
  FaultSpec who = f;
  if (!who.params.contains("job")) who.params["job"] = 0;
  int job, rank;
  if (auto e = pick_target(who, s, rng, &job, &rank)) return e;
  Action a{pick_ns(rng, at), job, rank, SIGTERM, "sigterm", "instant", {}};
  if (auto e = pick_process(f, s, job, &a)) return e;
  p.actions.push_back(std::move(a));
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("sigterm",
                            "SIGTERM a rank, a loader worker or the job's launcher (torchrun's agent) at a seeded time",
                            plan);

}  // namespace harness
