// fiu-errno: a libfiu return-point at one of shmcoord's own syscall sites
// (docs/failpoints.md) fails with a chosen errno — EACCES, EPERM, ENOSPC,
// EMFILE, ... or "random" (EACCES/EPERM/EIO) — in the chosen workers.
// libfiu's POSIX preload cannot reach shm_open/flock/fcntl; these points can.
// Params: point (a name or a list), errno (default EACCES), probability
// (default 1), job, rank (default: every rank of the job), random_rank.
#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"point", "errno", "probability", "job", "rank", "random_rank"})) return e;
  std::vector<std::string> points;
  const auto& pt = f.params.value("point", nlohmann::json());
  if (pt.is_string()) points.push_back(pt.get<std::string>());
  if (pt.is_array()) {
    for (const auto& x : pt) {
      if (!x.is_string()) return std::string("'point' must be a failpoint name or a list of them");
      points.push_back(x.get<std::string>());
    }
  }
  if (points.empty()) return std::string("'point' must be a failpoint name or a list of them");
  auto err = errno_param(f.params.value("errno", std::string("EACCES")), rng);
  if (!err) return std::string("'errno' must be EACCES, EPERM, ENOSPC, EMFILE, ..., a number, or \"random\"");
  double prob = f.params.value("probability", 1.0);
  if (!(prob > 0 && prob <= 1)) return std::string("'probability' must be in (0, 1]");
  std::vector<WorkerPlan*> ws;
  if (auto e = pick_workers(f, s, rng, p, &ws)) return e;
  for (auto* w : ws) {
    auto& list = w->env["SHMSTRESS_FIU_ENABLE"];
    for (const auto& point : points) {
      list += (list.empty() ? "" : ",") + point + "=" + std::to_string(*err);
      if (prob < 1) list += "@" + std::to_string(prob);
    }
    p.actions.push_back(Action{0, w->job, w->rank, 0, "fiu-errno", "instant",
                               {{"points", points}, {"errno", *err}, {"probability", prob}}});
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("fiu-errno", "fail shmcoord's own syscall sites with a chosen errno (libfiu return points)",
                            plan);

}  // namespace harness
