// crash-point: the native subject SIGKILLs itself at a named failpoint
// (docs/failpoints.md) or, with `enumerate = N`, at the k-th failpoint it
// passes where k = trial index mod N + 1, so N trials visit every crash window
// on that rank's path in turn. `point` may be a list: trial i uses the
// (i mod length)-th, so a scenario visits each named window in turn.
// Params: point, job, rank, enumerate, target ("cycle": each pass over the
// points takes the next rank of the trial, so every rank meets every point).
#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"point", "job", "rank", "enumerate", "target"})) return e;
  bool has_point = f.params.contains("point");
  bool has_enum = f.params.contains("enumerate");
  if (has_point == has_enum) return std::string("give exactly one of 'point' or 'enumerate'");
  std::vector<std::string> points;
  int enumerate = 0;
  if (has_point) {
    if (auto e = param_strings(f, "point", {}, &points)) return e;
    for (const auto& point : points) {
      if (auto e = check_failpoint("point", point)) return e;
    }
  } else if (auto e = param_int(f, "enumerate", 1, 1, 100000, &enumerate)) {
    return e;
  }
  const int pass = has_point ? p.trial / static_cast<int>(points.size()) : p.trial / enumerate;
  int job, rank;
  if (auto e = pick_point_target(f, s, rng, pass, &job, &rank)) return e;
  for (auto& w : p.workers) {
    if (w.job != job || w.rank != rank) continue;
    if (has_point) {
      const std::string& point = points[static_cast<std::size_t>(p.trial) % points.size()];
      auto& list = w.env["SHMSTRESS_FIU_ENABLE"];
      list += (list.empty() ? "" : ",") + point;
    } else {
      w.env["SHMCOORD_CRASH_AT"] = std::to_string(p.trial % enumerate + 1);
    }
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("crash-point",
                             "the native subject SIGKILLs itself at a named failpoint, or at its k-th point (enumerate)",
                            plan);

}  // namespace harness
