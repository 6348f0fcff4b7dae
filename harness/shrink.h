// Shrinking a failing trial: delta debugging over its scenario. Each step
// tries one reduction (drop a fault, a job, a rank, half the rounds, the
// workload's extras) and keeps it if the same invariant still fails within
// `retries` re-runs of the same trial (processes are not deterministic, so one
// passing run proves nothing). Stops when no reduction is kept, or at the
// budget. The result is a scenario file plus the command that replays it.
#pragma once

#include <string>

#include "run.h"

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
  std::string invariant;
  ShrinkSize original, minimal;
  int candidates = 0, kept = 0;
  std::string minimal_file; // <trial dir>/minimal.toml
  std::string reproduce;
};

ShrinkResult shrink(const ShrinkOptions& opt);

}  // namespace harness
