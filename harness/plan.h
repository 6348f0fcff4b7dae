// A trial's plan: everything the supervisor does, fixed before the trial starts
// from (scenario, trial seed, trial index) alone, so the same inputs replay the
// same schedule. Written to schedule.json in the trial dir.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scenario.h"

namespace harness {

// A worker's label: its dir in the trial dir and its name in messages. Run
// and supervisor agree on it (a reused trial dir keeps the next trial's).
inline std::string worker_label(int job, int rank) {
  return "job" + std::to_string(job) + "-rank" + std::to_string(rank);
}

struct WorkerPlan {
  int job = 0;
  int rank = 0;        // rank within the job
  int local_rank = 0;
  std::map<std::string, std::string> env;  // SHMSTRESS_* protocol variables + injector additions
  int uid = -1;        // >= 0: the worker runs as this uid/gid (real EACCES even when we are root)
  int gid = -1;
  long nofile = -1;    // >= 0: RLIMIT_NOFILE (EMFILE)
  std::string lock_subdir;  // non-empty: this worker's lock dir / TMPDIR is <lock dir>/<subdir>
  // >= 0: the worker runs in container #n of the trial: a pid namespace with
  // its own /proc (pid 1 a do-nothing init), over the trial's /dev/shm, as a
  // container started with --ipc=host would. Workers of one container share it.
  int container = -1;
  int loader_workers = 0;  // > 0: the rank starts loader workers, which announce themselves (`start`)
  // The worker stops itself at a failpoint (SHMCOORD_PAUSE_AT in `env`); when
  // the supervisor sees that stop it opens `fault`'s window and, `hold_ns`
  // later, does `then`: "continue" (SIGCONT), "replace" (SIGKILL its tree and
  // start a new worker for the same job and rank, which attaches in its
  // place) or "reuse-pid" (SIGKILL its tree and give its pid to an unrelated
  // live process with another start time).
  struct OnStop {
    std::string fault;
    std::int64_t hold_ns = 0;
    std::string then = "continue";  // | "kill" (dies there) | "replace" | "reuse-pid"
    nlohmann::json detail;
    // Shared by every worker of the trial: only the first of them to stop is
    // the fault; a later one is resumed at once.
    bool first_of_trial = false;
    // How many times the worker stops itself (SHMCOORD_PAUSE_AT with several
    // passes): each stop is a window of its own, handled alike.
    int stops = 1;
  };
  std::optional<OnStop> on_stop;
};

// A process outside the scenario's jobs (a native worker with its own events
// file, not the history) that writes the native subject's own records - a
// registry slot, a barrier seat - and stops itself at a failpoint; the
// supervisor then kills its tree and reuses its pid as WorkerPlan::OnStop
// "reuse-pid" does, before the scenario's workers start.
struct Ghost {
  std::string fault;
  WorkerPlan worker;
};

// A file the supervisor creates in the trial's world before the workers start,
// logged as a fault window that ends at teardown. `protect` marks it as
// something no cleanup may remove while the window is open (a live lock);
// `foreign` as another user's (never to be removed, not a leak).
struct Seed {
  std::string fault;        // the fault kind it belongs to
  std::string where = "shm";  // "shm": /dev/shm/<root><name>; "lock": <lock dir>/<root><name>
  std::string name;         // suffix under the trial's root, e.g. "000003_locals"
  std::string content;      // bytes written (may be empty: zero-length)
  std::int64_t size = -1;   // >= 0: ftruncate to this size after writing
  int uid = -1;             // >= 0: chown to uid:uid
  // How a lock file is kept held, if at all: "" none, "stopped" (by a
  // SIGSTOPped helper), "inherited" (through an fd a dead process's forgotten
  // child inherited).
  std::string held_by;
  bool foreign = false;
  std::int64_t release_at_ns = -1;  // >= 0 (held lock): the holder goes this long after the trial start
  nlohmann::json detail;
};

// A signal the supervisor sends at a time relative to the trial start, logged
// as a fault event (start/end windows are two actions with the same kind).
struct Action {
  std::int64_t at_ns = 0;   // after the trial start; or, when triggered, after the trigger
  int job = -1;
  int rank = -1;
  int signal = 0;
  std::string fault;        // the fault kind it belongs to
  std::string phase = "instant";  // start | end | instant
  nlohmann::json detail;
  // Event-triggered: fires at_ns after the nth event of worker (on_job,
  // on_rank) with this type (and op, or point name) appears in the history —
  // "kill rank r right after it logs a given event", for subjects we cannot
  // instrument. Empty on_type: a timed action.
  std::string on_type, on_op;
  int on_job = -1, on_rank = -1, on_nth = 1;
  int on_worker = -1;  // the trigger is an event of that rank's loader worker #n (-1: of the rank itself)
  // Non-null: the trigger's event counts only if its `value` holds every key of this object with an
  // equal value ("the rank whose barrier_attach says created = true"): a fault aimed at whichever
  // rank the subject's own events name, e.g. the one that created a segment.
  nlohmann::json on_value;
  // Aimed at the job's launcher (its elastic agent) rather than a rank.
  bool launcher = false;
  // >= 0: aimed at the rank's loader worker #worker (a process it forked; the
  // supervisor learns its pid from its `start` event).
  int worker = -1;
  // The signal goes to the worker's whole process group (every worker leads
  // its own), i.e. its process tree: a whole-job kill as OOM, a container stop
  // or torchrun's killpg does it, CPython's resource tracker included.
  bool tree = false;
};

// A job whose ranks a real launcher starts (JobSpec::launcher): the
// supervisor starts the launcher in their place, with each rank's settings
// (WorkerPlan::env) in SHMSTRESS_RANK_ENV under its local rank.
struct LauncherPlan {
  int job = 0;
  std::string kind = "torchrun";
  int max_restarts = 0;
  std::string run_id;           // --rdzv_id; empty: torchrun's default
  std::int64_t teardown_ns = 0;  // job.teardown's bound
};

struct TrialPlan {
  std::string scenario;
  std::string scenario_file;
  int trial = 0;
  std::uint64_t run_seed = 0;
  std::uint64_t seed = 0;     // this trial's seed
  // The subject the trial ran ("native", a name from subjects/, "exec:CMD"):
  // replay and shrink re-run that one, not the scenario's own.
  std::string subject = "native";
  std::vector<WorkerPlan> workers;
  std::vector<Action> actions;  // sorted by at_ns before the trial
  std::vector<Seed> seeds;      // created before the workers start
  std::vector<Ghost> ghosts;    // run (and their pids reused) before the workers start
  std::vector<LauncherPlan> launchers;  // by job, for the jobs a launcher starts
  // The start gate opens when every worker is ready, or this long after the
  // trial start; time-placed actions count from its opening.
  std::int64_t gate_timeout_ns = 30'000'000'000;
  std::string shm_size;         // tmpfs size for the trial's /dev/shm (ENOSPC), default 256m
  std::int64_t timeout_ns = 0;
  bool final_cleanup = true;
  // deadlines.cleanup: how long the audit lets the trial's remaining
  // processes run on their own before killing them (0: a 1 s grace).
  std::int64_t settle_ns = 0;
};

nlohmann::json to_json(const TrialPlan& p);

// Seeds: each trial's from (run seed, scenario name, trial index); each worker's from the trial's.
std::uint64_t derive_seed(std::uint64_t parent, const std::string& salt, std::uint64_t index);

// Builds the plan without faults (topology + workload); injectors then add to it.
TrialPlan base_plan(const Scenario& s, std::uint64_t run_seed, int trial);
// base_plan in two steps: what every trial of the scenario shares, then what
// its seeds decide (the trial's and each worker's seed, a launcher's run id).
// Building the first once and copying it is what makes a load's validation
// (kValidationTrials plans per scenario) cheap: base_plan builds the workers'
// JSON environment each time.
TrialPlan unseeded_plan(const Scenario& s);
void seed_plan(TrialPlan& p, const Scenario& s, std::uint64_t run_seed, int trial);
// seed_plan without the workers' seeds (SHMSTRESS_SEED), which no injector
// reads: what validation's draws need, one map insertion a worker cheaper.
void seed_trial(TrialPlan& p, const Scenario& s, std::uint64_t run_seed, int trial);

// The launcher that starts `job`'s ranks, if any.
const LauncherPlan* launcher_of(const TrialPlan& p, int job);

// A tmpfs `size=` value as mount(8) reads it ("4096", "512k", "1m", "4g"), in
// bytes; nullopt for anything else (a unit tmpfs knows but we do not take,
// like "%", or another mount option smuggled in). Callers bound it.
std::optional<std::uint64_t> tmpfs_size_bytes(const std::string& size);

}  // namespace harness
