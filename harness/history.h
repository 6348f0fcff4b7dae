// The history of one trial: what every worker said it did (invoke / ok / fail
// events, one JSON line per write(2) in history.jsonl, see docs/worker-protocol.md),
// what the harness did to it (faults, exits), and the leak audit. Checkers are
// pure functions of a History; nothing here reads files.
//
// Every event is validated once, here, into the typed records below: an event
// that does not fit the protocol is a history error (the trial is then at
// least unknown), never a crash and never a silently missing fact. Checkers
// read the typed fields; Op::args / Op::value keep the raw JSON for display.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace harness {

using Json = nlohmann::json;

enum class Outcome { kOk, kFail, kInfo };  // kInfo: cut off, may or may not have happened

// Op::info_cause of an op that was still open when the trial hit its overall
// timeout: the operation hung. Checkers match on this exact text.
inline constexpr char kCauseTrialTimeout[] = "trial timeout";
// Op::info_cause of an op still open where a running trial was judged (a
// History with cut_t): it may yet end either way, and no checker reads it as
// a hang or a failure.
inline constexpr char kCauseCut[] = "still open at the cut";

// A segment as a process reported it: its name and, when known, which object
// it was (st_dev, st_ino), so a removal and re-creation under the same name is
// told apart from the original.
struct SegmentRef {
  std::string name;
  std::optional<std::uint64_t> dev, ino;
  bool same_object(const SegmentRef& o) const {
    return dev && ino && o.dev && o.ino && *dev == *o.dev && *ino == *o.ino;
  }
};

// One entry of a witness op: what a segment's creator saw of it.
struct Sighting {
  enum class State { kPresent, kMissing, kError };
  std::string name;
  State state = State::kError;
  std::uint64_t dev = 0, ino = 0;  // kPresent
  std::string error;               // kError
};

// One operation of one worker. Ops are "acquire", "release", "barrier",
// "barrier_attach", "barrier_detach", "clean", "segment" (create a job
// segment), "witness" (re-check the segments it created); a pool subject
// (joblib) adds "pool" (one parallel call, its workers busy inside it),
// "folder" and "file" (created during the pool), "chmod", "track" (its
// resource tracker told), "remove" (what its own delete removed).
struct Op {
  int job = -1;
  int rank = -1;        // global rank within the job
  int local_rank = -1;
  int worker = -1;      // >= 0: the op ran in loader worker #worker of that rank (its own pid)
  int pid = 0;
  std::string op;
  std::int64_t id = 0;        // per-worker sequence number
  std::int64_t invoke_t = 0;  // CLOCK_MONOTONIC ns
  std::int64_t complete_t = 0;  // for kInfo: when the worker was seen dead (or trial end)
  Outcome outcome = Outcome::kInfo;
  Json args;                  // e.g. {"round": 3}
  Json value;                 // ok: e.g. {"prefix": 2} / {"round": 3} / {"removed": [...], "kept": [...]}
  std::string error_code;     // fail: shmcoord code name ("timeout", "broken", "in-use", ...)
  std::string error_message;
  std::string info_cause;     // kInfo: "killed by harness (SIGKILL)", "crash point X", "trial timeout"
  // The subject said it could not report everything (a list cut, a message
  // shortened), or the writer died between the lines of one event: checks
  // that read this op's result may not call it complete.
  bool truncated = false;
  // The worker's cumulative wait for a CPU (docs/worker-protocol.md,
  // cpu_wait_ns) as it logged the invoke and the completion; -1: not given.
  std::int64_t invoke_wait_ns = -1, complete_wait_ns = -1;
  // Its cumulative time on a CPU (cpu_run_ns) at the same two reads; -1: not given.
  std::int64_t invoke_run_ns = -1, complete_run_ns = -1;
  // The supervisor's look at the op's process while the op was open (a `cpu`
  // event, docs/worker-protocol.md): by sample_t it had run sample_run_ns on
  // a CPU and waited sample_wait_ns for one, cumulatively. sample_t 0: none.
  std::int64_t sample_t = 0, sample_run_ns = -1, sample_wait_ns = -1;
  // Nanoseconds of this op the scheduler kept its process off a CPU while it
  // was runnable: time an oversubscribed machine, not the subject, added to
  // its latency. 0 when not both ends say.
  std::int64_t cpu_wait_ns() const { return std::max<std::int64_t>(0, measured_cpu_wait_ns()); }
  // The same, or -1 when the op's two ends did not both measure it.
  std::int64_t measured_cpu_wait_ns() const {
    return invoke_wait_ns >= 0 && complete_wait_ns >= invoke_wait_ns ? complete_wait_ns - invoke_wait_ns : -1;
  }

