// replacement: a barrier participant dies after arriving and a new process
// attaches in its place mid-round, as a launcher that restarts one failed
// worker does. The rank stops itself the nth time it passes `point` (default
// "crash/barrier/wait/before-sleep": arrived, about to wait), is SIGKILLed
// there with its tree after `hold`, and the supervisor starts a new worker
// for the same job and rank (same environment; SHMSTRESS_FIRST_ROUND = the
// round after the one the dead one entered) that acquires and attaches again.
// Params: job, rank (random if absent), point, nth, hold (default "0ms").
// Native subject only (the failpoints are shmcoord's).
#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"point", "nth", "enumerate", "hold", "job", "rank"})) return e;
  std::string point;
  int nth = 1;
  if (auto e = pick_point(f, p.trial, "crash/barrier/wait/before-sleep", &point, &nth)) return e;
  MsRange hold;
  if (auto e = param_range(f, "hold", MsRange{Ms(0), Ms(0)}, &hold)) return e;
  int job, rank;
  if (auto e = pick_target(f, s, rng, &job, &rank)) return e;
  if (s.jobs[job].workload.rounds < 2 || s.jobs[job].ranks < 2) {
    return "'job': job " + std::to_string(job) + " needs at least 2 ranks and 2 barrier rounds for a participant to be replaced";
  }
  const std::int64_t hold_ns = pick_ns(rng, hold);
  for (auto& w : p.workers) {
    if (w.job != job || w.rank != rank) continue;
    if (w.on_stop) return std::string("one stop-at-point fault per rank (pause-at-point, replacement, reused-pid)");
    w.env["SHMCOORD_PAUSE_AT"] = point + ":" + std::to_string(nth);
    w.on_stop = WorkerPlan::OnStop{"replacement", hold_ns, "replace", {{"point", point}, {"nth", nth}}};
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("replacement",
                            "a barrier participant dies after arriving and a new process attaches in its place",
                            plan);

}  // namespace harness
