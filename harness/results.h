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
// Process contract: plain values in the harness process; nothing here is
// shared with workers or survives the process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "checker.h"

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
  Verdict worst = Verdict::kValid;
  std::string excused;        // the scenario's reason, if it excuses this invariant (then
                              // its counts are shown but count toward no verdict)
  std::uint64_t not_valid() const { return invalid + unknown; }
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
  void add(const TrialResult& t);

  std::uint64_t trials() const { return trials_; }
  std::uint64_t failing() const { return failing_; }  // TrialResult::failing()
  std::uint64_t harness_errors() const { return harness_errors_; }
  // (trial, invariant) pairs that were not valid: the lines reports list.
  std::uint64_t not_valid_checks() const { return not_valid_checks_; }
  Verdict verdict() const { return verdict_; }  // composed over every trial
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
  Verdict verdict_ = Verdict::kValid;
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

  RunTally tally;
  // The failing trials (TrialResult::failing) with their details, in the
  // order they finished: the first `max_listed` of them (0: all). Past the
  // cap a failing trial is only counted in `tally`; run() sets the cap to
  // --max-kept, so these are the trials whose dirs were kept.
  std::vector<TrialResult> listed;
  std::size_t max_listed = 0;

  // Counts the trial, and lists it if it is failing and the cap allows.
  void add(TrialResult t);
  // Failing trials counted but not listed (past max_listed).
  std::uint64_t unlisted() const { return tally.failing() - listed.size(); }

  Verdict verdict() const { return tally.verdict(); }
  bool harness_failed() const { return tally.harness_errors() > 0; }
  std::vector<std::string> missing_reached() const;  // "scenario: state" never reached
  // DESIGN.md §8: 1 a violation (also when interrupted after it), 3 the
  // harness failed, 4 inconclusive (unknown verdicts, expected states never
  // reached, or interrupted before the end), else 0.
  int exit_code() const;
};

}  // namespace harness
