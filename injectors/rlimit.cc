// rlimit: exhaustion where it hurts. The chosen workers lower their own
// RLIMIT_NOFILE or RLIMIT_AS right before one operation and lift it right
// after (SHMSTRESS_LIMIT_AT): the *cleaning* process (`when = "clean"`, a
// rank's clean_before/clean_after or the harness's cleanup step with
// job = -1... not the latter: the cleanup step reclaims for the audit), a
// follower's barrier attach (`when = "attach"`), or an acquire. `emfile`
// limits a worker from its start; this limits one step, so the process is
// otherwise healthy, as a loader whose fds leak or whose address space is
// taken by a model is. Params: resource ("nofile" | "as"), free (nofile: fds
// left free, default 1; as: bytes of address space left, default 1 MiB; a
// list: trial i takes its (i mod n)-th value), when, job, rank, random_rank.
#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"resource", "free", "when", "job", "rank", "random_rank"})) return e;
  std::string resource, when;
  if (auto e = param_string(f, "resource", "nofile", {"nofile", "as"}, &resource)) return e;
  if (auto e = param_string(f, "when", "clean", {"clean", "attach", "acquire"}, &when)) return e;
  // One value, or a list: how many fds a step needs differs by step (opening
  // the registry, listing /dev/shm, ...), so each value is a case of its own.
  // Trial i takes the (i mod n)-th, not a draw: n trials reach every case and
  // the first trial the first listed. A draw of one value in three misses it
  // in the first 4 trials in (2/3)^4 = 20% of runs, and a flaw only free = 1
  // shows (listing-failure-ignored) took 13-17 s to catch at some seeds.
  std::int64_t free = 0;
  const bool nofile = resource == "nofile";
  if (f.params.contains("free") && f.params["free"].is_array()) {
    std::vector<int> options;
    if (auto e = param_ints(f, "free", {}, 0, nofile ? 4096 : (1 << 30), &options)) return e;
    free = options[static_cast<std::size_t>(p.trial) % options.size()];
  } else if (auto e = param_int(f, "free", nofile ? std::int64_t{1} : std::int64_t{1} << 20, 0,
                                nofile ? std::int64_t{4096} : std::int64_t{1} << 32, &free)) {
    return e;
  }
  std::vector<WorkerPlan*> ws;
  if (auto e = pick_workers(f, s, rng, p, &ws)) return e;
  if (when == "clean") {
    std::erase_if(ws, [&](WorkerPlan* w) {
      const Workload& wl = s.jobs[static_cast<std::size_t>(w->job)].workload;
      return !wl.clean_before && !wl.clean_after;
    });
    if (ws.empty()) return std::string("'when' = \"clean\" but no chosen rank cleans (clean_before / clean_after)");
  }
  const nlohmann::json limit = {{"when", when}, {"resource", resource}, {"free", free}};
  for (auto* w : ws) {
    w->env["SHMSTRESS_LIMIT_AT"] = limit.dump();
    p.actions.push_back(Action{0, w->job, w->rank, 0, "rlimit", "instant", limit});
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("rlimit",
                            "a rank lowers RLIMIT_NOFILE or RLIMIT_AS right before it cleans, attaches or acquires",
                            plan);

}  // namespace harness
