// ops.no-spin: an op that waits must sleep. Both looks (the op's own end, the
// supervisor's `cpu` look while it was open), both directions, and what does
// not count as sleep.
#include <gtest/gtest.h>

#include <string>

#include "checkers/test_events.h"
#include "cut.h"

namespace harness {
namespace {

using testing_events::check;
using testing_events::dump;
using testing_events::Events;
using testing_events::kMs;
using testing_events::meta;
using testing_events::reached;

// A line of job 0 rank 0 (pid 10): its CPU counters as the worker logs them.
Json Line(const char* type, const std::string& op, double t, double run_ms, double wait_ms,
          std::int64_t id = 1) {
  Json e{{"t", Events::at(t)}, {"type", type}, {"job", 0}, {"rank", 0},
         {"local_rank", 0},    {"pid", 10},    {"op", op}, {"id", id}};
  if (run_ms >= 0) e["cpu_run_ns"] = Events::at(run_ms);
  if (wait_ms >= 0) e["cpu_wait_ns"] = Events::at(wait_ms);
  if (std::string(type) == "ok") {
    e["value"] = op == "acquire"   ? Json{{"prefix", 0}, {"present", Json::array()}}
                 : op == "segment" ? Json{{"name", "/s"}}
                                   : Json::object();
  }
  if (std::string(type) == "fail") e["error"] = {{"code", "timeout"}, {"message", "timed out"}};
  return e;
}

// The supervisor's look at op `id` of pid 10.
Json Look(double t, double run_ms, double wait_ms, std::int64_t id = 1) {
  return {{"t", Events::at(t)},
          {"type", "cpu"},
          {"job", 0},
          {"rank", 0},
          {"pid", 10},
          {"id", id},
          {"op", "acquire"},
          {"run_ns", Events::at(run_ms)},
          {"wait_ns", Events::at(wait_ms)}};
}

// An acquire from t0 to t1 whose process ran `ran` and waited `waited` (ms) meanwhile.
Events Acquire(double t0, double t1, double ran, double waited, const char* end = "ok") {
  Events e;
  e.add(Line("invoke", "acquire", t0, 5, 7));
  e.add(Line(end, "acquire", t1, 5 + ran, 7 + waited));
  return e;
}

CheckResult NoSpin(const Events& e) { return check("ops.no-spin", e.build(meta(1, 0, 0))); }

TEST(OpsNoSpin, AWaitThatRanPastItsBudgetAndMostOfItsTimeSpun) {
  // Open 1 s: ran 400 ms, waited 500 ms for a CPU, slept 100 ms.
  auto r = NoSpin(Acquire(10, 1010, 400, 500, "fail"));
  EXPECT_EQ(r.verdict, Verdict::kInvalid) << dump(r);
  EXPECT_TRUE(reached(r, "op-spun"));
  EXPECT_NE(r.problems.front().find(
                "had run 400.000ms on a CPU by its end, open 1000.000ms (500.000ms of it "
                "waiting for a CPU, 0.000ms stopped): it spun instead of sleeping"),
            std::string::npos)
      << dump(r);
}

TEST(OpsNoSpin, AWaitThatRanATenthOfItsTimeSpunThoughItAlsoSlept) {
  // A poll whose only sleeps are short lock waits between liveness checks:
  // 900 ms on a CPU in 3 s, 1.75 s asleep.
  EXPECT_EQ(NoSpin(Acquire(10, 3010, 900, 350, "fail")).verdict, Verdict::kInvalid);
  // The line: 2 ms off for the logging, a tenth of the 3 s.
  EXPECT_EQ(NoSpin(Acquire(10, 3010, 301, 0)).verdict, Verdict::kValid);
  EXPECT_EQ(NoSpin(Acquire(10, 3010, 303, 0)).verdict, Verdict::kInvalid);
}

TEST(OpsNoSpin, ALongWaitThatSleptIsNoSpinHoweverMuchItRanInAll) {
  // Polling for 30 s: 300 ms on a CPU, the rest asleep.
  auto r = NoSpin(Acquire(10, 30010, 300, 100));
  EXPECT_EQ(r.verdict, Verdict::kValid) << dump(r);
  EXPECT_TRUE(reached(r, "long-wait-measured"));
}

TEST(OpsNoSpin, AnOpWithinItsBudgetIsNotJudgedHoweverLittleItSlept) {
  // 41 ms of work and nothing else: within the default 40 ms budget once the
  // 2 ms of logging between a read and its line are taken off.
  EXPECT_EQ(NoSpin(Acquire(10, 51, 41, 0)).verdict, Verdict::kValid);
  EXPECT_EQ(NoSpin(Acquire(10, 53, 43, 0)).verdict, Verdict::kInvalid);
}

TEST(OpsNoSpin, TheBudgetIsTheScenariosOwn) {
  // A scenario whose ops do more work (deadlines.spin = "100ms").
  TrialMeta m = meta(1, 0, 0);
  m.spin_budget_ns = 100'000'000;
  EXPECT_EQ(check("ops.no-spin", Acquire(10, 111, 101, 0).build(m)).verdict, Verdict::kValid);
  EXPECT_EQ(check("ops.no-spin", Acquire(10, 113, 103, 0).build(m)).verdict, Verdict::kInvalid);
}

TEST(OpsNoSpin, TimeWaitingForACpuOrStoppedIsNotSleep) {
  // Open 2 s, ran 200 ms: a tenth, asleep 1.8 s, unless the rest was a wait for a CPU or a stop.
  EXPECT_EQ(NoSpin(Acquire(10, 2010, 200, 0)).verdict, Verdict::kValid);
  EXPECT_EQ(NoSpin(Acquire(10, 2010, 200, 1800)).verdict, Verdict::kInvalid);
  Events stopped = Acquire(10, 2010, 200, 0);
  stopped.add({{"t", Events::at(20)},
               {"type", "fault"},
               {"kind", "sigstop"},
               {"phase", "start"},
               {"job", 0},
               {"rank", 0},
               {"pid", 10},
               {"signal", 19}});
  stopped.add({{"t", Events::at(1990)},
               {"type", "fault"},
               {"kind", "sigstop"},
               {"phase", "end"},
               {"job", 0},
               {"rank", 0},
               {"pid", 10},
               {"signal", 18}});
  auto r = NoSpin(stopped);
  EXPECT_EQ(r.verdict, Verdict::kInvalid) << dump(r);
}

TEST(OpsNoSpin, TheSupervisorsLookAtAnOpStillOpenIsEvidence) {
  // The op never ends (a spin forever); the look at +4.5 s shows 150 ms run,
  // 4.3 s of waiting for a CPU.
  Events e;
  e.add(Line("invoke", "acquire", 10, 5, 7));
  e.add(Look(4510, 155, 4307));
  auto r = NoSpin(e);
  EXPECT_EQ(r.verdict, Verdict::kInvalid) << dump(r);
  EXPECT_NE(r.problems.front().find("had run 150.000ms on a CPU when the supervisor looked"),
            std::string::npos)
      << dump(r);
  // The same look at a sleeper (4.3 s of the 4.5 s asleep) says nothing.
  Events sleeper;
  sleeper.add(Line("invoke", "acquire", 10, 5, 7));
  sleeper.add(Look(4510, 155, 50));
  EXPECT_EQ(NoSpin(sleeper).verdict, Verdict::kValid);
}

TEST(OpsNoSpin, ALookWrittenAfterTheOpEndedStillCounts) {
  // The supervisor read the counters while the op was open; its end was
  // stamped before the look's line was written.
  Events e;
  e.add(Line("invoke", "acquire", 10, 5, 7));
  e.add(Line("ok", "acquire", 4000, 60, 3900));
  e.add(Look(4001, 160, 3900));
  EXPECT_EQ(NoSpin(e).verdict, Verdict::kInvalid);
}

TEST(OpsNoSpin, AnOpWhoseProcessDidNotMeasureItsCpuOrThatDoesNotWaitIsNotJudged) {
  Events unmeasured;
  unmeasured.add(Line("invoke", "acquire", 10, -1, 7));
  unmeasured.add(Line("ok", "acquire", 1010, -1, 900));
  EXPECT_EQ(NoSpin(unmeasured).verdict, Verdict::kValid);
  Events workload;  // creating a segment is the harness's work, not a wait
  workload.add(Line("invoke", "segment", 10, 5, 7));
  workload.add(Line("ok", "segment", 1010, 905, 7));
  EXPECT_EQ(NoSpin(workload).verdict, Verdict::kValid);
}

TEST(OpsNoSpin, ALookThatNamesNoOpOrRunsBackwardsIsAHistoryError) {
  for (const Json& bad : {Look(500, 300, 10, /*id=*/7), Look(500, 1, 10)}) {
    Events e;
    e.add(Line("invoke", "acquire", 10, 5, 7));
    e.add(bad);
    std::vector<std::string> errors;
    const History h = e.build(meta(1, 0, 0), &errors);
    ASSERT_EQ(errors.size(), 1u) << bad.dump();
    EXPECT_NE(errors.front().find("cpu"), std::string::npos) << errors.front();
    EXPECT_EQ(check("ops.no-spin", h).verdict, Verdict::kValid) << bad.dump();
  }
}

TEST(OpsNoSpin, AtACutTheLookIsJudgedAndTheVerdictStands) {
  Events e;
  e.add(Line("invoke", "acquire", 10, 5, 7));
  e.add(Look(4510, 155, 4307));
  EXPECT_TRUE(judge_cut(e.events(), meta(1, 0, 0), Events::at(4511), {"ops.no-spin"}).decisive);
  EXPECT_FALSE(judge_cut(e.events(), meta(1, 0, 0), Events::at(4510), {"ops.no-spin"}).decisive);
  e.add({{"t", Events::at(6000)}, {"type", "trial"}, {"phase", "end"}});
  std::size_t cuts = 0, invalid = 0;
  EXPECT_TRUE(unsound_cuts(e.events(), meta(1, 0, 0), {"ops.no-spin"}, 0, &cuts, &invalid).empty());
  EXPECT_EQ(invalid, 1u);
}

}  // namespace
}  // namespace harness
