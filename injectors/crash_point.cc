// crash-point: the native subject SIGKILLs itself at a named failpoint
// (docs/failpoints.md) or, with `enumerate = N`, at the k-th failpoint it
// passes where k = trial index mod N + 1, so N trials visit every crash window
// on that rank's path in turn. Params: point, job, rank, enumerate.
#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"point", "job", "rank", "enumerate"})) return e;
  int job, rank;
  if (auto e = pick_target(f, s, rng, &job, &rank)) return e;
  bool has_point = f.params.contains("point");
  bool has_enum = f.params.contains("enumerate");
  if (has_point == has_enum) return std::string("give exactly one of 'point' or 'enumerate'");
  for (auto& w : p.workers) {
    if (w.job != job || w.rank != rank) continue;
    if (has_point) {
      if (!f.params["point"].is_string()) return std::string("'point' must be a failpoint name string");
      std::string point = f.params["point"].get<std::string>();
      auto& list = w.env["SHMSTRESS_FIU_ENABLE"];
      list += (list.empty() ? "" : ",") + point;
    } else {
      const auto& v = f.params["enumerate"];
      if (!v.is_number_integer() || v.get<int>() < 1 || v.get<int>() > 100000) {
        return std::string("'enumerate' must be an integer in [1, 100000]");
      }
      w.env["SHMCOORD_CRASH_AT"] = std::to_string(p.trial % v.get<int>() + 1);
    }
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("crash-point",
                             "the native subject SIGKILLs itself at a named failpoint, or at its k-th point (enumerate)",
                            plan);

}  // namespace harness
