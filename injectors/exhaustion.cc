// Exhaustion. emfile: chosen workers start with a small RLIMIT_NOFILE (params
// limit, default 6; job, rank, random_rank). enospc: the trial's /dev/shm is a
// tmpfs of `size` (default "1m", smaller than a registry), so creating
// segments fails with ENOSPC — an error, never a SIGBUS.
#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan_emfile(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"limit", "job", "rank", "random_rank"})) return e;
  int limit = f.params.value("limit", 6);
  if (limit < 3 || limit > 4096) return std::string("'limit' must be in [3, 4096]");
  std::vector<WorkerPlan*> ws;
  if (auto e = pick_workers(f, s, rng, p, &ws)) return e;
  for (auto* w : ws) {
    w->nofile = limit;
    p.actions.push_back(Action{0, w->job, w->rank, 0, "emfile", "instant", {{"limit", limit}}});
  }
  return std::nullopt;
}

std::optional<std::string> plan_enospc(const FaultSpec& f, const Scenario&, Rng&, TrialPlan& p) {
  if (auto e = only_keys(f, {"size"})) return e;
  std::string size = f.params.value("size", std::string("1m"));
  if (size.empty() || size.find_first_not_of("0123456789kmg") != std::string::npos) {
    return std::string("'size' must be a tmpfs size like \"1m\" or \"512k\"");
  }
  p.shm_size = size;
  p.actions.push_back(Action{0, -1, -1, 0, "enospc", "instant", {{"shm_size", size}}});
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("emfile", "chosen workers start with a tiny RLIMIT_NOFILE (EMFILE)", plan_emfile);
SHMSTRESS_REGISTER_INJECTOR("enospc", "the trial's /dev/shm is a tiny tmpfs (ENOSPC)", plan_enospc);

}  // namespace harness
