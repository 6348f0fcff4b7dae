// A scenario file (scenarios/*.toml): the topology of jobs on one node, the
// workload each rank runs, the faults to inject, and what it expects. Every
// invariant is checked on every trial; a scenario may only excuse one, with a
// written reason that every report shows.
// See docs/scenarios.md for the format. Parsing rejects unknown keys and
// out-of-range values with "file:line: what is wrong" (exit code 2).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace harness {

using Ms = std::chrono::milliseconds;

// "a-b" or a single duration "a" (then min == max).
struct MsRange {
  Ms min{0}, max{0};
};

struct Workload {
  bool acquire = true;     // get a prefix
  int rounds = 0;          // barrier rounds after acquiring (barrier "<prefix>_barrier")
  MsRange round_jitter{};  // sleep before each round
  MsRange hold{};          // sleep after the rounds, before release
  bool release = true;
  std::vector<std::string> segments;  // job segments the local leader creates after acquire
  bool clean_before = false;          // run clean_stale before acquiring
  bool clean_after = false;           // run clean_stale after releasing
  // Datasets each rank holds at once under the same job key and dirs (train
  // and val in one process): acquired in turn, released last-first.
  int datasets = 1;
  // Run clean_stale between the first dataset's construction (its acquire
  // and segments) and the second's acquire, as #767's reporter does between
  // building train and val: the other datasets stay live meanwhile. Needs
  // datasets >= 2 and acquire.
  bool clean_between = false;
  // The barrier's own liveness-check interval (shmcoord's
  // BarrierOptions::liveness_interval); 0: the subject's default (100 ms).
  Ms barrier_liveness{0};
  // User code with a retry loop (Streaming PR #985 wraps attaches in
  // util.retry): an acquire or a barrier wait that fails (an error or a
  // timeout) is invoked again, up to this many more times, as the same round.
  int retries = 0;
  // A neighbour that keeps acting (issue 20 §2: every window of the others
  // met by an acquire or a cleanup): the whole workload (clean_before,
  // acquire, hold, release, clean_after) runs again and again until this long
  // after the first pass began, each pass after start_jitter, so the process
  // is inside one op or another all that time. 0: once. One rank, no rounds, loader, launcher or second
  // dataset: each pass is a job of its own (a fresh acquire and its release).
  Ms repeat_for{0};
};

// A rank's DataLoader workers ([job.loader]): started by the rank after its
// acquire, as DataLoader does when iteration begins. With "fork" they inherit
// the rank's handles (registry, barrier, segments, resource tracker); with
// "spawn" they are fresh processes that bind to the job's objects by name.
struct Loader {
  int workers = 0;             // per rank; 0: no loader workers (the rank iterates itself)
  bool fork = true;            // start = "fork" | "spawn"
  // barrier = "workers": the loader workers enter the job's barrier, with
  // num_procs = ranks x workers (StreamingDataset._get_work); the rank does
  // not. barrier = "rank": the rank attaches and runs the rounds itself, and
  // its loader workers (forked after it attached: they hold a copy of its
  // seat) work for `work`, then exit while the rank's rounds go on.
  bool enter_barrier = true;
  MsRange work{};              // how long a loader worker works before it exits (barrier = "rank")
};

// A real launcher ([job.launcher]): the job's ranks are children of a real
// torchrun elastic agent (/usr/bin/python3 -m torch.distributed.run), which
// the supervisor starts in their place.
struct Launcher {
  std::string kind;            // "" (none) | "torchrun"
  int max_restarts = 0;        // the agent re-runs the ranks this often after a rank fails
  // run_id = "unique" (a --rdzv_id per job) | "default" (torchrun's own
  // default, "none" for every job: TORCHELASTIC_RUN_ID collides across jobs).
  bool default_run_id = false;
  // job.teardown: once the launcher has exited or was killed, no process of
  // its job outlives it by more than this.
  Ms teardown{10000};
  bool present() const { return !kind.empty(); }
};

enum class LwsMode { kSet, kMissing, kWrong };

struct JobSpec {
  int ranks = 1;                     // processes on this node (local world size)
  std::vector<std::string> dirs;     // "{job}" expands to the job index
  bool remote = false;               // dirs have a remote
  MsRange start_jitter{};            // delay before the worker starts its ops
  LwsMode lws_mode = LwsMode::kSet;  // misconfiguration: missing or wrong local world size
  // The job's namespace is nested in the trial's: its name root is the
  // trial's + this (e.g. "b."), as a second library or user whose root
  // happens to extend ours.
  std::string root_suffix;
  int lws_wrong = 0;                 // for kWrong: the value rank 0 reports (others report ranks)
  Workload workload;
  Loader loader;
  Launcher launcher;
  int line = 0;  // line of its [[job]] header (the same for every copy made by `count`)
};