  // Typed results, validated by build_history (the raw JSON stays in args/value).
  std::optional<int> prefix;               // acquire ok: the prefix granted
  bool has_present = false;                // acquire ok: the value listed "present"
  std::vector<SegmentRef> present;         // acquire ok: what existed under the prefix as granted
  std::optional<std::int64_t> round;       // barrier: args.round, the caller's round
  std::optional<std::int64_t> generation;  // barrier ok: value.round, the subject's own count
  std::vector<std::string> removed, kept, skipped;  // clean ok; remove ok: removed
  // segment / folder / file ok: what was created; chmod ok: what was changed.
  std::optional<SegmentRef> segment;
  // folder / file ok: the permission bits as created; chmod ok: as changed to.
  std::optional<unsigned> mode;
  std::string witness_when;                // witness: args.when ("release", "end", "live")
  std::vector<Sighting> sightings;         // witness ok
};

// A fault window the harness (or an injector) opened. Instant faults have end == start.
struct Fault {
  std::string kind;   // "sigkill", "sigstop", "crash-point", "stale-segment", ...
  int job = -1;       // -1: not aimed at a job
  int rank = -1;
  int worker = -1;    // >= 0: aimed at that loader worker of the rank
  bool launcher = false;  // aimed at the job's launcher (rank -1)
  int pid = 0;
  std::int64_t start_t = 0;
  std::int64_t end_t = 0;
  int signal = 0;             // the signal sent (start of the window), if any
  // When the supervisor saw the signal's effect (docs/worker-protocol.md:
  // start_t is taken before kill(2); a SIGKILLed target runs nothing after
  // effect_t). 0: not seen / not a signal.
  std::int64_t effect_t = 0;
  // The window's start said no cleanup may remove its file (a held lock):
  // kept for the whole window, whatever its end event says.
  bool protect = false;
  // A whole-tree signal (the process group): the target's helpers, e.g. its
  // resource tracker, got it too.
  bool tree = false;
  Json detail;
};

// How a worker process ended, from the reaper.
struct Exit {
  int job = -1;
  int rank = -1;
  int worker = -1;           // >= 0: a loader worker of that rank
  bool launcher = false;     // the job's launcher (rank -1)
  int pid = 0;
  std::int64_t t = 0;
  int exit_code = -1;        // >= 0 if it exited
  int signal = 0;            // > 0 if a signal killed it
  // Its parent reaped it before the supervisor could read how it ended (a
  // process the supervisor did not start): t is known, the status is not.
  bool status_unknown = false;
  // A loader worker killed because the rank that forked it died (the kernel's
  // parent-death signal): a consequence of that death, not a crash.
  bool parent_gone = false;
  // A rank its launcher stopped (SIGTERM, then SIGKILL) to restart the job or
  // because the launcher itself was stopped. (For a rank its launcher reaped
  // first, from the rank's own `signalled` event: build_history.)
  bool by_launcher = false;
  bool signal_sent_by_harness = false;  // SIGKILL from a fault or from teardown
  bool teardown = false;     // killed because the trial ended / timed out
  std::string crash_point;   // set if it killed itself at a named crash point
  // When it announced that point (-1: no crash point). Nothing follows the
  // announcement but the SIGKILL it raises, so it was gone from then on; `t`
  // is only when the supervisor reaped it, which may be after a peer failed
  // on its death.
  std::int64_t crash_point_t = -1;
  // The worker's final cumulative wait for a CPU, read by the supervisor from
  // the zombie before reaping it (-1: unknown): with the last value the worker
  // logged, how long the scheduler kept it from exiting.
  std::int64_t cpu_wait_ns = -1;
  // At most how much later the supervisor saw the exit (t) than it could
  // have, for waiting for a CPU itself (0: unknown).
  std::int64_t reaper_wait_ns = 0;
};

// A process that announced itself with a `start` event: a rank (role
// "rank"), one of its loader workers ("loader"), or the supervisor's record
// of a launcher it started ("launcher").
struct Process {
  int job = -1, rank = -1, worker = -1, pid = 0;
  std::string role;
  std::int64_t t = 0;
  int ppid = 0;  // as the process saw its parent (0: not said)
};

