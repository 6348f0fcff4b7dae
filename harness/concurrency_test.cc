// The adaptive concurrency's decisions over made-up load: it grows while the
// CPU has room and timers fire on time, backs off on saturation and lateness
// (the machine's or a trial's) and then holds still, never leaves [min, max],
// and does not grow a target the run does not fill. LoadProbe is measured for
// real: it wakes, and it reports a sane window.
#include "concurrency.h"
#include "run.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace harness {
namespace {

LoadSample Load(double pressure, double late_ms = 1) {
  LoadSample s;
  s.seconds = 0.25;
  s.cpu_pressure = pressure;
  s.from_psi = true;
  s.wake_late_ms = late_ms;
  s.wakeups = 50;
  return s;
}

AdaptiveConcurrency::Config Config(int start = 2, int max = 64) {
  AdaptiveConcurrency::Config c;
  c.start = start;
  c.max = max;
  return c;
}

TEST(AdaptiveConcurrency, GrowsWhileTheCpuHasRoomAndTimersFireOnTime) {
  AdaptiveConcurrency a(Config());
  double t = 0;
  for (int i = 0; i < 40; ++i) a.update(Load(0.2), t += 0.25, 1000);
  EXPECT_GE(a.target(), 30);
  EXPECT_EQ(a.backoffs(), 0);
}

TEST(AdaptiveConcurrency, NeverGrowsPastWhatTheRunFills) {
  AdaptiveConcurrency a(Config());
  double t = 0;
  for (int i = 0; i < 40; ++i) a.update(Load(0.1), t += 0.25, 5);  // only 5 trials to run
  EXPECT_LE(a.target(), 6);
}

TEST(AdaptiveConcurrency, BacksOffOnSaturationThenHoldsStill) {
  AdaptiveConcurrency a(Config(20));
  a.update(Load(0.99), 1.0, 1000);
  a.update(Load(0.99), 1.25, 1000);  // settling after the back-off: not judged again yet
  const int after = a.target();
  EXPECT_LT(after, 20);
  EXPECT_EQ(a.backoffs(), 1);
  // Room again, but it holds still for hold_s before growing.
  for (double t = 1.5; t < 1.0 + Config().hold_s - 0.1; t += 0.25) {
    a.update(Load(0.1), t, 1000);
    EXPECT_EQ(a.target(), after) << t;
  }
  a.update(Load(0.1), 1.0 + Config().hold_s + 0.1, 1000);
  EXPECT_EQ(a.target(), after + 1);  // past the first back-off: one at a time
}

TEST(AdaptiveConcurrency, OneNoisyWindowIsNotSaturation) {
  AdaptiveConcurrency a(Config(20));
  a.update(Load(0.3), 1.0, 1000);
  a.update(Load(1.0), 1.25, 1000);  // (0.3 + 1.0) / 2 < 0.85
  EXPECT_EQ(a.backoffs(), 0);
}

TEST(AdaptiveConcurrency, BacksOffWhenTimersFireLate) {
  AdaptiveConcurrency a(Config(16));
  a.update(Load(0.1, 40), 1.0, 1000);
  EXPECT_LT(a.target(), 16);
  EXPECT_EQ(a.backoffs(), 1);
}

TEST(AdaptiveConcurrency, BacksOffWhenATrialsSignalsFiredLateOncePerBurst) {
  AdaptiveConcurrency a(Config(16));
  a.trial_lateness(20, 1.0);  // within bounds
  EXPECT_EQ(a.target(), 16);
  a.trial_lateness(400, 1.0);
  const int after = a.target();
  EXPECT_LT(after, 16);
  a.trial_lateness(400, 1.1);  // the same burst
  EXPECT_EQ(a.target(), after);
  a.trial_lateness(400, 1.0 + Config().hold_s);  // later: again
  EXPECT_LT(a.target(), after);
}

TEST(AdaptiveConcurrency, GrowsOnlyWhileTheTrialsOpsGetTheCpuOnTime) {
  AdaptiveConcurrency a(Config(8));
  double t = 0;
  for (int i = 0; i < 8; ++i) {
    a.trial_cpu_wait(100, t);  // over grow_wait_ms, under backoff_wait_ms: hold
    a.update(Load(0.1), t += 0.25, 1000);
  }
  EXPECT_EQ(a.target(), 8);
  EXPECT_EQ(a.backoffs(), 0);
  for (int i = 0; i < 8; ++i) {
    a.trial_cpu_wait(5, t);
    a.update(Load(0.1), t += 0.25, 1000);
  }
  EXPECT_GT(a.target(), 8);
}

TEST(AdaptiveConcurrency, BacksOffWhenATrialsOpWaitedLongForACpuOncePerBurst) {
  AdaptiveConcurrency a(Config(16));
  a.trial_cpu_wait(400, 1.0);
  const int after = a.target();
  EXPECT_LT(after, 16);
  a.trial_cpu_wait(400, 1.1);  // the same burst
  EXPECT_EQ(a.target(), after);
  a.trial_cpu_wait(400, 1.0 + Config().hold_s);
  EXPECT_LT(a.target(), after);
}

TEST(AdaptiveConcurrency, StaysWithinMinAndMax) {
  AdaptiveConcurrency::Config c = Config(4, 8);
  c.min = 2;
  AdaptiveConcurrency a(c);
  for (int i = 0; i < 20; ++i) a.update(Load(0.99, 100), i, 1000);
  EXPECT_EQ(a.target(), 2);
  EXPECT_EQ(a.lowest(), 2);
  for (int i = 0; i < 200; ++i) a.update(Load(0.0), 100 + i, 1000);
  EXPECT_EQ(a.target(), 8);
  EXPECT_EQ(a.highest(), 8);
}

TEST(LoadProbe, MeasuresAWindow) {
  LoadProbe p;
  (void)p.sample();
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  const LoadSample s = p.sample();
  EXPECT_GT(s.seconds, 0.05);
  EXPECT_LT(s.seconds, 5);
  EXPECT_GE(s.wakeups, 3);  // it sleeps 5 ms at a time
  EXPECT_GE(s.cpu_pressure, 0);
  EXPECT_LE(s.cpu_pressure, 1);
  EXPECT_GE(s.wake_late_ms, 0);
}

// Native workers start in microseconds and report every op's CPU wait; an
// external subject's interpreter start-up is invisible to the controller.
TEST(DefaultMaxParallel, IsSixteenPerCoreForNativeWorkersAndOnePerCoreWithAnExternalSubject) {
  Scenario native, streaming;
  streaming.subject = "streaming";
  RunOptions o;
  EXPECT_EQ(default_max_parallel({native}, o, 2), 32);
  EXPECT_EQ(default_max_parallel({native, streaming}, o, 2), 2);
  o.subject = "exec:/usr/bin/python3 adapter.py";
  EXPECT_EQ(default_max_parallel({native}, o, 2), 2);
  o.subject = "native";
  o.subject_explicit = true;  // --subject native wins over the scenario's own
  EXPECT_EQ(default_max_parallel({streaming}, o, 2), 32);
  o.max_parallel = 5;
  EXPECT_EQ(default_max_parallel({streaming}, o, 2), 5);
}

TEST(StartOrder, ACostlyScenarioStartsAfterItsRoundsOthersTheRestKeepTheirOrder) {
  std::vector<Scenario> s(5);
  const char* names[] = {"launcher", "a", "window", "b", "c"};
  const int every[] = {40, 1, 5, 1, 1};
  for (int i = 0; i < 5; ++i) s[i].name = names[i], s[i].every = every[i];
  std::vector<std::string> got;
  for (const Scenario* p : start_order(s)) got.push_back(p->name);
  EXPECT_EQ(got, (std::vector<std::string>{"a", "b", "c", "launcher", "window"}));
}

TEST(StartOrder, AnOddRoundStartsItsCheapScenariosLastFirstAndTheCostlyStillLast) {
  std::vector<Scenario> s(5);
  const char* names[] = {"launcher", "a", "window", "b", "c"};
  const int every[] = {40, 1, 5, 1, 1};
  for (int i = 0; i < 5; ++i) s[i].name = names[i], s[i].every = every[i];
  auto order = [&](int round) {
    std::vector<std::string> got;
    for (const Scenario* p : start_order(s, round)) got.push_back(p->name);
    return got;
  };
  EXPECT_EQ(order(1), (std::vector<std::string>{"c", "b", "a", "launcher", "window"}));
  EXPECT_EQ(order(2), order(0));
  EXPECT_EQ(order(3), order(1));
}

}  // namespace
}  // namespace harness
