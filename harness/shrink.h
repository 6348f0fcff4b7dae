// Shrinking a failing trial: delta debugging over its scenario. Each step
// tries one reduction (drop a fault, a job, a rank, half the rounds, the
// workload's extras) and keeps it if the same invariant still fails within
// `retries` re-runs of the same trial (processes are not deterministic, so one
// passing run proves nothing). Stops when no reduction is kept, or at the
// budget. The result is a scenario file plus the command that replays it.
#pragma once

#include <expected>
#include <string>
#include <vector>

#include "run.h"
#include "triage.h"

namespace harness {

struct ShrinkOptions {
  std::string trial_dir;
  std::string invariant;  // default: the first invariant the trial violated
  int retries = 5;
  int budget = 150;       // at most this many candidate runs
  RunOptions run;         // exe, subject, isolation; files/seed/trial are set by shrink
};

struct ShrinkSize {
  int jobs = 0, ranks = 0, faults = 0, rounds = 0;
  std::string to_string() const;
};

struct ShrinkResult {
  bool ok = false;
  std::string error;        // why it could not start (bad trial dir, no failing invariant, ...)
  bool bad_input = false;   // ... because the trial dir is not one, or a file in it is bad
  bool harness_failed = false;  // ... because of the environment (I/O)
  std::string invariant;
  ShrinkSize original, minimal;
  int candidates = 0, kept = 0;
  std::string minimal_file; // <trial dir>/minimal.toml
  std::string reproduce;
};

ShrinkResult shrink(const ShrinkOptions& opt);

// The fingerprints (triage.h) of the trial's violation of `invariant`, from
// its verdict.json: the buckets a shrink of it stands for.
std::vector<Fingerprint> trial_fingerprints(const std::string& trial_dir, const std::string& invariant);

// Writes the minimal scenario of `r` (shrunk from trial_dir) into `dir` as a
// regression scenario, ready for the catalog: named
// "regress-<scenario>-<hash>" after the first fingerprint, the fingerprints
// and the problem in its description, and the original scenario's
// `invariants` and `trials` (the shrink narrowed them to the one it kept
// failing). Returns the file's path, or why it could not be written (the
// result must load as a scenario).
std::expected<std::string, std::string> save_regression(const ShrinkResult& r, const std::string& trial_dir,
                                                        const std::vector<Fingerprint>& fingerprints,
                                                        const std::string& dir);

}  // namespace harness
