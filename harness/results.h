// What a finished run is: per trial verdicts and facts, the counters reports
// need. Reports (reports/) are pure functions of a RunResult, so
// `shmstress check` and future `report` commands can regenerate them offline.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "checker.h"

namespace harness {

struct TrialResult {
  std::string scenario;
  std::string scenario_file;
  int trial = 0;
  std::uint64_t run_seed = 0;
  std::uint64_t seed = 0;
  Verdict verdict = Verdict::kValid;
  std::vector<CheckResult> checks;
  std::string dir;        // kept for failing trials, else removed
  bool kept = false;
  bool dir_dropped = false;  // failing, but past the --max-kept cap: summarised only
  bool harness_error = false;
  std::string unavailable;  // the subject could not run: why (the trial is skipped, inconclusive)
  std::string harness_error_text;
  std::map<std::string, int> faults;   // by kind
  std::set<std::string> reached;
  std::string reproduce;
  double seconds = 0;
  std::vector<double> acquire_ms, barrier_ms;  // latencies of ok ops
  std::vector<double> recovery_ms;  // fault end -> the next successful barrier round
};

struct RunResult {
  std::string run_id;
  std::string out_dir;
  std::uint64_t seed = 0;
  std::string subject = "native";
  int shard_index = 0, shard_count = 1;
  std::vector<TrialResult> trials;
  std::map<std::string, std::vector<std::string>> expect_reached;  // scenario -> states it targets
  double elapsed = 0;
  bool interrupted = false;

  Verdict verdict() const;
  bool harness_failed() const;
  std::vector<std::string> missing_reached() const;  // "scenario: state" never reached
  int exit_code() const;  // DESIGN.md §8
};

}  // namespace harness