// A launcher ended (exited or was killed) at t while processes of its job
// lived: each member and when the supervisor saw it gone (0: it outlived the
// trial's end, until the audit killed it). job.teardown judges it.
struct Teardown {
  int job = -1;
  int launcher_pid = 0;
  std::int64_t t = 0;
  std::int64_t bound_ns = 0;
  struct Member {
    int pid = 0;
    std::string role;  // "rank", "loader", "other" (a tracker, a helper)
    std::int64_t gone_t = 0;
  };
  std::vector<Member> members;
};

// What the audit found after the trial and its cleanup step.
struct Audit {
  bool ran = false;
  std::vector<std::string> leftover_shm;    // names in the trial's /dev/shm
  std::vector<std::string> leftover_locks;  // paths in the trial's lock dir
  std::vector<int> orphan_pids;             // trial processes alive after teardown
  // Without a private /dev/shm: names new in the shared one since the trial
  // began, outside the trial's root (the subject's, or another program's).
  std::vector<std::string> shared_shm_new;
  int max_fds = -1;                         // max fds any worker reported holding after acquire
  int max_fds_job = -1, max_fds_rank = -1, max_fds_pid = 0;  // the worker that reported max_fds
  bool truncated = false;  // part of the audit was lost: its lists may be incomplete
  // How long the audit let the trial's remaining processes (trackers, pool
  // workers of a killed parent) run on their own before killing them, and
  // whether they all exited by themselves within it (deadlines.cleanup; the
  // default is a 1 s grace), and when the last one was seen gone.
  std::int64_t straggler_wait_ns = 0;
  std::optional<bool> stragglers_exited;
  std::optional<std::int64_t> settled_t;
};

// The scenario facts checkers need (not the whole scenario).
struct JobMeta {
  int ranks = 1;               // processes of this job on the node
  int barrier_rounds = 0;      // rounds each rank runs
  // Loader workers per rank that enter the job's barrier in its place (0:
  // the ranks enter it): the barrier's participants are ranks x workers.
  int barrier_workers = 0;
  // The scenario misconfigures the job (its local world size missing or
  // wrong): invalid-argument and mismatch are the clean answer.
  bool misconfigured = false;
  // The job's namespace nested in the trial's ([job] root_suffix, "" for the
  // trial's own): prefixes of different namespaces are different registries.
  std::string root_suffix;
  bool acquire = true;         // each rank acquires a prefix first
  std::vector<std::string> dirs;
  std::vector<bool> has_remote;
};
struct TrialMeta {
  std::string scenario;
  std::uint64_t seed = 0;
  std::vector<JobMeta> jobs;
  std::int64_t acquire_deadline_ns = 0;  // subject's own deadline for acquire
  std::int64_t barrier_deadline_ns = 0;  // subject's own deadline for one barrier round
  std::int64_t grace_ns = 2'000'000'000; // slack allowed past a deadline
  // barrier.liveness: once a participant is gone, every survivor's barrier op
  // ends within this (+ kLivenessSlackNs), whatever the barrier deadline.
  std::int64_t liveness_ns = 1'000'000'000;
  // barrier.liveness: once a round is released (one participant left it),
  // every other participant leaves it within this; 0: not judged.
  std::int64_t release_ns = 0;
  std::int64_t fd_bound = 64;            // prefix.progress: fds a worker may hold after acquire
  // ops.no-spin: CPU time a waiting op may burn, past which it must have
  // run under a tenth of its time (harness::spun); the scenario's
  // deadlines.spin. A correct op of the native worker ran at most 14 ms (in a 3 s wait), and
  // none that ran a tenth of its time ran 10 ms (docs/worker-protocol.md, cpu_run_ns); 0: not
  // judged.
  std::int64_t spin_budget_ns = 40'000'000;
  bool cleanup_step = false;             // the workload ends with a cleanup step
};

// ops.no-spin's rule (checkers/ops_no_spin.cc), shared with the supervisor,
// which logs its look at a running op's CPU only when the rule holds there.
// An op open `open_ns`, whose process ran `ran_ns` on a CPU, waited
// `waited_ns` for one and was stopped `stopped_ns` meanwhile, spun if what it
// surely ran (kSpinReadSlackNs less: a completion's counter is read a little
// before its line is written, and a look may come just after that) is past `budget_ns` and more
// than a tenth of the time it could run (open, less its waits for a CPU and its stops). A waiter
// that sleeps between looks runs well under 1% of it: shmcoord's pollers ran at most 13 ms in a 3 s
// wait; one whose sleeps are a millisecond lock wait between liveness checks, 30%.
inline constexpr std::int64_t kSpinReadSlackNs = 2'000'000;
// The first half alone: what it surely ran is past the budget (so that a
// caller need not weigh the rest for the many ops that ran less).
inline bool past_spin_budget(std::int64_t ran_ns, std::int64_t budget_ns) {
  return budget_ns > 0 && ran_ns - kSpinReadSlackNs > budget_ns;
}
inline bool spun(std::int64_t open_ns, std::int64_t ran_ns, std::int64_t waited_ns,
                 std::int64_t stopped_ns, std::int64_t budget_ns) {
  return past_spin_budget(ran_ns, budget_ns) &&
         (ran_ns - kSpinReadSlackNs) * 10 > open_ns - waited_ns - stopped_ns;
}

