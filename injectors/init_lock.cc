// init-lock: shmcoord's own namespace init lock (a flock on the shm object
// "<root>init.lock", held while a segment is created or rebuilt and by the
// cleanup) held by someone else: holder = "stopped" (a SIGSTOPped process) or
// "inherited" (an fd a forgotten child of a dead process inherited), from
// before the workers start until `release` after the trial start (default:
// until the trial ends). Nobody may remove it while it is held; creating
// the registry or a barrier waits for it, up to the subject's deadline.
// Holding the robust mutexes while stopped is pause-at-point at a point
// inside their critical sections.
#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario&, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"holder", "release"})) return e;
  std::string holder;
  if (auto e = param_string(f, "holder", "stopped", {"stopped", "inherited"}, &holder)) return e;
  Seed sd;
  sd.fault = "init-lock";
  sd.where = "shm";
  sd.name = "init.lock";
  sd.held_by = holder;
  if (f.params.contains("release")) {
    MsRange release;
    if (auto e = param_range(f, "release", MsRange{}, &release)) return e;
    sd.release_at_ns = pick_ns(rng, release);
  }
  sd.detail = {{"holder", holder}, {"lock", "init"}};
  if (sd.release_at_ns >= 0) sd.detail["release_ms"] = sd.release_at_ns / 1000000;
  p.seeds.push_back(std::move(sd));
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("init-lock",
                            "shmcoord's init lock held by a stopped process or an inherited fd",
                            plan);

}  // namespace harness
