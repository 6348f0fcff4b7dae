// pause-at-point: a rank stops itself (SIGSTOP raised by shmcoord, via
// SHMCOORD_PAUSE_AT) the nth time it passes a named failpoint, typically a
// step inside a critical section with a robust mutex or the init lock held;
// the supervisor sees the stop (WUNTRACED), logs the window from there and
// resumes it after `hold`, so the other processes run inside the window.
// Params: point (a name, a list, or "*" for every window point), nth (default
// 1) or enumerate = K (trial i visits the i-th of every point x k <= K, like
// crash points), hold (range, default "300ms"), job, rank, or target:
// "random" (default), "cycle" (pass p over the points takes the p-th rank) or
// "first" (every rank may stop there; the first to do so is the fault, any
// later one is resumed at once, unlogged), then: "continue" (default:
// SIGCONT after `hold`) or "kill" (SIGKILL after `hold`, the process alone:
// a crash at the point by whichever process reached it first, the windows
// crash-point cannot aim at because only one process ever gets there).
// Native subject only (the failpoints are shmcoord's).
#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"point", "nth", "enumerate", "hold", "job", "rank", "target", "then"})) return e;
  if (!f.params.contains("point")) return std::string("'point' must name a failpoint, a list of them, or \"*\"");
  std::string point;
  int nth = 1, pass = 0;
  if (auto e = pick_point(f, p.trial, "", &point, &nth, &pass)) return e;
  MsRange hold;
  if (auto e = param_range(f, "hold", MsRange{Ms(300), Ms(300)}, &hold)) return e;
  const std::int64_t hold_ns = pick_ns(rng, hold);
  std::string then;
  if (auto e = param_string(f, "then", "continue", {"continue", "kill"}, &then)) return e;
  nlohmann::json detail = {{"point", point}, {"nth", nth}, {"hold_ms", hold_ns / 1000000}};
  if (then == "kill") detail["then"] = then;
  const bool first = f.params.contains("target") && f.params["target"] == "first";
  if (first) {
    // Every rank may stop there; the first to do so is the fault.
    if (f.params.contains("job") || f.params.contains("rank")) return std::string("'target' = \"first\": give no 'job' or 'rank'");
    for (auto& w : p.workers) {
      if (w.on_stop) return std::string("one stop-at-point fault per rank (pause-at-point, replacement, reused-pid)");
      w.env["SHMCOORD_PAUSE_AT"] = point + ":" + std::to_string(nth);
      w.on_stop = WorkerPlan::OnStop{"pause-at-point", hold_ns, then, detail, true};
    }
    return std::nullopt;
  }
  int job, rank;
  if (auto e = pick_point_target(f, s, rng, pass, &job, &rank)) return e;
  for (auto& w : p.workers) {
    if (w.job != job || w.rank != rank) continue;
    if (w.on_stop) return std::string("one stop-at-point fault per rank (pause-at-point, replacement, reused-pid)");
    w.env["SHMCOORD_PAUSE_AT"] = point + ":" + std::to_string(nth);
    w.on_stop = WorkerPlan::OnStop{"pause-at-point", hold_ns, then, detail};
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("pause-at-point",
                            "a rank stops itself the nth time it passes a named failpoint and is resumed after `hold`",
                            plan);

}  // namespace harness
