// interrupt: Ctrl-C at a seeded time, as a terminal delivers it: SIGINT to
// every process of the job's foreground process group at one instant — the
// launcher (torchrun's agent, whose ranks, their loader workers and CPython's
// resource trackers all stay in its group), or, for a job without a launcher,
// every rank's group (the supervisor makes each rank lead its own, so a tree
// kill reaches exactly one rank's tree; a shell's one foreground job is their
// union). Nobody is forced: each process does with SIGINT what it does at a
// terminal (a Python rank raises KeyboardInterrupt and runs its exit handlers,
// a DataLoader worker leaves its loop, a resource tracker ignores it, torchrun
// forwards it to its ranks and exits).
// Params: job (default 0), at.
#include <csignal>

#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"job", "at"})) return e;
  MsRange at;
  if (auto e = param_range(f, "at", MsRange{Ms(0), Ms(200)}, &at)) return e;
  int job = 0;
  if (auto e = param_int(f, "job", 0, 0, static_cast<int>(s.jobs.size()) - 1, &job)) return e;
  const JobSpec& js = s.jobs[static_cast<std::size_t>(job)];
  const std::int64_t when = pick_ns(rng, at);
  Action a{when, job, -1, SIGINT, "interrupt", "instant", {}};
  a.tree = true;
  if (js.launcher.present()) {
    a.launcher = true;
    a.detail = {{"group", "launcher"}, {"tree", true}};
    p.actions.push_back(std::move(a));
    return std::nullopt;
  }
  for (int rank = 0; rank < js.ranks; ++rank) {
    Action r = a;
    r.rank = rank;
    r.detail = {{"group", "rank"}, {"tree", true}};
    p.actions.push_back(std::move(r));
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("interrupt",
                            "Ctrl-C: SIGINT to the job's whole foreground process group (launcher, ranks, loader "
                            "workers, trackers) at one seeded instant",
                            plan);

}  // namespace harness
