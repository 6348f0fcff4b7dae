// Exhaustion. emfile: chosen workers start with a small RLIMIT_NOFILE (params
// limit, default 6; job, rank, random_rank). enospc: the trial's /dev/shm is a
// tmpfs of `size` (default "1m", smaller than a registry), so creating
// segments fails with ENOSPC — an error, never a SIGBUS.
#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan_emfile(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"limit", "job", "rank", "random_rank"})) return e;
  int limit = 6;
  if (auto e = param_int(f, "limit", 6, 3, 4096, &limit)) return e;
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
  std::string size;
  if (auto e = param_string(f, "size", "1m", {}, &size)) return e;
  // tmpfs reads size=0 as "no limit": only a positive size is a fault. At
  // least one page, at most 1 GiB (the trial's /dev/shm lives in memory).
  const std::string why = "'size' must be a tmpfs size like \"1m\" or \"512k\" between 4k and 1g, not \"" + size + "\"";
  const auto bytes = tmpfs_size_bytes(size);
  if (!bytes || *bytes < 4096 || *bytes > (1ULL << 30)) return why;
  p.shm_size = size;
  p.actions.push_back(Action{0, -1, -1, 0, "enospc", "instant", {{"shm_size", size}}});
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("emfile", "chosen workers start with a tiny RLIMIT_NOFILE (EMFILE)", plan_emfile);
SHMSTRESS_REGISTER_INJECTOR("enospc", "the trial's /dev/shm is a tiny tmpfs (ENOSPC)", plan_enospc);

}  // namespace harness
