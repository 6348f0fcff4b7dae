// What the run loop tells whoever listens while a run goes on. The harness
// emits; reports subscribe (reports/subscribers.h: the console progress line,
// the live summary.json, the live metrics textfile, the live /metrics
// endpoint), so harness/ never depends on a report. A caller registers
// subscribers in RunOptions::subscribers, one line each; they are called in
// that order.
//
// Process contract: every call happens on the harness process's only thread,
// between two waits for a trial supervisor, never from a signal handler. A
// subscriber that blocks stalls the run (no trial is reaped or started
// meanwhile; a running trial's own timeout still holds, it is enforced by its
// supervisor). A subscriber must not throw. Nothing is called after run()
// returns, and a harness killed by SIGKILL just stops calling.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "results.h"

namespace harness {

// Where the run stands, after every finished trial and once at the end.
struct Progress {
  std::uint64_t done = 0;        // trials finished
  std::int64_t planned = 0;      // < 0: unknown (a --duration soak)
  std::uint64_t violations = 0;  // trials with an invalid verdict
  std::uint64_t new_violations = 0;  // ... of which in a bucket the baseline does not know
  int concurrency = 0;           // trials at once now (the adaptive target, or --parallel)
  double elapsed = 0;            // seconds since the run started
  double remaining = -1;         // estimated seconds left, < 0: unknown
  bool final = false;            // the last one: the run is over
};

// A trial whose supervisor was just started: it runs until its
// trial_finished (or the run's stop). `supervisor` is the process that runs
// it, a child of the harness (it may have exited already). A subscriber may
// watch it (a pidfd, waitid with WNOWAIT) but never reap it: the run loop
// waits for it, and a trial whose supervisor nobody can reap is never done.
struct TrialStart {
  std::string scenario;
  int trial = 0;
  pid_t supervisor = 0;
};

class RunSubscriber {
 public:
  virtual ~RunSubscriber() = default;
  // Once per trial whose supervisor started, before its trial_finished. A
  // trial that could not start (its plan, its dir, a failed fork) has a
  // trial_finished, a harness error, and no trial_started.
  virtual void trial_started(const TrialStart& /*t*/) {}
  // A trial was checked and counted: `t` is its result (its dir is gone
  // unless t.kept), `so_far` the run including it.
  virtual void trial_finished(const TrialResult& /*t*/, const RunResult& /*so_far*/) {}
  // After every trial_finished, and once with final = true when no trial
  // runs any more.
  virtual void progress(const Progress& /*p*/) {}
  // The run is over (interrupted or not); `r` is what run() returns.
  virtual void run_finished(const RunResult& /*r*/) {}
};

using RunSubscribers = std::vector<std::shared_ptr<RunSubscriber>>;

}  // namespace harness
