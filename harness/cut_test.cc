// Judging a running trial at a cut (cut.h): where the record is known
// complete, what the record up to a cut holds, and the rules that make an
// invalid verdict there the whole trial's.
#include "cut.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <string>
#include <vector>

#include "checkers/test_events.h"

namespace harness {
namespace {

using testing_events::Events;
using testing_events::kMs;

constexpr std::int64_t At(double ms) { return static_cast<std::int64_t>(ms * kMs); }

Json Line(const char* type, int pid, double t) {
  return {{"t", At(t)}, {"type", type}, {"pid", pid}, {"job", 0}, {"rank", 0}, {"local_rank", 0}};
}

TEST(CutPoint, IsTheEarliestLastLineOfTheLiveWriters) {
  CutPoint c;
  c.add(Line("start", 4, 1));
  c.add(Line("start", 5, 2));
  c.add(Line("invoke", 4, 7));
  c.add(Line("invoke", 5, 5));
  EXPECT_EQ(c.cut(At(100), {4, 5}, {4, 5}), At(5));
  EXPECT_EQ(c.cut(At(100), {4}, {4, 5}), At(7));  // 5 is gone: it writes nothing more
  EXPECT_EQ(c.cut(At(6), {4}, {4, 5}), At(6));    // nor may the supervisor's own clock be passed
}

TEST(CutPoint, TheSupervisorsOwnLinesDoNotHoldItBack) {
  CutPoint c;
  c.add(Line("start", 4, 9));
  c.add({{"t", At(1)}, {"type", "fault"}, {"kind", "sigstop"}, {"pid", 4}, {"phase", "start"}});
  c.add({{"t", At(2)}, {"type", "exit"}, {"pid", 6}, {"job", 1}, {"rank", 0}});
  EXPECT_EQ(c.cut(At(50), {4}, {4, 6}), At(9));
  EXPECT_FALSE(c.broken());
}

TEST(CutPoint, HasNewsOnlyWhileACompletionOrACpuLookIsBeforeTheCutAndNotJudgedYet) {
  CutPoint c;
  c.add(Line("invoke", 4, 1));
  EXPECT_FALSE(c.news_before(At(50)));  // an invoke decides nothing
  c.add(Line("ok", 4, 2));
  c.add(Line("invoke", 4, 3));
  EXPECT_FALSE(c.news_before(At(2)));
  EXPECT_TRUE(c.news_before(At(2.5)));
  c.judged(At(2.5));
  EXPECT_FALSE(c.news_before(At(50)));
  // The supervisor's look at a spinning op is news, also when a cut judged
  // before it reached it: the next cut that passes it must judge again.
  c.add({{"t", At(4)},
         {"type", "cpu"},
         {"pid", 4},
         {"job", 0},
         {"rank", 0},
         {"id", 2},
         {"run_ns", 1}});
  EXPECT_FALSE(c.news_before(At(4)));
  c.judged(At(4));
  EXPECT_TRUE(c.news_before(At(4.5)));
  c.add(Line("fail", 4, 5));
  c.judged(At(4.5));
  EXPECT_TRUE(c.news_before(At(6)));
}

TEST(CutPoint, AnAliveLookIsTheSupervisorsLineAndNews) {
  CutPoint c;
  c.add(Line("start", 4, 1));
  c.add(Line("invoke", 4, 3));
  c.add({{"t", At(20)}, {"type", "alive"}, {"pid", 4}, {"job", 0}, {"rank", 0}});
  EXPECT_EQ(c.last_line(4), At(3));  // not a line of the worker's own
  EXPECT_FALSE(c.broken());
  EXPECT_FALSE(c.news_before(At(20)));
  EXPECT_TRUE(c.news_before(At(21)));  // a hold may be certain for longer
}

TEST(CutPoint, PassesASilentWritersLastLineOnlyUpToItsQuietInstant) {
  CutPoint c;
  c.add(Line("start", 4, 1));
  c.add(Line("start", 5, 2));
  c.add(Line("invoke", 4, 3));
  c.add(Line("invoke", 5, 40));
  EXPECT_EQ(c.cut(At(100), {4, 5}, {4, 5}), At(3));
  EXPECT_EQ(c.cut(At(100), {4, 5}, {4, 5}, {{4, At(20)}}), At(20));
  EXPECT_EQ(c.cut(At(100), {4, 5}, {4, 5}, {{4, At(90)}}), At(40));  // 5 still holds it back
  EXPECT_EQ(c.cut(At(100), {4, 5}, {4, 5}, {{4, At(2)}}),
            At(3));  // an older quiet instant says nothing new
  EXPECT_EQ(c.cut(At(30), {4, 5}, {4, 5}, {{4, At(90)}, {5, At(95)}}),
            At(30));  // nor past the supervisor's clock
  EXPECT_EQ(c.last_line(5), At(40));
  EXPECT_EQ(c.last_line(6), std::nullopt);
}

TEST(CutPoint, ALiveWriterWithoutALineYetAllowsNoCut) {
  CutPoint c;
  c.add(Line("start", 4, 1));
  EXPECT_EQ(c.cut(At(50), {4, 5}, {4, 5}), std::nullopt);
}

TEST(CutPoint, ALineFromAWriterNobodyStartedAllowsNoCut) {
  CutPoint c;
  c.add(Line("start", 4, 1));
  c.add(Line("invoke", 99, 2));
  EXPECT_EQ(c.cut(At(50), {4}, {4}), std::nullopt);
}

TEST(CutPoint, AWriterOutOfTimeOrderEndsCutsForTheTrial) {
  CutPoint c;
  c.add(Line("start", 4, 5));
  c.add(Line("invoke", 4, 3));
  EXPECT_TRUE(c.broken());
  c.add(Line("ok", 4, 9));
  EXPECT_EQ(c.cut(At(50), {4}, {4}), std::nullopt);
}

TEST(CutPoint, ALauncherOrALineThatIsNotAnEventEndsCuts) {
  CutPoint launcher;
  Json l = Line("start", 3, 1);
  l["role"] = "launcher";
  launcher.add(l);
  EXPECT_TRUE(launcher.broken());
  CutPoint torn;
  torn.add(Json::parse("{\"t\":1,\"ty", nullptr, false));
  EXPECT_TRUE(torn.broken());
}

TEST(CutPoint, ATrialThatWritesTooMuchIsJudgedOnlyWhole) {
  CutPoint c;
  for (std::size_t i = 0; i <= CutPoint::kMaxEvents; ++i)
    c.add(Line("fds", 4, 1 + static_cast<double>(i)));
  EXPECT_TRUE(c.broken());
  EXPECT_TRUE(c.events().empty());
}

TrialMeta TwoJobs() {
  TrialMeta m;
  m.scenario = "cut";
  m.jobs = {JobMeta{}, JobMeta{}};
  m.acquire_deadline_ns = 1000 * kMs;
  return m;
}

TEST(BuildHistoryAtACut, KeepsOnlyWhatCameBeforeItAndLeavesOpenOpsOpen) {
  Events e;
  e.op(0, 0, -1, 10, "acquire", 1, 2, {{"prefix", 0}});
  e.op(0, 0, -1, 10, "release", 8, 12);
  e.add({{"t", At(20)}, {"type", "trial"}, {"phase", "end"}});
  std::vector<std::string> errors;
  const History h = build_history(e.events(), TwoJobs(), &errors, At(10));
  ASSERT_TRUE(errors.empty()) << errors.front();
  EXPECT_EQ(h.cut_t, At(10));
  EXPECT_TRUE(h.ended);
  EXPECT_EQ(h.end_t, At(10));
  ASSERT_EQ(h.ops.size(), 2u);
  EXPECT_EQ(h.ops[1].outcome, Outcome::kInfo);
  EXPECT_EQ(h.ops[1].info_cause, kCauseCut);
  EXPECT_EQ(h.ops[1].complete_t, At(10));
}

TEST(BuildHistoryAtACut, ReadsTheSupervisorsCutMarksOfAWholeRecord) {
  Events e;
  e.add({{"t", At(5)}, {"type", "trial"}, {"phase", "cut"}, {"invalid", {"cleanup.safety"}}});
  e.add({{"t", At(20)}, {"type", "trial"}, {"phase", "end"}});
  std::vector<std::string> errors;
  const History h = build_history(e.events(), TwoJobs(), &errors);
  EXPECT_TRUE(errors.empty());
  EXPECT_FALSE(h.malformed_trial_event);
  EXPECT_EQ(h.cut_marks, std::vector<std::int64_t>{At(5)});
  EXPECT_FALSE(h.cut_t);
}

// A cleanup's ok value: it removed `name`, kept and skipped nothing.
Json Removed(const std::string& name) {
  return {{"removed", {name}}, {"kept", Json::array()}, {"skipped", Json::array()}};
}

CheckResult Only(const std::vector<CheckResult>& checks, const std::string& invariant) {
  for (const auto& c : checks) {
    if (c.invariant == invariant) return c;
  }
  ADD_FAILURE() << "no result for " << invariant;
  return {};
}

// The self-check (unsound_cuts) over a record: the cuts the whole record
// contradicts (none, where the checkers are sound), how many cuts were
// judged and how many of them were invalid.
struct EveryCut {
  std::vector<std::string> unsound;
  std::size_t cuts = 0, invalid = 0;
};
EveryCut JudgeEveryCut(const std::vector<Json>& events, const TrialMeta& m,
                       const std::vector<std::string>& invariants) {
  EveryCut r;
  r.unsound = unsound_cuts(events, m, invariants, 0, &r.cuts, &r.invalid);
  return r;
}

// Job 0 holds prefix 0 from +2 ms and says nothing until its release at
// +40; job 1's cleanup removes its segment at +5 to +6.
Events CleanupUnderASilentHolder() {
  Events e;
  e.op(0, 0, -1, 10, "acquire", 1, 2, {{"prefix", 0}});
  e.op(1, 0, -1, 20, "clean", 5, 6, Removed("/shm.000000_shard_states"));
  e.op(0, 0, -1, 10, "release", 40, 41);
  e.add({{"t", At(50)}, {"type", "trial"}, {"phase", "end"}});
  return e;
}

TEST(CleanupSafetyAtACut, AHolderSilentSinceTheCleanupIsNotYetKnownToHaveLived) {
  // Until the holder says something after the cleanup, the rest of the trial
  // could still show it died first (a kill, its last sign of life at +2).
  const auto early =
      judge_cut(CleanupUnderASilentHolder().events(), TwoJobs(), At(30), {"cleanup.safety"});
  EXPECT_EQ(Only(early.checks, "cleanup.safety").verdict, Verdict::kValid);
  EXPECT_FALSE(early.decisive);
  const auto late =
      judge_cut(CleanupUnderASilentHolder().events(), TwoJobs(), At(41), {"cleanup.safety"});
  EXPECT_EQ(Only(late.checks, "cleanup.safety").verdict, Verdict::kInvalid);
  EXPECT_TRUE(late.errors.empty());
  EXPECT_TRUE(late.decisive);
  EXPECT_EQ(late.invalid(), std::vector<std::string>{"cleanup.safety"});
}

TEST(CleanupSafetyAtACut, TheSupervisorsAliveLookIsASignOfLifeOfASilentHolder) {
  // The supervisor saw job 0's process at +10 not yet exiting: it held its
  // prefix then, so the removal at +5 is invalid at a cut at +30 already.
  Events e = CleanupUnderASilentHolder();
  e.add({{"t", At(10)}, {"type", "alive"}, {"pid", 10}, {"job", 0}, {"rank", 0}});
  const auto at = judge_cut(e.events(), TwoJobs(), At(30), {"cleanup.safety"});
  EXPECT_TRUE(at.errors.empty()) << at.errors.front();
  EXPECT_EQ(Only(at.checks, "cleanup.safety").verdict, Verdict::kInvalid);
  EXPECT_TRUE(at.decisive);
  // One before the removal says nothing about after it.
  Events before = CleanupUnderASilentHolder();
  before.add({{"t", At(4)}, {"type", "alive"}, {"pid", 10}, {"job", 0}, {"rank", 0}});
  EXPECT_FALSE(judge_cut(before.events(), TwoJobs(), At(30), {"cleanup.safety"}).decisive);
  const EveryCut every = JudgeEveryCut(e.events(), TwoJobs(), {"cleanup.safety"});
  EXPECT_TRUE(every.unsound.empty());
}

TEST(CleanupSafetyAtACut, AKilledHoldersAliveLookMakesItsHoldCertainUpToIt) {
  // As AHolderKilledAfterTheCutButSilentSinceCountsOnlyToItsLastSign, but
  // the supervisor saw the holder alive at +8, after the removal: the whole
  // trial is invalid too, and no cut says otherwise.
  Events e;
  e.op(0, 0, -1, 10, "acquire", 1, 2, {{"prefix", 0}});
  e.op(1, 0, -1, 20, "clean", 5, 6, Removed("/shm.000000_shard_states"));
  e.add({{"t", At(8)}, {"type", "alive"}, {"pid", 10}, {"job", 0}, {"rank", 0}});
  e.exit(0, 0, -1, 10, 30, {{"signal", SIGKILL}, {"by_harness", true}, {"teardown", true}});
  e.add({{"t", At(50)}, {"type", "trial"}, {"phase", "end"}});
  const EveryCut every = JudgeEveryCut(e.events(), TwoJobs(), {"cleanup.safety"});
  EXPECT_TRUE(every.unsound.empty());
  EXPECT_GT(every.invalid, 0u);
}

TEST(JudgeCut, ARecordWithHistoryErrorsUpToTheCutDecidesNothing) {
  Events e = CleanupUnderASilentHolder();
  e.add({{"t", At(20)}, {"type", "fds"}, {"pid", 10}, {"job", 0}, {"rank", 0}, {"count", "three"}});
  const auto at = judge_cut(e.events(), TwoJobs(), At(41), {"cleanup.safety"});
  EXPECT_EQ(Only(at.checks, "cleanup.safety").verdict, Verdict::kInvalid);
  EXPECT_FALSE(at.errors.empty());
  EXPECT_FALSE(at.decisive);
}

TEST(CleanupSafetyAtACut, WhatACutCallsInvalidTheWholeTrialCallsInvalid) {
  const Events e = CleanupUnderASilentHolder();
  const EveryCut every = JudgeEveryCut(e.events(), TwoJobs(), {"cleanup.safety"});
  EXPECT_TRUE(every.unsound.empty());
  EXPECT_GT(every.invalid, 0u);
  EXPECT_EQ(every.cuts, 8u);  // one before each distinct event time: 0, 1, 2, 5, 6, 40, 41, 50
}

TEST(CleanupSafetyAtACut, AHolderKilledAfterTheCutButSilentSinceCountsOnlyToItsLastSign) {
  // The whole trial: killed at +30 by teardown, no fault, its last sign +2: valid.
  Events e;
  e.op(0, 0, -1, 10, "acquire", 1, 2, {{"prefix", 0}});
  e.op(1, 0, -1, 20, "clean", 5, 6, Removed("/shm.000000_shard_states"));
  e.add({{"t", At(6.5)},
         {"type", "fds"},
         {"pid", 20},
         {"job", 1},
         {"rank", 0},
         {"local_rank", 0},
         {"count", 3}});
  e.exit(0, 0, -1, 10, 30, {{"signal", SIGKILL}, {"by_harness", true}, {"teardown", true}});
  e.add({{"t", At(50)}, {"type", "trial"}, {"phase", "end"}});
  const EveryCut every = JudgeEveryCut(e.events(), TwoJobs(), {"cleanup.safety"});
  EXPECT_TRUE(every.unsound.empty());
  EXPECT_EQ(every.invalid, 0u);
}

TEST(CleanupSafetyAtACut, AnAcquireStillOpenAtTheCutMayYetBeTheFirstHolder) {
  // Job 1's rank 0 holds prefix 1 (dataset 1), then gets prefix 0 (dataset
  // 0) during job 0's cleanup, which removed a name of prefix 0. Its rank 1
  // asked first, and is still asking at the cut: if it gets prefix 0, the
  // prefix had a past and the name may have been its. So the whole record
  // below is valid, and so must the cut be.
  Events e;
  e.op(1, 0, -1, 20, "acquire", 0.5, 0.8, {{"prefix", 1}}, {{"dataset", 1}});
  e.op(1, 1, -1, 21, "acquire", 1, 14, {{"prefix", 0}}, {{"dataset", 0}});
  e.op(1, 0, -1, 20, "acquire", 2, 5, {{"prefix", 0}}, {{"dataset", 0}});
  e.op(0, 0, -1, 30, "clean", 3, 9, Removed("/shm.000000_shard_states"));
  e.op(1, 0, -1, 20, "release", 12, 12.5, {},
       {{"dataset", 1}});  // a sign of life after the cleanup
  e.add({{"t", At(30)}, {"type", "trial"}, {"phase", "end"}});
  TrialMeta m = TwoJobs();
  m.jobs[1].ranks = 2;
  const auto at = judge_cut(e.events(), m, At(13), {"cleanup.safety"});
  EXPECT_TRUE(at.errors.empty()) << at.errors.front();
  EXPECT_EQ(Only(at.checks, "cleanup.safety").verdict, Verdict::kValid);
  const EveryCut every = JudgeEveryCut(e.events(), m, {"cleanup.safety"});
  EXPECT_TRUE(every.unsound.empty());
}

TEST(RunCheckersAtACut, CheckersThatDoNotJudgeCutsAreNotRun) {
  std::vector<std::string> errors;
  const History h = build_history(CleanupUnderASilentHolder().events(), TwoJobs(), &errors, At(41));
  const auto results = run_checkers(h);
  EXPECT_EQ(Only(results, "cleanup.no-leak").excused, kNotJudgedAtCut);
  EXPECT_EQ(Only(results, "ops.explained").excused, kNotJudgedAtCut);
  EXPECT_EQ(Only(results, "cleanup.safety").verdict, Verdict::kInvalid);
  EXPECT_TRUE(Only(results, "cleanup.safety").excused.empty());
}

TEST(CutInvariants, AreTheCheckersThatJudgeCutsLessTheScenariosExcuses) {
  const auto all = cut_invariants({});
  EXPECT_EQ(all, (std::vector<std::string>{"barrier.liveness", "barrier.safety", "cleanup.safety",
                                           "ops.no-spin", "prefix.agreement",
                                           "prefix.exclusive-local", "prefix.unique"}));
  const auto some = cut_invariants({{"cleanup.safety", "a known-bad subject's scenario"}});
  EXPECT_EQ(std::count(some.begin(), some.end(), "cleanup.safety"), 0);
}

// One job of two ranks, a 3 s barrier deadline (+ 500 ms grace) and a
// 500 ms release bound.
TrialMeta TwoRanksInABarrier() {
  TrialMeta m;
  m.scenario = "cut";
  m.jobs = {JobMeta{}};
  m.jobs[0].ranks = 2;
  m.jobs[0].barrier_rounds = 1;
  m.barrier_deadline_ns = 3000 * kMs;
  m.grace_ns = 500 * kMs;
  m.release_ns = 500 * kMs;
  return m;
}

// barrier.liveness on a TwoRanksInABarrier record up to a cut at `ms`...
CutJudgement LivenessAt(const std::vector<Json>& events, double ms) {
  return judge_cut(events, TwoRanksInABarrier(), At(ms), {"barrier.liveness"});
}
Verdict VerdictOf(const CutJudgement& j) { return Only(j.checks, "barrier.liveness").verdict; }

// ...and on the whole record.
Verdict LivenessWhole(const std::vector<Json>& events) {
  std::vector<std::string> errors;
  const History h = build_history(events, TwoRanksInABarrier(), &errors);
  EXPECT_TRUE(errors.empty()) << errors.front();
  return Only(run_checkers(h, {"barrier.liveness"}), "barrier.liveness").verdict;
}

TEST(BarrierLivenessAtACut, AWaiterThatSleptThroughTheReleaseIsInvalidOnceItLeft) {
  // Rank 0 leaves round 0 at +10 ms, rank 1 only at +1010 ms.
  Events e;
  e.round(0, 0, -1, 10, 0, 1, 10);
  e.round(0, 1, -1, 11, 0, 2, 1010);
  e.add({{"t", At(1100)}, {"type", "trial"}, {"phase", "end"}});
  EXPECT_EQ(VerdictOf(LivenessAt(e.events(), 900)), Verdict::kValid);
  const CutJudgement after = LivenessAt(e.events(), 1011);
  EXPECT_TRUE(after.decisive);
  EXPECT_EQ(after.invalid(), std::vector<std::string>{"barrier.liveness"});
  const EveryCut every = JudgeEveryCut(e.events(), TwoRanksInABarrier(), {"barrier.liveness"});
  EXPECT_TRUE(every.unsound.empty());
  EXPECT_GT(every.invalid, 0u);
}

TEST(BarrierLivenessAtACut, AnOpStillOpenIsNotHeldToItsDeadline) {
  // Rank 1's round is open past deadline + grace at the cut (rank 0 enters
  // only at +3780 ms); it completes at +3800 ms, having waited 500 ms for a
  // CPU: the whole record is valid, and a cut at +3700 ms may not say "past
  // its deadline" before that is known.
  Events e;
  e.round(0, 0, -1, 10, 0, 3780, 3790);
  e.round(0, 1, -1, 11, 0, 2, 3800);
  std::vector<Json> ev = e.events();
  for (auto& x : ev) {
    if (x.value("pid", 0) != 11) continue;
    if (x["type"] == "invoke") x["cpu_wait_ns"] = At(5);
    if (x["type"] == "ok") x["cpu_wait_ns"] = At(505);
  }
  ev.push_back({{"t", At(3900)}, {"type", "trial"}, {"phase", "end"}});
  EXPECT_EQ(LivenessWhole(ev), Verdict::kValid);
  EXPECT_EQ(VerdictOf(LivenessAt(ev, 3700)), Verdict::kValid);
  const EveryCut every = JudgeEveryCut(ev, TwoRanksInABarrier(), {"barrier.liveness"});
  EXPECT_TRUE(every.unsound.empty());
}

TEST(BarrierLivenessAtACut, AFailedRoundIsNotCalledUnexplained) {
  // Rank 0 fails round 0 "broken" at +1000 ms. Rank 1, in the round since
  // +20 ms, is killed; its exit comes at +1100 ms, its last sign of life was
  // +20 ms: the whole record explains the break by that death. A cut at
  // +1050 ms has no exit yet, so it may not call the break unexplained.
  Events e;
  e.op(0, 0, -1, 10, "barrier", 10, 1000, {}, {{"round", 0}}, "fail", "broken");
  e.op(0, 1, -1, 11, "barrier", 20, 0, {}, {{"round", 0}}, "open");
  e.exit(0, 1, -1, 11, 1100, {{"signal", SIGKILL}});
  e.add({{"t", At(1200)}, {"type", "trial"}, {"phase", "end"}});
  EXPECT_EQ(LivenessWhole(e.events()), Verdict::kValid);
  const CutJudgement at = LivenessAt(e.events(), 1050);
  EXPECT_TRUE(at.errors.empty()) << at.errors.front();
  EXPECT_EQ(VerdictOf(at), Verdict::kValid);
  const EveryCut every = JudgeEveryCut(e.events(), TwoRanksInABarrier(), {"barrier.liveness"});
  EXPECT_TRUE(every.unsound.empty());
}

TEST(BarrierLivenessAtACut, ADetachTimingOutWithNoFaultKeepingALockIsInvalidOnceItEnded) {
  // Both ranks' detaches time out at +3000 ms: no process was stopped, no
  // fault held a lock. The trial's cleanup step would wait on the same lock.
  Events e;
  e.op(0, 0, -1, 10, "barrier_detach", 1, 3000, {}, Json::object(), "fail", "timeout");
  e.op(0, 1, -1, 11, "barrier_detach", 2, 3001, {}, Json::object(), "fail", "timeout");
  e.add({{"t", At(13000)}, {"type", "trial"}, {"phase", "end"}});
  EXPECT_EQ(VerdictOf(LivenessAt(e.events(), 2000)), Verdict::kValid);
  const CutJudgement after = LivenessAt(e.events(), 3002);
  EXPECT_TRUE(after.decisive);
  EXPECT_EQ(after.invalid(), std::vector<std::string>{"barrier.liveness"});
  EXPECT_TRUE(
      JudgeEveryCut(e.events(), TwoRanksInABarrier(), {"barrier.liveness"}).unsound.empty());
}

TEST(PrefixUniqueAtACut, ADeadJobsStaleHoldIsNotJudged) {
  // Job 0 made a segment of prefix 0 and died at +3. Job 1's grant at +6
  // lists that segment as present: the dead job still held the prefix...
  // unless job 2's acquire, invoked at +4 and still open at the cut, swept
  // the dead job's names: the whole record below says so at +15, and is
  // valid. So a cut at +10 may not call it invalid.
  Events e;
  e.op(0, 0, -1, 10, "acquire", 1, 1.5, {{"prefix", 0}});
  e.op(0, 0, -1, 10, "segment", 2, 2.5,
       {{"name", "/shm.000000_shard_states"}, {"dev", 7}, {"ino", 5}},
       {{"name", "/shm.000000_shard_states"}});
  e.exit(0, 0, -1, 10, 3, {{"signal", SIGKILL}, {"by_harness", true}});
  e.op(2, 0, -1, 30, "acquire", 4, 15, {{"prefix", 1}, {"removed", {"/shm.000000_shard_states"}}});
  e.op(1, 0, -1, 20, "acquire", 5, 6,
       {{"prefix", 0},
        {"present", {{{"name", "/shm.000000_shard_states"}, {"dev", 7}, {"ino", 5}}}}});
  e.op(1, 0, -1, 20, "release", 9, 9.5);
  e.add({{"t", At(30)}, {"type", "trial"}, {"phase", "end"}});
  TrialMeta m = TwoJobs();
  m.jobs.push_back(JobMeta{});
  const auto at = judge_cut(e.events(), m, At(10), {"prefix.unique"});
  EXPECT_TRUE(at.errors.empty()) << at.errors.front();
  EXPECT_EQ(Only(at.checks, "prefix.unique").verdict, Verdict::kValid);
  const EveryCut every = JudgeEveryCut(e.events(), m, {"prefix.unique"});
  EXPECT_TRUE(every.unsound.empty());
}

}  // namespace
}  // namespace harness
