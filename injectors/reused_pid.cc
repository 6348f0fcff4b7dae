// reused-pid: the subject's own records name a pid that is alive but belongs
// to an unrelated process with another start time. A process writes the
// records through shmcoord itself (no hand-made bytes), stops itself at a
// failpoint, is SIGKILLed with its tree (its tracker cannot tidy up), and its
// pid is given to a new process (ns_last_pid in the trial's pid namespace)
// that lives until the heal.
// - Without `job`: before the workers start, a ghost job (one native worker,
//   key "reused-pid-<i>", `dirs`, `remote`) acquires a prefix and takes a
//   seat in its barrier, stopping at `point` (default
//   "crash/barrier/wait/before-sleep": arrived in round 0). The scenario's
//   jobs meet its registry slot and barrier seat.
// - With `job` (and `rank`, random if absent): that rank is the one, at the
//   nth pass of `point` (default the same), after `hold`: its peers meet its
//   holder entry and barrier seat while it is "alive".
// Native subject only; needs the trial's pid namespace (root).
#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"point", "nth", "hold", "job", "rank", "dirs", "remote"})) return e;
  std::string point;
  int nth = 1;
  if (auto e = pick_point(f, p.trial, "crash/barrier/wait/before-sleep", &point, &nth)) return e;
  MsRange hold;
  if (auto e = param_range(f, "hold", MsRange{Ms(0), Ms(0)}, &hold)) return e;
  std::vector<std::string> dirs;
  if (auto e = param_strings(f, "dirs", {"/data/reused-pid"}, &dirs)) return e;
  bool remote = false;
  if (auto e = param_bool(f, "remote", false, &remote)) return e;
  const std::string spec = point + ":" + std::to_string(nth);
  if (f.params.contains("job")) {
    if (f.params.contains("dirs") || f.params.contains("remote")) return std::string("'dirs'/'remote' are for the ghost job (no 'job')");
    int job, rank;
    if (auto e = pick_target(f, s, rng, &job, &rank)) return e;
    const std::int64_t hold_ns = pick_ns(rng, hold);
    for (auto& w : p.workers) {
      if (w.job != job || w.rank != rank) continue;
      if (w.on_stop) return std::string("one stop-at-point fault per rank (pause-at-point, replacement, reused-pid)");
      w.env["SHMCOORD_PAUSE_AT"] = spec;
      w.on_stop = WorkerPlan::OnStop{"reused-pid", hold_ns, "reuse-pid", {{"point", point}, {"nth", nth}}};
    }
    return std::nullopt;
  }
  if (f.params.contains("rank")) return std::string("'rank' needs 'job'");
  // The ghost: one rank of a job of its own that waits for a second
  // participant in its barrier (so it arrives and sleeps there).
  Ghost g;
  g.fault = "reused-pid";
  WorkerPlan& w = g.worker;
  w.job = -1;
  nlohmann::json d = nlohmann::json::array();
  for (const auto& dir : dirs) d.push_back({{"path", dir}, {"remote", remote}});
  const std::string key = "reused-pid-" + std::to_string(p.ghosts.size());
  w.env = {{"SHMSTRESS_ROLE", "rank"},
           {"SHMSTRESS_JOB", "-1"},
           {"SHMSTRESS_JOB_KEY", key},
           {"SHMSTRESS_RANK", "0"},
           {"SHMSTRESS_LOCAL_RANK", "0"},
           {"SHMSTRESS_WORLD_SIZE", "1"},
           {"SHMSTRESS_LOCAL_WORLD_SIZE", "1"},
           {"SHMSTRESS_BARRIER_PROCS", "2"},
           {"SHMSTRESS_DIRS", d.dump()},
           {"SHMSTRESS_OPS", nlohmann::json{{"acquire", true}, {"rounds", 1}, {"release", true}}.dump()},
           {"SHMSTRESS_SEED", std::to_string(derive_seed(p.seed, "ghost", p.ghosts.size()))},
           {"SHMSTRESS_ACQUIRE_TIMEOUT_MS", "5000"},
           {"SHMSTRESS_BARRIER_TIMEOUT_MS", "10000"},
           {"SHMCOORD_PAUSE_AT", spec}};
  w.on_stop = WorkerPlan::OnStop{"reused-pid", 0, "reuse-pid", {{"point", point}, {"nth", nth}, {"job_key", key}}};
  p.ghosts.push_back(std::move(g));
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("reused-pid",
                            "the subject's records name a pid now used by an unrelated live process (another start time)",
                            plan);

}  // namespace harness
