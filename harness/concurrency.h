// How many trials run at once when --parallel is not given. Trials mostly
// sleep (hold times, deadlines, pauses), so the number of cores says little
// about what a machine can take: on 2 cores the catalog runs 8x faster at 16
// trials at once than at 2. Too many, though, and processes wait to be
// scheduled. The timing checks do not count that wait (the kernel measures
// it: cpu_wait_ns, docs/worker-protocol.md), but the subject's own deadlines
// and the trial's timeout do, and faults fire late. So the target follows the
// machine's load and the trials' own timing, up to RunOptions::max_parallel
// (default 16 per core, run.h):
//
// - it grows while the CPU has room: moderate CPU pressure (the share of time
//   some runnable task waited, from /proc/pressure/cpu; without PSI, the run
//   queue in /proc/loadavg against the cores) and timers that fire on time (a
//   probe thread sleeps 5 ms at a time and measures how late it wakes), and
//   the trials that finished meanwhile had no op wait long for a CPU
//   (TrialResult::cpu_wait_ms);
// - it backs off (multiplicatively) when the CPU is saturated, when the probe
//   wakes late, or when a trial's own scheduled signals fired late (the
//   supervisor's lateness, TrialResult::late_ms) or a trial's op waited long
//   for a CPU (TrialResult::cpu_wait_ms), and then holds still for a
//   while before growing again; it never grows past what the run can fill.
//
// The decision (AdaptiveConcurrency) is a pure function of the samples it is
// fed, so it is tested with made-up load; LoadProbe is what measures it.
//
// Process contract: both live in the harness process. LoadProbe runs one
// thread that only sleeps and writes atomics (no locks, no allocation), so
// the harness can still fork trial supervisors safely; it is joined when the
// probe is destroyed. Workers and supervisors never see any of it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

namespace harness {

// The load over one window (since the previous sample).
struct LoadSample {
  double seconds = 0;     // length of the window
  // Share of the window in which some runnable task waited for a CPU
  // (0..1): PSI's cpu "some", else estimated from the run queue.
  double cpu_pressure = 0;
  bool from_psi = false;
  double wake_late_ms = 0;  // the probe's worst oversleep in the window (its 2nd worst, for noise)
  int wakeups = 0;          // how many times the probe woke in the window
};

// Measures the load: PSI or /proc/loadavg, and the wake-up probe thread.
class LoadProbe {
 public:
  LoadProbe();
  ~LoadProbe();
  LoadProbe(const LoadProbe&) = delete;
  LoadProbe& operator=(const LoadProbe&) = delete;
  LoadSample sample();

 private:
  void run();
  std::atomic<bool> stop_{false};
  std::atomic<std::int64_t> worst_ns_{0}, second_ns_{0};
  std::atomic<int> wakeups_{0};
  std::int64_t last_psi_us_ = -1;
  std::int64_t last_t_ns_ = 0;
  int cores_ = 1;
  std::thread thread_;
};

class AdaptiveConcurrency {
 public:
  struct Config {
    int min = 1;
    int max = 64;
    int start = 2;  // the number of cores, say
    // CPU pressure is smoothed over about a second (each window counts half).
    // Grow while it is below grow_pressure and the probe wakes within
    // grow_late_ms; back off when it is above backoff_pressure (the CPU has
    // nothing left: CPU-bound subjects, e.g. Python ones, stop making progress
    // on time), the probe wakes later than backoff_late_ms, or a trial's
    // signals fired later than trial_late_ms. The timing checks allow 1 s and
    // more (a barrier's death-latency bound, deadlines + 2 s grace), so these
    // keep an order of magnitude of margin.
    double grow_pressure = 0.75;  // 16 trials on 2 cores ran at about 0.6
    double grow_late_ms = 8;
    double backoff_pressure = 0.85;
    double backoff_late_ms = 20;
    double trial_late_ms = 150;
    // The trials' own timing: the longest any op of a finished trial waited
    // for a CPU while runnable (TrialResult::cpu_wait_ms). The timing checks
    // do not count that wait, but the subject's own deadlines (a barrier
    // timing out although everyone arrived) and the trial's timeout do: grow
    // only while the trials of the window stayed below grow_wait_ms, back off
    // when one waited more than backoff_wait_ms (the tightest bounds are 1 s
    // and more: an order of magnitude of margin).
    double grow_wait_ms = 40;
    double backoff_wait_ms = 150;
    double backoff_factor = 0.7;
    double hold_s = 3;    // no growth for this long after a back-off
    double settle_s = 1;  // and no back-off on the machine's load for this long
  };

  explicit AdaptiveConcurrency(Config c);
  int target() const { return target_; }
  // One window's load; `now_s` since the run started, `wanted` how many
  // trials the run could have started (running + waiting to start).
  // Returns the new target.
  int update(const LoadSample& s, double now_s, int wanted);
  // A trial finished whose scheduled faults fired `late_ms` after their time.
  void trial_lateness(double late_ms, double now_s);
  // A trial finished whose ops waited for a CPU up to `cpu_wait_ms` (its worst).
  void trial_cpu_wait(double cpu_wait_ms, double now_s);

  // What it did, for reports.
  int lowest() const { return lowest_; }
  int highest() const { return highest_; }
  int backoffs() const { return backoffs_; }

 private:
  void back_off(double now_s);
  Config c_;
  int target_;
  bool slow_start_ = true;  // grow by a quarter until the first back-off, then by one
  double pressure_ = -1;    // smoothed; < 0 before the first sample
  double hold_until_ = 0;
  double last_backoff_ = -1e9;
  double window_wait_ms_ = 0;  // the worst trial cpu wait since the last update
  int lowest_, highest_, backoffs_ = 0;
};

}  // namespace harness
