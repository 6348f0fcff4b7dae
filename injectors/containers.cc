// containers: the jobs of a trial run in separate pid namespaces, each with
// its own /proc, over the same /dev/shm - as two containers started with
// --ipc=host (or sharing a /dev/shm volume) are. A pid in one container's
// records means nothing, or another process, in the other's /proc.
// Params: jobs (list of job indices; default every job), each in a container
// of its own; jobs not listed stay in the trial's own namespace (the "host").
// Needs the trial's pid namespace (root).
#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng&, TrialPlan& p) {
  if (auto e = only_keys(f, {"jobs"})) return e;
  const int njobs = static_cast<int>(s.jobs.size());
  std::vector<int> all;
  for (int j = 0; j < njobs; ++j) all.push_back(j);
  std::vector<int> jobs;
  if (auto e = param_ints(f, "jobs", all, 0, njobs - 1, &jobs)) return e;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    for (auto& w : p.workers) {
      if (w.job != jobs[i]) continue;
      if (w.container >= 0) return "'jobs': job " + std::to_string(jobs[i]) + " is listed twice";
      w.container = static_cast<int>(i);
    }
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("containers",
                            "jobs in separate pid namespaces with their own /proc over one /dev/shm (--ipc=host)",
                            plan);

}  // namespace harness
