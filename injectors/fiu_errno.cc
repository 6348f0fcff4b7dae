// fiu-errno: a libfiu return-point at one of shmcoord's own syscall sites
// (docs/failpoints.md) fails with a chosen errno — EACCES, EPERM, ENOSPC,
// EMFILE, ... or "random" (EACCES/EPERM/EIO) — in the chosen workers.
// libfiu's POSIX preload cannot reach shm_open/flock/fcntl; these points can.
// Params: point (a name or a list, each a failpoint shmcoord has), errno
// (default EACCES), probability (default 1), job, rank (default: every rank of
// the job), random_rank.
#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"point", "errno", "probability", "job", "rank", "random_rank"})) return e;
  if (!f.params.contains("point")) return std::string("'point' must be a failpoint name or a list of them");
  std::vector<std::string> points;
  if (auto e = param_strings(f, "point", {}, &points)) return e;
  for (const auto& point : points) {
    if (auto e = check_failpoint("point", point)) return e;
  }
  int err = 0;
  if (auto e = param_errno(f, "errno", "EACCES", rng, &err)) return e;
  double prob = 1;
  if (auto e = param_double(f, "probability", 1.0, 0.0, 1.0, &prob)) return e;
  std::vector<WorkerPlan*> ws;
  if (auto e = pick_workers(f, s, rng, p, &ws)) return e;
  for (auto* w : ws) {
    auto& list = w->env["SHMSTRESS_FIU_ENABLE"];
    for (const auto& point : points) {
      list += (list.empty() ? "" : ",") + point + "=" + std::to_string(err);
      if (prob < 1) list += "@" + std::to_string(prob);
    }
    p.actions.push_back(Action{0, w->job, w->rank, 0, "fiu-errno", "instant",
                               {{"points", points}, {"errno", err}, {"probability", prob}}});
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("fiu-errno", "fail shmcoord's own syscall sites with a chosen errno (libfiu return points)",
                            plan);

}  // namespace harness