struct History {
  TrialMeta meta;
  std::vector<Op> ops;        // sorted by invoke_t
  std::vector<Fault> faults;  // sorted by start_t
  std::vector<Exit> exits;
  Audit audit;
  std::int64_t start_t = 0, end_t = 0;
  bool timed_out = false;     // the trial hit its overall timeout (a hang)

  // What the supervisor and the subject said about the trial itself.
  bool started = false, ended = false;      // the supervisor's trial start / end events
  // A trial event whose phase is none of the protocol's: the subject writes
  // this file too, so a missing start or end after one is damage to the
  // history (the trial unknown), not a supervisor that did not finish.
  bool malformed_trial_event = false;
  std::vector<std::string> harness_errors;  // harness-error messages, in log order
  std::vector<Process> processes;           // `start` events, in time order
  // The supervisor's looks at a worker it found alive (`alive`,
  // docs/worker-protocol.md): process `pid` had not begun to exit at `t`, so
  // whatever it held it still held then. In time order.
  struct Alive {
    int job = -1, rank = -1, pid = 0;
    std::int64_t t = 0;
  };
  std::vector<Alive> alive;
  std::vector<Teardown> teardowns;          // launchers that ended with their jobs' processes alive
  std::string root;  // the trial's name root (its start event's "root")
  // When the start gate opened (aligned start); time-placed faults count from it.
  std::optional<std::int64_t> gate_t;
  std::optional<std::string> unavailable;   // a subject event said available: false (why)

  // Set when this is the record of a running trial up to a cut (build_history
  // with cut_t; docs/architecture.md, "Judging a running trial"): every
  // event of the trial with t < cut_t and nothing after. end_t is the cut,
  // ended is true, an op still open is kInfo with kCauseCut, and a process
  // without an exit was not known to be gone. Only checkers registered with
  // judges_cuts read such a record, and under it a hold still running counts
  // as certain only up to its holder's last sign of life.
  std::optional<std::int64_t> cut_t;
  // The supervisor's `trial` events of phase "cut" (it stopped the trial at
  // its first violation, judged up to that t), in log order.
  std::vector<std::int64_t> cut_marks;
};

// Scheduling slack on top of TrialMeta::liveness_ns.
inline constexpr std::int64_t kLivenessSlackNs = 500'000'000;

// Parses history.jsonl lines into a History. Unmatched invokes become kInfo
// ops closed at the worker's exit (or end_t) with the reaper's cause. Lines
// split with "continues" are merged first. Events that do not fit the
// protocol are reported in `errors` (history errors) and skipped.
//
// With cut_t: the record of the trial up to that instant (History::cut_t),
// from the events with t < cut_t alone. It is a prefix of whatever the trial
// goes on to write only if every process that writes had written past the
// cut (harness/cut.h says when the supervisor knows that).
History build_history(const std::vector<Json>& events, const TrialMeta& meta,
                      std::vector<std::string>* errors,
                      std::optional<std::int64_t> cut_t = std::nullopt);

// Prefixes of nested namespaces ([job] root_suffix) are numbered apart: the
// n-th namespace's prefix p is n * kNamespaceStride + p, so that every check
// comparing prefixes compares them within one registry. The trial's own
// namespace is n = 0 (prefixes unchanged).
inline constexpr int kNamespaceStride = 1'000'000;
int namespace_index(const TrialMeta& meta, const std::string& root_suffix);
// Splits history.jsonl into JSON objects. A line that is not one is an error;
// a torn write (a writer killed inside write(2)) followed on the same line by
// a complete event costs only the torn one.
std::vector<Json> parse_jsonl(const std::string& text, std::vector<std::string>* errors);

// Merges a continuation line into what came before (objects key by key, arrays
// concatenated, other values from `more`). See docs/worker-protocol.md.
void merge_continuation(Json& into, const Json& more);

}  // namespace harness
