// The query layer every checker uses over a History (checker files keep to
// their invariant's rules and ask these). Facts several checkers derive from a
// History the same way: who held which
// prefix when (and how sure we are), whether a worker was stopped or dead at a
// moment, which names a fault seeded as another user's. Shared so that
// prefix.unique, prefix.exclusive-local and cleanup.safety never disagree on
// what "held" means. Pure functions of the History, like the checkers.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "checker.h"
#include "history.h"

namespace harness::checks {

inline constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

// Accumulates one CheckResult: problems raise the verdict, reached states are
// kept once each, in first-seen order.
class Report {
 public:
  explicit Report(std::string invariant) { r_.invariant = std::move(invariant); }
  void invalid(std::string problem);
  void unknown(std::string problem);
  void reach(std::string_view state);
  CheckResult take() { return std::move(r_); }

 private:
  CheckResult r_;
};

// "+12.345ms": a time relative to the trial start, as every problem line prints it.
std::string at(const History& h, std::int64_t t);
// "12.345ms": a duration.
std::string ms(std::int64_t ns);
// "job 0 rank 1 (pid 123)", "job 0 rank 1 worker 0 (pid 124)" for a loader worker.
std::string who(int job, int rank, int pid, int worker = -1);
std::string who(const Op& op);
std::string who(const Exit& e);

// Barrier seats. A job's barrier has a seat per rank, or, when loader workers
// enter it in their ranks' place (JobMeta::barrier_workers = W > 0), a seat
// per loader worker: rank * W + worker. A process without a seat (a rank whose
// workers enter for it, a loader worker of a rank that enters itself): -1.
int seat(const History& h, int job, int rank, int worker);
inline int seat(const History& h, const Op& op) { return seat(h, op.job, op.rank, op.worker); }
inline int seat(const History& h, const Exit& e) { return seat(h, e.job, e.rank, e.worker); }
// How many seats job's barrier has.
int seats(const History& h, int job);
// "rank 1", or "rank 1 worker 0" for a loader worker's seat.
std::string seat_name(const History& h, int job, int seat);
// "acquire of job 0 rank 1 (pid 123) invoked +1.000ms".
std::string describe(const History& h, const Op& op);

// An integer member of a JSON object, or nothing (never throws).
std::optional<std::int64_t> json_int(const Json& j, const char* key);
// A string member of a JSON object, or "" (never throws).
std::string json_string(const Json& j, const char* key);
// The string elements of an array member of a JSON object.
std::vector<std::string> json_strings(const Json& j, const char* key);

// Which of its process's datasets an op is about: args.dataset, 0 when absent
// (a worker that holds one dataset at a time does not say).
std::int64_t dataset_of(const Op& op);

// The prefix a segment or lock name carries as its last "\d{6}_" token
// ("/shmstress.t3.000002_barrier" → 2, ".../000002_barrier_filelock" → 2),
// or -1. Only the basename is looked at.
int name_prefix(std::string_view name);
// The same, numbered as History's prefixes are (kNamespaceStride): a name of
// a namespace nested in the trial's ("<root>b.000002_x") counts in its own
// registry; -1 for a name of no known namespace or with no prefix.
int name_prefix(const History& h, std::string_view name);
// Whether a name is the registry segment itself ("/shmstress.t3.registry"),
// which every live holder depends on.
bool is_registry_name(std::string_view name);
// Which namespace a registry name belongs to, numbered as namespace_index
// does (0: the trial's own), -1 if none the trial knows.
int registry_namespace(const History& h, std::string_view name);

// The exit of one worker process (pid 0 on either side matches any pid).
const Exit* exit_of(const History& h, int job, int rank, int pid);
// Whether a fault was aimed at this worker: in its job, by pid, else by rank
// (rank -1 in the fault: the whole job). A fault of job -1 aims at no worker.
bool aims_at(const Fault& f, int job, int rank, int pid);
// Whether the fault stops its target for its window (checkers/excuses.h).
bool is_stop(const Fault& f);
// Nanoseconds of [a, b] the worker spent inside a stop (SIGSTOP) window.
std::int64_t stopped_ns(const History& h, int job, int rank, int pid, std::int64_t a,
                        std::int64_t b);
// " (12.000ms of it stopped, 3.000ms waiting for a CPU, not counted)": how a
// latency was judged. The stop part only when there was one; the CPU part
// whenever it was measured (cpu_wait_ns >= 0, 0 included), so that a problem
// has the same shape (triage fingerprints) however loaded the machine was.
// "" when neither. `of_it`: "of it stopped", else "stopped".
std::string not_counted(std::int64_t stopped_ns, std::int64_t cpu_wait_ns, bool of_it = true);
// How long after its last logged op a worker's exit could have been seen but
// for the scheduler: the worker's own wait for a CPU since `last` (its
// completion's cpu_wait_ns against the exit's), plus the supervisor's
// (Exit::reaper_wait_ns). -1 when nobody measured either.
std::int64_t exit_cpu_wait_ns(const Exit& e, const Op* last);
// The stop window aimed at the worker that covers t, if any.
const Fault* stop_window_at(const History& h, int job, int rank, int pid, std::int64_t t);
// The last moment the worker certainly was alive: its latest event, a
// signal the harness sent it before it was reaped, or the supervisor's look
// that found it alive (`alive`).
std::int64_t last_alive(const History& h, int job, int rank, int pid);
// The first moment the worker certainly was dead: the supervisor saw a
// SIGKILL's effect (Fault::effect_t), or reaped it. kNever if neither.
std::int64_t dead_by(const History& h, int job, int rank, int pid);
// The moment from which the process of `e` acted no more, for judging what a
// peer's error says of its death: the announcement of the crash point it
// killed itself at (nothing follows it but its own SIGKILL), else its reaping.
// Unlike dead_by, not a certain death: the kernel may still count it alive for
// the instant between its announcement and its SIGKILL, so a bound on how soon
// a death is noticed must not start here.
std::int64_t gone_t(const Exit& e);

// Names (segments or lock paths) a fault seeded as another user's: faults
// whose detail has "foreign": true and a "name", "path" or "names"; a shm
// name in both spellings, "/x" and "x". The keys of foreign_owners.
std::set<std::string> foreign_names(const History& h);
// The owner uid of each such name (its fault's detail "uid"; -1 when it does
// not say). "Another user's" is relative to
// whoever cleans: a worker an `unprivileged` fault runs as that uid owns what
// was seeded under it (F13's non-root half: a user's cleanup of its own dead
// job's entries is no removal of another user's).
std::map<std::string, int> foreign_owners(const History& h);
// The uid a worker ran as: the uid of an `unprivileged` fault aimed at it,
// else the harness's own (root, 0).
int worker_uid(const History& h, int job, int rank, int pid);
// Prefixes a fault seeded something under (stale segments, lock files).
std::set<int> seeded_prefixes(const History& h);

// One rank's hold of a prefix, from one acquire (and the release of the same
// dataset: a process may hold several at once).
struct RankHold {
  const Op* acquire = nullptr;
  int job = -1, rank = -1, pid = 0, prefix = -1;
  bool certain =
      false;  // the acquire returned ok; else it was cut off (info) in a job that got this prefix
  // Certainly held in [sure_start, sure_end); possibly held in [maybe_start, maybe_end).
  // On a record cut short (History::cut_t), a hold still running there is
  // certain only up to its holder's last sign of life: what the rest of the
  // trial can show (a death right after it) never makes it shorter.
  std::int64_t maybe_start = 0, sure_start = kNever, sure_end = 0, maybe_end = 0;
  enum class End { kReleased, kKilled, kExited, kRunning } end = End::kRunning;
  const Exit* exit = nullptr;
};

// A job's hold of a prefix: the union of its ranks' overlapping holds. After
// the last holder died without releasing, the prefix stays "stale" (still
// counted as held, DESIGN §4) until a cleanup that kept nothing of it, or the
// same job — same index or same local dirs, i.e. its restart — acquired it again.
struct JobHold {
  int job = -1, prefix = -1;
  std::vector<RankHold> ranks;
  std::int64_t maybe_start = kNever, sure_start = kNever, sure_end = 0, maybe_end = 0;
  bool died_holding = false;   // the last holder died or exited without releasing
  bool killed = false;         // ... by a signal
  std::int64_t stale_end = 0;  // == maybe_end unless died_holding
  std::string stale_ended_by;  // "cleanup by job 1 (pid ..) at +..", "restart ...", "trial end"

  bool has_sure() const { return sure_start < sure_end; }
  std::string pids() const;  // "101,102"
};

// Every job hold of every prefix seen in an ok acquire, ordered by maybe_start.
std::vector<JobHold> prefix_holds(const History& h);

// Pool subjects (joblib): a parent's `pool` op is one parallel call; the
// folders and files it creates inside it (`folder`, `file` ops) are held by
// that pool until the call returns. The pool op of the same process that was
// open all through `made`, or nullptr.
const Op* pool_holding(const History& h, const Op& made);
// Whether `name` is `dir` or lies under it ("dir/...").
bool under(std::string_view name, std::string_view dir);
// Whether the worker that ran `w` had itself begun to remove `name` before `w`
// ended: its own `remove` of it (or of a folder holding it), or its own
// resource tracker told to drop it (`track` maybe_unlink). Its own cleanup is
// not another's removal.
bool removing_itself(const History& h, const Op& w, std::string_view name);

// [a0, a1) and [b0, b1) share a moment.
inline bool overlaps(std::int64_t a0, std::int64_t a1, std::int64_t b0, std::int64_t b1) {
  return a0 < b1 && b0 < a1 && a0 < a1 && b0 < b1;
}

}  // namespace harness::checks
