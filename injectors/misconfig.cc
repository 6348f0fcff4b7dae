// misconfig: a rank configured unlike its peers. Params: what =
// "process-count" (the rank tells the barrier `count`, default ranks+1),
// "late-joiner" (the rank attaches to the barrier `delay` after acquiring,
// default 200ms), "lock-dir" (the rank's lock dir and TMPDIR differ from its
// peers': a directory the supervisor makes inside the trial's lock dir and
// removes at the heal, after auditing what is in it), "lock-dir-shm" (the
// rank's lock dir is /dev/shm itself: every shm object there looks like a
// lock file), "barrier-name" (the rank names its barrier `name` instead of
// <prefix>_barrier, default "registry": the namespace's own object, or a name
// every job shares); job, rank (default 0; rank = -1: every rank of the job). Missing and wrong local world sizes are job
// settings in the scenario (local_world_size = "missing" | N).
#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"what", "job", "rank", "count", "delay", "name"})) return e;
  std::string what;
  if (!f.params.contains("what")) {
    return std::string("'what' must be one of process-count, late-joiner, lock-dir, lock-dir-shm, barrier-name");
  }
  if (auto e = param_string(f, "what", "", {"process-count", "late-joiner", "lock-dir", "lock-dir-shm", "barrier-name"},
                            &what)) {
    return e;
  }
  std::vector<WorkerPlan*> ws;
  FaultSpec one = f;
  if (!one.params.contains("rank")) one.params["rank"] = 0;
  if (one.params["rank"] == -1) one.params.erase("rank");  // the whole job
  if (!one.params.contains("job")) one.params["job"] = 0;
  if (auto e = pick_workers(one, s, rng, p, &ws)) return e;
  nlohmann::json detail = {{"what", what}};
  for (auto* w : ws) {
    if (what == "process-count") {
      int count = 0;
      if (auto e = param_int(f, "count", s.jobs[w->job].ranks + 1, 1, 64, &count)) return e;
      w->env["SHMSTRESS_BARRIER_PROCS"] = std::to_string(count);
      detail["count"] = count;
    } else if (what == "late-joiner") {
      MsRange d;
      if (auto e = param_range(f, "delay", MsRange{Ms(200), Ms(200)}, &d)) return e;
      w->env["SHMSTRESS_ATTACH_DELAY_MS"] = std::to_string(pick_ns(rng, d) / 1000000);
      detail["delay_ms"] = w->env["SHMSTRESS_ATTACH_DELAY_MS"];
    } else if (what == "lock-dir") {
      w->lock_subdir = "elsewhere";
    } else if (what == "lock-dir-shm") {
      w->env["SHMSTRESS_LOCK_DIR_OVERRIDE"] = "/dev/shm";
    } else if (what == "barrier-name") {
      std::string name;
      if (auto e = param_string(f, "name", "registry", {}, &name)) return e;
      w->env["SHMSTRESS_BARRIER_SUFFIX"] = name;
      detail["name"] = name;
    }
    p.actions.push_back(Action{0, w->job, w->rank, 0, "misconfig", "instant", detail});
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("misconfig",
                            "a rank configured unlike its peers: process count, late joiner, lock dir (elsewhere or "
                            "/dev/shm), barrier name",
                            plan);

}  // namespace harness
