// What a run is: per-trial results as the run loop produces them, and the run
// they add up to. A RunResult is an aggregate, not a list of trials: counters
// per (scenario, invariant), per fault kind and reached state, exact latency
// classes per scenario, bounded quantile sketches for the whole run, and the
// failing trials with their details up to a cap. Its memory is
// O(scenarios x invariants + listed failing trials), flat in the number of
// trials, so a 24-hour soak holds what a 1-minute run holds. Reports
// (reports/) are pure functions of a RunResult; `check` and `report` rebuild
// one offline from stored trial dirs.
//
// Violations are grouped into buckets by fingerprint (triage.h), and each
// bucket is new or known to the run's baseline (baseline.h); the number of
// buckets kept is capped (kMaxBuckets), so they stay flat too.
//
// Process contract: plain values in the harness process; nothing here is
// shared with workers or survives the process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "checker.h"
#include "known.h"

namespace harness {

// How a trial of a scenario with expect_violation went (docs/scenarios.md).
enum class Expectation {
  kNone,        // the scenario expects nothing
  kMet,         // it broke an expected invariant, with every expected evidence state
  kNoEvidence,  // it broke an expected invariant, without the subject's own evidence
  kOther,       // it broke only other invariants
  kClean,       // it broke nothing
};
const char* expectation_name(Expectation e);  // "met", "no-evidence", "other", "clean", "none"

struct TrialResult {
  std::string scenario;
  std::string scenario_file;
  int trial = 0;
  std::uint64_t run_seed = 0;
  std::uint64_t seed = 0;
  Verdict verdict = Verdict::kValid;
  std::vector<CheckResult> checks;
  std::string dir;  // kept for failing trials, else removed
  bool kept = false;
  bool dir_dropped = false;  // failing, but past the --max-kept cap: summarised only
  bool harness_error = false;
  std::string unavailable;  // the subject could not run: why (the trial is skipped, inconclusive)
  std::string harness_error_text;
  std::map<std::string, int> faults;  // by kind
  std::set<std::string> reached;
  std::string reproduce;
  double seconds = 0;
  std::vector<double> acquire_ms, barrier_ms;  // latencies of ok ops
  std::vector<double> recovery_ms;             // fault end -> the next successful barrier round
  // Events that did not fit the protocol (docs/worker-protocol.md): the first
  // few, and how many. Any makes the trial at least unknown.
  std::vector<std::string> history_errors;
  std::size_t history_error_count = 0;
  Expectation expectation = Expectation::kNone;
  std::string expected;          // what the scenario expects: "prefix.agreement with error:acquire:exists"
  std::string expectation_note;  // what happened instead, or how it was met
  // How late its timed faults fired, at worst (ms after their planned time):
  // the trial supervisor's own scheduling delay, which the run's adaptive
  // concurrency backs off on. 0 without timed faults.
  double late_ms = 0;
  // The longest any one op (or exit) of the trial waited for a CPU while
  // runnable (ms; Op::cpu_wait_ns, Exit::reaper_wait_ns): how far the
  // machine's load ate into the trial's timing. The timing checks do not
  // count it, but it says whether trials still meet their timing without
  // that: the adaptive concurrency grows only while it stays small.
  double cpu_wait_ms = 0;

  // Listed with its details in reports: some invariant was not valid, or the
  // harness failed.
  bool failing() const { return verdict != Verdict::kValid || harness_error; }
};

// Upper bounds (seconds) of the classes latencies are counted in exactly, per
// scenario: 100 us (an uncontended acquire) to 10 s (past every deadline the
// catalog sets), then everything above. They are the Prometheus histograms'
// buckets (docs/reports.md).
const std::vector<double>& latency_bounds_s();

// One latency distribution counted in latency_bounds_s() classes: what a
// Prometheus histogram holds. Fixed size.
struct LatencyClasses {
  std::vector<std::uint64_t> counts;  // per bound, not cumulative; empty until the first value
  std::uint64_t count = 0;            // every value, those past the last bound included
  double sum_s = 0;                   // their sum, in seconds
  void add_ms(double ms);
};

// Quantiles of a distribution in bounded memory. While it holds at most
// kExact values it keeps them, and quantiles are exact. Past that it keeps
// log-spaced buckets (as DDSketch, Masson et al., VLDB 2019): every quantile
// it reports is then within kRelativeError of the exact one (relative to the
// value) for values in 1e-9 .. 1e12 (ms: 1 fs to 30 years; smaller ones count
// as 0, larger ones as 1e12). The buckets cover that whole range from the
// start, about 2,400 counters (19 KiB), so the memory is fixed whatever the
// number or the spread of the values. count, min and max are always exact.
class QuantileSketch {
 public:
  static constexpr std::size_t kExact = 1024;
  static constexpr double kRelativeError = 0.01;

