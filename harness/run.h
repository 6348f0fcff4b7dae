// A run: trials of one or more scenarios, up to `parallel` at a time, each in
// its own supervisor. The harness process itself only plans, waits, checks and
// counts; it never touches a trial's shared memory. It writes no report: it
// emits events (run_events.h) that reports subscribe to, and returns the run's
// aggregate (results.h). SIGINT, SIGTERM, SIGHUP and SIGPIPE (every way a
// CI runner or a terminal ends a command) end the running trials and return
// what finished, marked interrupted; one that comes after the last trial
// changes nothing, so the caller writes every report.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "history.h"
#include "known.h"
#include "plan.h"
#include "results.h"
#include "run_events.h"
#include "scenario.h"

namespace harness {

struct RunOptions {
  std::vector<std::string> files;
  std::uint64_t seed = 0;           // 0: pick one (printed, in summary.json)
  int trials = 0;                   // 0: each scenario's default
  std::optional<int> only_trial;    // replay exactly this trial index
  double duration_s = 0;            // > 0: keep going round-robin until then
  // Trials at once; 0: adaptive, from the machine's load and the trials' own
  // timing (concurrency.h), between 1 and max_parallel (0: kTrialsPerCore per
  // core; kTrialsPerCoreExternal when a trial runs an external subject). The
  // timing checks do not count what an op waited for a CPU
  // (docs/worker-protocol.md, cpu_wait_ns), so running more trials than cores
  // does not make them report false violations.
  int parallel = 0;
  int max_parallel = 0;
  std::string out_dir;              // default runs/<run-id>
  std::string subject = "native";   // "native", or "exec:<command>" (see subject_command)
  std::vector<std::string> subject_command;  // exec subjects: argv of the worker command
  std::optional<std::string> subject_root;   // a named subject's own shm name root
  std::string subject_shm_size;              // a named subject's own /dev/shm size ("": 256m)
  bool subject_explicit = false;             // --subject given: it wins over scenarios' `subject`
  bool allow_shared_shm = false;
  bool keep_passing = false;
  // Cap on kept failing trial dirs (and on kept passing ones), and on the
  // failing trials RunResult lists with their details; 0: no cap.
  int max_kept = 100;
  int shard_index = 0, shard_count = 1;  // --shard i/n
  bool allow_mount_ns = true;
  std::string exe;                  // the worker binary: this one, or --worker-bin
  // Adds the `sometimes` fault (injectors/sometimes.cc: a few ms of pause at
  // a random failpoint in some trials, from the trial's seed) to every
  // native scenario that does not opt out or list it itself.
  bool sometimes = true;
  // Native workers are forked from the run's zygote (harness/zygote.h)
  // where they can be; false: every worker is exec'd (--exec-workers).
  bool zygote = true;
  bool stop_on_violation = false;   // stop starting trials after the first new violation (with
                                    // expect_violation: the first that meets the expectation)
  // Known failures (baseline.h): their buckets are reported as known and do
  // not fail the run. None: every bucket is new.
  std::shared_ptr<const Baseline> baseline;
  // Told about every finished trial, the progress and the end (run_events.h).
  RunSubscribers subscribers;
  std::string invocation;           // how to spell the binary in reproduce commands
  std::string reproduce_flags;      // run flags a reproduce command must repeat
};

// The default ceiling of the adaptive concurrency, per core. Trials mostly
// sleep (hold times, deadlines), and the timing checks do not count what an op
// waited for a CPU (cpu_wait_ns, reported by the native worker and the
// Streaming adapter), so more trials than cores report no false violations:
// on 2 cores the catalog ran ~31 trials/s at 32 at once with none (25 at
// 16). 16 per core since 2026-11-28: the first round of a catalog, where a
// run finds most of what it finds, ends sooner (issue 20 §4: median time to a
// first violation over tests/mutants 1.7 -> 1.3 s, slowest 8.3 -> 6.1 s, one
// run each), and a 30-minute soak at it had no violation. The controller
// (concurrency.h) still backs off when the run queue grows or trials miss
// their deadlines. --max-parallel lowers or raises the ceiling.
inline constexpr int kTrialsPerCore = 16;
// The same for a run with an external subject (exec:, e.g. the Streaming
// adapter): its workers start an interpreter (with torch, ~1-2 s of CPU per
// rank) before their first op, where no cpu_wait_ns can show the controller
// the contention, and scenarios written for such subjects place jobs by their
// start-up time. At 5 trials at once the stand-in's walk-stops-at-gap formed
// its premise in 1 of 5 trials against 5 of 5 alone. --max-parallel raises it.
inline constexpr int kTrialsPerCoreExternal = 1;

// The adaptive concurrency's ceiling: --max-parallel, else kTrialsPerCore per
// core, or kTrialsPerCoreExternal when any trial runs a subject other than
// the native worker.
int default_max_parallel(const std::vector<Scenario>& scenarios, const RunOptions& opt, int cores);

// The order round `round` of a soak starts its scenarios' trials in: the
// given order, except that a costly scenario (`every` > 1: a real launcher
// imports torch, seconds of CPU a trial) comes after the round's others. In a
// catalog's first round, which finds most of what a run finds, the three
// launcher trials took 7 of the round's 12 CPU-seconds on 2 cores while the
// cheap trials that catch first waited for the CPU (issue 20 §4). An odd
// round starts its cheap scenarios last first: a round's last scenarios
// start seconds after its first (each waits for a running trial to end), so
// a scenario whose trial 0 missed by chance waited twice as long for its
// trial 1 as one early in the order (unprivileged-creator's trial 1 started
// ~10 s into a run). Which trial a scenario runs in a round is unchanged.
std::vector<const Scenario*> start_order(const std::vector<Scenario>& scenarios, int round = 0);

// A --duration soak: trials go on round-robin until the time is up.
inline bool by_duration(const RunOptions& o) { return o.duration_s > 0 && !o.only_trial; }

// Loads and validates scenarios (invariants, fault kinds, injector params).
// On error returns false with "file:line: message" in *err.
bool load_and_validate(const std::vector<std::string>& files, std::vector<Scenario>* out, std::string* err);

// The facts checkers need, from a scenario.
TrialMeta meta_for(const Scenario& s, std::uint64_t seed);

// How late the trial's timed signal actions (kill, stop, continue) fired, in
// ms: the worst, over the actions, of the matching fault event's time (start,
// or end for an end action) after its planned time. An action whose target
// had already exited logged nothing and is skipped.
double fault_lateness_ms(const History& h, const std::vector<Action>& actions);

// Checks a finished trial dir (history.jsonl) against the scenario. With the
// plan's actions (the run loop has them), also how late its signals fired.
TrialResult check_trial_dir(const Scenario& s, const std::string& dir, int trial, std::uint64_t run_seed,
                            std::uint64_t seed, const std::vector<Action>* planned = nullptr);

RunResult run(const std::vector<Scenario>& scenarios, const RunOptions& opt);

// Makes SIGINT, SIGTERM, SIGHUP and SIGPIPE set the process's stop flag
// instead of ending it: run() stops starting trials, kills the running ones
// and returns what finished, marked interrupted; a write to a closed pipe
// fails with EPIPE instead of killing the process. run() installs them
// itself (without SA_RESTART while trials run, so waitpid wakes up; with it
// afterwards, so report writing is not cut short); the CLI installs them
// before loading scenarios, so a signal then counts too. Sticky: every later
// run() in the process (a replay's, a shrink's) stops at once.
void install_stop_signals(bool restart);
bool stop_signalled();

}  // namespace harness