struct FaultSpec {
  std::string kind;       // an injector name (see `shmstress list`)
  nlohmann::json params;  // the rest of the [[fault]] table, validated by the injector
  int line = 0;           // line of the [[fault]] header
  std::map<std::string, int> param_lines;  // line of each key in params, so an injector can
                                           // report "file:line" for the value it rejects
};

struct Scenario {
  std::string file;  // path it was loaded from
  std::string name;  // file stem unless set
  std::string description;
  std::vector<JobSpec> jobs;  // after expanding `count`
  std::vector<FaultSpec> faults;
  // invariant -> why its verdict does not count here ([excuse]; reason non-empty).
  std::map<std::string, std::string> excuses;
  std::vector<std::string> expect_reached;  // reached states that must occur, else inconclusive
  // A known-bad subject's scenario: it is expected to break one of these
  // invariants, in a trial that also shows every state of expect_evidence
  // (e.g. "error:acquire:file-exists"): that is what "caught" means.
  std::vector<std::string> expect_violation;
  std::vector<std::string> expect_evidence;
  // "file:line: ..." notes for the user (deprecated keys); nothing fatal.
  std::vector<std::string> warnings;
  Ms acquire_deadline{5000};
  Ms barrier_deadline{3000};
  Ms liveness{1000};  // a gone barrier participant is noticed by everyone within this (+ slack)
  Ms release{0};      // once a round is released every waiter leaves within this; 0: not judged
  Ms spin{40};        // ops.no-spin's budget (TrialMeta::spin_budget_ns, and why 40 ms)
  // Aligned start: the supervisor opens the trial's start gate when every
  // worker reported `ready`, or after this long (recorded).
  Ms start{30000};
  // Eventual cleanup: once its holders are gone, what a job created is gone
  // within this, cleaned by the processes it left (resource trackers, pool
  // workers); the audit lets them run that long. 0: a 1 s grace.
  Ms cleanup{0};
  Ms trial_timeout{20000};    // the harness kills everything after this: a hang
  bool final_cleanup = true;  // harness runs clean_stale after the workers end
  // The run's sometimes-on pauses (injectors/sometimes.cc) may be added to its
  // trials; false for a scenario whose premise a stray pause would spoil.
  bool sometimes = true;
  // The subject this scenario is written for: "native", a named subject
  // (subjects/<name>/subject.toml) or "exec:CMD". Empty: whatever --subject says.
  // An explicit --subject on the command line wins.
  std::string subject;
  int subject_line = 0;  // of the `subject` key, for errors found when resolving it
  std::vector<std::string> subject_command;  // resolved from `subject` (empty: native)
  std::optional<std::string> subject_root;   // the subject's own shm name root, if it declares one
  std::string subject_shm_size;              // the subject's own /dev/shm size, if it declares one
  int default_trials = 10;
  // A soak (--duration) starts a trial of this scenario in every `every`-th
  // round only: a scenario whose trials cost seconds (a real launcher imports
  // torch) must not take the soak's throughput with it.
  int every = 1;
  std::string raw_toml;  // the file's text, copied into each trial dir
};

// "250ms", "1.5s", "0-20ms", "10ms-2s" -> range; false with *why on bad input.
bool parse_range_text(std::string_view text, MsRange* out, std::string* why);

struct ScenarioError {
  std::string file;
  int line = 0;
  std::string message;
  std::string to_string() const;  // "file:line: message", printable (printable_text)
};

// Text for a terminal: control bytes (a NUL that would cut the message short,
// an escape sequence a file smuggles in) as \xNN, the C1 controls (U+0080 to
// U+009F, e.g. a terminal's 8-bit CSI) as \u00NN, a byte that is not valid
// UTF-8 as \xNN; everything else, UTF-8 included, as it is.
std::string printable_text(std::string_view s);

// Parses text (file is used for messages; name defaults to its stem; raw_toml
// is set to text). Invariant ids and reached-state names are checked against
// the checker registry here; fault kinds (and `fault:<kind>` states) by the
// caller against the injector registry. Never throws: on failure returns
// nullopt and fills *err (if non-null) with "file:line: message".
std::optional<Scenario> parse_scenario(const std::string& text, const std::string& file,
                                       ScenarioError* err);
// Reads a regular file of at most kMaxUserFileBytes (files.h), then parses it.
std::optional<Scenario> load_scenario(const std::string& path, ScenarioError* err);

// Whether `state` can be reached: a checker's declared state, "fault:<kind>"
// (kind not checked here), "error:<op>:<code>" or "subject-unavailable".
// False with *why otherwise.
bool known_state_name(const std::string& state, std::string* why);
// A scenario name names a run directory: 1..200 of [A-Za-z0-9._-], not "." or
// "..". False with *why ("may only contain ...") otherwise.
bool valid_scenario_name(std::string_view name, std::string* why);

}  // namespace harness