  void add(double v);
  std::uint64_t count() const { return count_; }
  double min() const { return min_; }
  double max() const { return max_; }
  // Nearest rank: the value at index round(p * (count - 1)) of the sorted
  // values (within kRelativeError once past kExact). 0 when empty.
  double quantile(double p) const;
  // The values in ascending order, each with how often it occurs: the values
  // themselves while exact, else each bucket's representative value.
  void for_each(const std::function<void(double value, std::uint64_t n)>& fn) const;
  bool exact() const { return buckets_.empty() && zeros_ == 0; }
  // Values or counters held: at most kExact, then a fixed number of buckets.
  std::size_t footprint() const { return exact_.size() + buckets_.size(); }

  // What it holds, to carry it across processes (summary.json) and to add up
  // the shards of one nightly: the exact values, or the non-empty buckets.
  struct State {
    std::uint64_t count = 0;
    double min = 0, max = 0;
    std::vector<double> exact;
    std::uint64_t zeros = 0;
    std::vector<std::pair<int, std::uint64_t>> buckets;  // (bucket index, values), ascending
  };
  State state() const;
  // Nothing if the state is not one state() could have returned.
  static std::optional<QuantileSketch> from_state(const State& s);
  // Both distributions at once: exact while the values together fit in kExact.
  void merge(const QuantileSketch& o);

 private:
  void bucket(double v, std::uint64_t n);
  std::uint64_t count_ = 0;
  double min_ = 0, max_ = 0;
  std::vector<double> exact_;
  std::uint64_t zeros_ = 0;  // bucketed values too small for a bucket (<= 1e-9)
  int first_index_ = 0;      // index of buckets_[0]
  std::vector<std::uint64_t>
      buckets_;  // bucket i: (gamma^(i-1), gamma^i], the whole range once bucketing
};

// What happened to one invariant over a scenario's trials.
struct InvariantTally {
  std::uint64_t invalid = 0;  // trials in which it was invalid
  std::uint64_t unknown = 0;  // ... unknown
  // Of the invalid ones: those with some problem in a new bucket, the rest
  // (every problem in a bucket the baseline knows). new_ + known = invalid.
  std::uint64_t invalid_new = 0, invalid_known = 0;
  Verdict worst = Verdict::kValid;
  std::string excused;        // the scenario's reason, if it excuses this invariant (then
                              // its counts are shown but count toward no verdict)
  std::uint64_t not_valid() const { return invalid + unknown; }
};

// One bucket: every violation that showed one problem shape (triage.h) in one
// scenario under one invariant.
struct Bucket {
  std::string fingerprint;  // "<invariant>/<scenario>/<hash>"
  std::string invariant, scenario;
  std::string shape;        // the normalized problem the fingerprint is over
  std::uint64_t trials = 0; // violations (trials) that showed it
  int first_trial = 0, last_trial = 0;  // the lowest and highest trial index among them
  // The first of them to finish: an example of the problem, and how to see it again.
  int example_trial = 0;
  std::uint64_t example_seed = 0;
  std::string example_problem;  // its problem line of this shape, as the checker wrote it
  std::string example_dir;      // its trial dir, if kept
  std::string reproduce;        // its reproduce command
  // From the baseline: known (with its reason and expiry), else new.
  bool known = false;
  std::string known_reason;
  std::optional<Day> known_expires;
  std::string shrunk;  // a minimal scenario file, once `shrink` ran on one of its trials
};

// The run's buckets, by fingerprint: at most kMaxBuckets of them. Past the
// cap a violation is still classified (new or known, by the baseline) and
// counted in its invariant's tally, but opens no bucket.
class BucketTally {
 public:
  static constexpr std::size_t kMaxBuckets = 500;

