// pool-worker-kill: a pool worker of a rank dies mid-task with its memmapped
// arrays mapped, as the OOM killer or a segfault ends one. A pool worker is not
// a rank: the rank's subject started it (joblib's loky workers), so the
// supervisor cannot aim a signal at it. The injector tells the rank's subject
// (SHMSTRESS_POOL_WORKER_KILL = {"task": k, "delay_ms": d}) and the worker
// running task k SIGKILLs itself d ms into it; the supervisor logs the fault at
// the trial start (an instant with signal 0, like emfile). The subject's pool
// call then reports the death (worker-died). Params: job, rank (random if
// absent), task (default 0), delay (range, default "100-300ms").
#include <nlohmann/json.hpp>

#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"job", "rank", "task", "delay"})) return e;
  int task = 0;
  if (auto e = param_int(f, "task", 0, 0, 100000, &task)) return e;
  MsRange delay;
  if (auto e = param_range(f, "delay", MsRange{Ms(100), Ms(300)}, &delay)) return e;
  int job, rank;
  if (auto e = pick_target(f, s, rng, &job, &rank)) return e;
  const std::int64_t delay_ms = pick_ns(rng, delay) / 1'000'000;
  const nlohmann::json spec = {{"task", task}, {"delay_ms", delay_ms}};
  for (auto& w : p.workers) {
    if (w.job == job && w.rank == rank) w.env["SHMSTRESS_POOL_WORKER_KILL"] = spec.dump();
  }
  p.actions.push_back(Action{0, job, rank, 0, "pool-worker-kill", "instant", spec});
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("pool-worker-kill",
                            "a pool worker of a rank (joblib's loky worker) SIGKILLs itself in the middle of task k",
                            plan);

}  // namespace harness
