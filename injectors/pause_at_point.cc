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
// later one is resumed at once, unlogged) or "each" (every rank, of `job` if
// given, stops there: a fault of its own each, with its own hold); `nth` may
// be a list (with "continue"): the rank stops at each of those passes. Then: "continue" (default:
// SIGCONT after `hold`) or "kill" (SIGKILL after `hold`, the process alone:
// a crash at the point by whichever process reached it first, the windows
// crash-point cannot aim at because only one process ever gets there).
// Native subject only (the failpoints are shmcoord's).
#include <algorithm>

#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"point", "nth", "enumerate", "hold", "job", "rank", "target", "then"})) return e;
  if (!f.params.contains("point")) return std::string("'point' must name a failpoint, a list of them, or \"*\"");
  // nth = [a, b, ...]: the rank stops at each of these passes, a window each,
  // so one trial pauses one protocol at several of its moments.
  std::vector<int> nths;
  // pick_point reads the params without the list: a copy, only then (a
  // fault is planned hundreds of times at load).
  std::optional<FaultSpec> without_list;
  if (f.params.contains("nth") && f.params["nth"].is_array()) {
    if (f.params.contains("enumerate")) return std::string("give 'nth' or 'enumerate', not both");
    if (auto e = param_ints(f, "nth", {1}, 1, 1000000, &nths)) return e;
    without_list = f;
    without_list->params.erase("nth");
  }
  std::string point;
  int nth = 1, pass = 0;
  if (auto e = pick_point(without_list ? *without_list : f, p.trial, "", &point, &nth, &pass))
    return e;
  if (nths.empty()) nths = {nth};
  std::sort(nths.begin(), nths.end());
  nths.erase(std::unique(nths.begin(), nths.end()), nths.end());
  MsRange hold;
  if (auto e = param_range(f, "hold", MsRange{Ms(300), Ms(300)}, &hold)) return e;
  std::string then;
  if (auto e = param_string(f, "then", "continue", {"continue", "kill"}, &then)) return e;
  const std::string target = f.params.contains("target") && f.params["target"].is_string()
                                 ? f.params["target"].get<std::string>()
                                 : "";
  if (nths.size() > 1 && (then != "continue" || target == "first"))
    return std::string(
        "'nth' as a list stops a rank more than once: only with then = \"continue\" and no target "
        "= \"first\"");
  std::string spec;
  for (int n : nths) spec += (spec.empty() ? "" : ",") + point + ":" + std::to_string(n);
  nlohmann::json detail = {{"point", point}};
  detail["nth"] = nths.size() == 1 ? nlohmann::json(nths[0]) : nlohmann::json(nths);
  if (then == "kill") detail["then"] = then;
  // One rank's stops: each a window of the same fault, held `hold_ns`.
  auto arm = [&](WorkerPlan& w, std::int64_t hold_ns,
                 bool first_of_trial) -> std::optional<std::string> {
    if (w.on_stop)
      return std::string(
          "one stop-at-point fault per rank (pause-at-point, replacement, reused-pid)");
    w.env["SHMCOORD_PAUSE_AT"] = spec;
    w.on_stop = WorkerPlan::OnStop{"pause-at-point", hold_ns, then, detail, first_of_trial};
    w.on_stop->detail["hold_ms"] = hold_ns / 1000000;
    w.on_stop->stops = static_cast<int>(nths.size());
    return std::nullopt;
  };
  if (target == "each") {
    if (f.params.contains("rank"))
      return std::string("'target' = \"each\" stops every rank: give no 'rank'");
    int job = -1;
    if (auto e = param_int(f, "job", -1, 0, static_cast<int>(s.jobs.size()) - 1, &job)) return e;
    for (auto& w : p.workers) {
      if (job >= 0 && w.job != job) continue;
      if (auto e = arm(w, pick_ns(rng, hold), false)) return e;
    }
    return std::nullopt;
  }
  const std::int64_t hold_ns = pick_ns(rng, hold);
  if (target == "first") {
    // Every rank may stop there; the first to do so is the fault.
    if (f.params.contains("job") || f.params.contains("rank")) return std::string("'target' = \"first\": give no 'job' or 'rank'");
    for (auto& w : p.workers) {
      if (auto e = arm(w, hold_ns, true)) return e;
    }
    return std::nullopt;
  }
  int job, rank;
  if (auto e = pick_point_target(f, s, rng, pass, &job, &rank)) return e;
  for (auto& w : p.workers) {
    if (w.job != job || w.rank != rank) continue;
    if (auto e = arm(w, hold_ns, false)) return e;
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("pause-at-point",
                            "a rank stops itself the nth time it passes a named failpoint and is resumed after `hold`",
                            plan);

}  // namespace harness