  // The baseline buckets are classified against (none: every bucket is new).
  void set_baseline(std::shared_ptr<const Baseline> b) { baseline_ = std::move(b); }
  std::shared_ptr<const Baseline> baseline_ptr() const { return baseline_; }
  // Re-reads every bucket's status from the baseline; the baseline's entries
  // seen are then the known buckets (past the cap nothing is known).
  void reclassify();
  const Baseline* baseline() const { return baseline_.get(); }
  // Files one violation (a check that was invalid) of trial t; true if some
  // problem of it is in a new bucket.
  bool add(const TrialResult& t, const CheckResult& c);
  // Adds a bucket of another run (a shard of one nightly, or summary.json
  // read back): counts add up, trial ranges widen, the example is the one
  // with the lowest trial index. With `reclassify` its status is read from
  // this tally's baseline, else it keeps the one it has.
  void merge(const Bucket& b, bool reclassify);
  void add_overflow(std::uint64_t n) { overflow_ += n; }
  void add_known_seen(const std::string& fingerprint) { known_seen_.insert(fingerprint); }

  const std::map<std::string, Bucket>& buckets() const { return buckets_; }
  std::map<std::string, Bucket>& buckets() { return buckets_; }
  std::size_t count(bool known) const;
  // Violations that would have opened a bucket past the cap.
  std::uint64_t overflow() const { return overflow_; }
  // Baseline entries seen this run (a subset of the baseline: bounded by it).
  const std::set<std::string>& known_seen() const { return known_seen_; }
  // Sets the shrunk scenario of the bucket `fingerprint`, if there is one.
  void set_shrunk(const std::string& fingerprint, const std::string& file);

 private:
  void classify(Bucket& b) const;
  std::shared_ptr<const Baseline> baseline_;
  std::map<std::string, Bucket> buckets_;
  std::uint64_t overflow_ = 0;
  std::set<std::string> known_seen_;
};

// One scenario's trials, counted.
struct ScenarioTally {
  std::string file;  // the scenario file of its first trial
  std::uint64_t trials = 0;
  std::uint64_t violating = 0;                       // trials whose verdict was invalid
  std::uint64_t unavailable = 0;                     // trials the subject could not run at all
  std::uint64_t harness_errors = 0;                  // trials in which the harness failed
  double seconds = 0;                                // the trials' durations, summed
  std::map<std::string, InvariantTally> invariants;  // every invariant checked in some trial
  std::map<std::string, std::uint64_t> faults;       // faults injected, by kind
  std::map<std::string, std::uint64_t> reached;      // trials that reached the state
  LatencyClasses acquire, barrier, recovery;
  std::string first_unavailable, last_unavailable;  // the subject's reasons
  std::string first_harness_error;
  std::uint64_t history_error_trials = 0;  // trials with events that did not fit the protocol
  std::string first_history_error;
  // expect_violation: what the scenario expects, and how its trials went.
  std::string expected;
  std::uint64_t expect_met = 0, expect_no_evidence = 0, expect_other = 0;
  bool expectation_met() const { return expect_met > 0; }
};

// The counters of a run: every trial adds to them, none is kept.
class RunTally {
 public:
  // The run-wide counters, to rebuild a tally read back from summary.json.
  struct Totals {
    std::uint64_t trials = 0, failing = 0, harness_errors = 0, not_valid_checks = 0,
                  new_violating = 0;
    // `residual`: composed over every trial with violations left out (unknown
    // checks, harness errors, an unavailable subject): what a run whose
    // violations are all known is judged by.
    Verdict verdict = Verdict::kValid, residual = Verdict::kValid;
  };
  RunTally() = default;
  RunTally(const Totals& t, std::map<std::string, ScenarioTally> scenarios, QuantileSketch acquire,
           QuantileSketch barrier, QuantileSketch recovery, BucketTally buckets);
  Totals totals() const;
  // Adds another run's tally (the shards of one nightly): every counter sums,
  // sketches merge, buckets merge by fingerprint (statuses kept).
  void merge(const RunTally& o);
  // Classifies the buckets again against another baseline (`merge
  // --baseline` of shards that ran without it). Per (scenario, invariant) the
  // violations are known if all its buckets are, else counted as new (a
  // violation may show several shapes; which trials showed a known one only
  // is not kept), so new counts are an upper bound; bucket statuses are exact.
  void reclassify(std::shared_ptr<const Baseline> b);

  // Counts the trial; true if it had a violation in a new bucket.
  bool add(const TrialResult& t);

