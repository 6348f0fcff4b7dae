// sometimes: FoundationDB's "sometimes on" for shmcoord's failpoints. In a
// share of the trials (`probability`, default 0.75), one to three ranks each stop
// themselves the nth (1-3) time they pass one random failpoint - window or
// syscall - and are resumed after `hold` (default 1-20 ms): a preemption at a
// place the scenario did not name, so every scenario also explores the
// interleavings inside the steps it passes. The run adds it to every native
// scenario (RunOptions::sometimes; a scenario opts out with `sometimes =
// false`); a scenario may also list it as a [[fault]] to set its parameters.
// Logged as its own fault kind, excused as pause-at-point is (a stopped rank
// is alive; the holds stay far below every deadline). Drawn from the trial's
// seed, so a replay pauses the same rank at the same pass of the same point.
//
// A knob too, as FoundationDB's BUGGIFY turns knobs: in a share of the
// trials (`first_fit`, default 0.5) every worker, reused-pid's ghosts among
// them, takes its lease from the lowest free cell (SHMCOORD_LEASE_FIRST_FIT),
// so the holders of a namespace are neighbours and an overlap of neighbouring
// cells shows in any trial with two of them; the other trials keep the
// library's random start, what users run. Drawn after every other draw of the
// stream, so each trial pauses what it paused before the knob was added.
//
// The pauses never aim at: a rank already stopping at a point (one stop per rank,
// pause-at-point, replacement, reused-pid), a rank a launcher starts or one
// in a container (the supervisor sees only its own children stop, and
// nobody would resume it), and any subject but the native one (the points
// are shmcoord's).
#include "injector.h"
#include "shmcoord/failpoint.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  (void)s;
  if (auto e = only_keys(f, {"probability", "hold", "processes", "first_fit"})) return e;
  // 0: no pauses, only the knob below (e.g. a shrunk lease-layout failure).
  double probability = 0.75;
  if (auto e = param_share(f, "probability", 0.75, &probability)) return e;
  MsRange hold;
  if (auto e = param_range(f, "hold", MsRange{Ms(1), Ms(20)}, &hold)) return e;
  int processes = 3;
  if (auto e = param_int(f, "processes", 3, 1, 64, &processes)) return e;
  double first_fit = 0.5;
  if (auto e = param_share(f, "first_fit", 0.5, &first_fit)) return e;
  if (p.subject != "native") return std::nullopt;
  // Every draw is made whether or not the trial pauses, so the other draws
  // of a trial never depend on which ranks were eligible.
  const bool on = std::uniform_real_distribution<double>(0.0, 1.0)(rng) < probability;
  const int count = 1 + static_cast<int>(rng() % static_cast<std::uint64_t>(processes));
  std::vector<WorkerPlan*> eligible;
  for (auto& w : p.workers) {
    if (w.on_stop || w.container >= 0 || launcher_of(p, w.job) != nullptr) continue;
    eligible.push_back(&w);
  }
  const auto points = shmcoord::failpoint::points();
  for (int i = 0; i < count; ++i) {
    const std::size_t pick = static_cast<std::size_t>(rng() % points.size());
    const int nth = 1 + static_cast<int>(rng() % 3);
    const std::int64_t hold_ns = pick_ns(rng, hold);
    const std::uint64_t who = rng();
    if (!on || eligible.empty()) continue;
    WorkerPlan* w = eligible[who % eligible.size()];
    eligible.erase(eligible.begin() + static_cast<std::ptrdiff_t>(who % eligible.size()));
    const std::string point(points[pick].name);
    w->env["SHMCOORD_PAUSE_AT"] = point + ":" + std::to_string(nth);
    w->on_stop = WorkerPlan::OnStop{
        "sometimes", hold_ns, "continue", {{"point", point}, {"nth", nth}, {"hold_ms", hold_ns / 1000000}}};
  }
  if (std::uniform_real_distribution<double>(0.0, 1.0)(rng) < first_fit) {
    for (auto& w : p.workers) w.env["SHMCOORD_LEASE_FIRST_FIT"] = "1";
    for (auto& g : p.ghosts)
      g.worker.env["SHMCOORD_LEASE_FIRST_FIT"] = "1";  // they take leases too
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR(
    "sometimes",
    "in some trials a rank or two stop for a few ms at a random failpoint, and in half "
    "of them every lease takes the lowest free cell (added to every native scenario)",
    plan);

}  // namespace harness