  std::uint64_t trials() const { return trials_; }
  std::uint64_t failing() const { return failing_; }  // TrialResult::failing()
  std::uint64_t harness_errors() const { return harness_errors_; }
  // (trial, invariant) pairs that were not valid: the lines reports list.
  std::uint64_t not_valid_checks() const { return not_valid_checks_; }
  Verdict verdict() const { return verdict_; }  // composed over every trial
  // The same with violations the baseline knows taken as valid: what the exit
  // code is decided by. Without a baseline, verdict().
  Verdict triaged_verdict() const { return new_violating_ > 0 ? Verdict::kInvalid : residual_; }
  // Trials with a violation in a new bucket.
  std::uint64_t new_violating() const { return new_violating_; }
  BucketTally& buckets() { return buckets_; }
  const BucketTally& buckets() const { return buckets_; }
  const std::map<std::string, ScenarioTally>& scenarios() const { return scenarios_; }
  // Over every scenario.
  std::map<std::string, std::uint64_t> faults() const;
  std::map<std::string, std::uint64_t> reached() const;
  const QuantileSketch& acquire_ms() const { return acquire_; }
  const QuantileSketch& barrier_ms() const { return barrier_; }
  const QuantileSketch& recovery_ms() const { return recovery_; }
  // Elements held (map entries, sketch values and counters): bounded by the
  // catalog and the value range, never by the number of trials.
  std::size_t footprint() const;

 private:
  std::uint64_t trials_ = 0, failing_ = 0, harness_errors_ = 0, not_valid_checks_ = 0;
  std::uint64_t new_violating_ = 0;
  Verdict verdict_ = Verdict::kValid, residual_ = Verdict::kValid;
  BucketTally buckets_;
  std::map<std::string, ScenarioTally> scenarios_;
  QuantileSketch acquire_, barrier_, recovery_;
};

struct RunResult {
  std::string run_id;
  std::string out_dir;
  std::uint64_t seed = 0;
  std::string subject = "native";
  int shard_index = 0, shard_count = 1;
  std::map<std::string, std::vector<std::string>> expect_reached;  // scenario -> states it targets
  double elapsed = 0;
  bool interrupted = false;  // stopped by SIGINT/SIGTERM (or --stop-on-violation) before the end
  // How far along it is: trials planned (< 0: a --duration soak, whose
  // duration_s says), for progress reports.
  std::int64_t planned = -1;
  double duration_s = 0;
  // Trials at once: adaptive unless --parallel was given (concurrency.h).
  struct Concurrency {
    bool adaptive = false;
    int now = 0;                         // the current target
    int lowest = 0, highest = 0, backoffs = 0;
    double mean = 0;                     // over the run's time
  } concurrency;
  // Why the run could not start (its directory cannot be created): no trial
  // ran, nothing was written, and the caller exits 3.
  std::string error;

  RunTally tally;
  // The failing trials (TrialResult::failing) with their details, in the
  // order they finished: the first `max_listed` of them (0: all). Past the
  // cap a failing trial is only counted in `tally`; run() sets the cap to
  // --max-kept, so these are the trials whose dirs were kept.
  std::vector<TrialResult> listed;
  std::size_t max_listed = 0;

  // Counts the trial, and lists it if it is failing and the cap allows. True
  // if it had a violation in a new bucket.
  bool add(TrialResult t);
  // 0..1: trials done of those planned, or time elapsed of the duration; 1
  // once the run finished uninterrupted.
  double progress(bool finished) const;
  // The baseline's entries for scenarios this run ran whose buckets did not
  // recur (sorted by fingerprint).
  std::vector<const KnownFailure*> known_not_recurred() const;
  // Failing trials counted but not listed (past max_listed).
  std::uint64_t unlisted() const { return tally.failing() - listed.size(); }

  Verdict verdict() const { return tally.verdict(); }
  bool harness_failed() const { return tally.harness_errors() > 0; }
  std::vector<std::string> missing_reached() const;  // "scenario: state" never reached
  // DESIGN.md §8: 1 a violation in a new bucket (also when interrupted after
  // it; without a baseline every bucket is new), 3 the harness failed, 4
  // inconclusive (unknown verdicts, expected states never reached, or
  // interrupted before the end), else 0: a run whose only violations are in
  // buckets the baseline knows exits 0.
  int exit_code() const;
};

}  // namespace harness
