// ops.explained: a case per cause of the table in ops_explained.cc, in both
// directions, and the claims an error makes about who died or left.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <string>

#include "checkers/test_events.h"

namespace harness {
namespace {

using testing_events::check;
using testing_events::dump;
using testing_events::Events;
using testing_events::meta;
using testing_events::reached;

// Job 0: two ranks (pids 10, 11); rank 1 fails its round 0 with `code` and `message`.
Events failing_round(const std::string& code, const std::string& message) {
  Events e;
  e.op(0, 0, -1, 10, "barrier_attach", 1, 2).op(0, 1, -1, 11, "barrier_attach", 1, 2);
  e.add({{"t", Events::at(5)}, {"type", "invoke"}, {"op", "barrier"}, {"id", 9}, {"job", 0}, {"rank", 1},
         {"local_rank", 1}, {"pid", 11}, {"args", {{"round", 0}}}});
  e.add({{"t", Events::at(50)}, {"type", "fail"}, {"op", "barrier"}, {"id", 9}, {"job", 0}, {"rank", 1},
         {"local_rank", 1}, {"pid", 11}, {"error", {{"code", code}, {"message", message}}}});
  return e;
}

Json fault(const char* kind, int job, int rank, int pid, double t0, double t1, int sig, Json detail = Json::object()) {
  return {{"t", Events::at(t0)}, {"type", "fault"}, {"kind", kind}, {"phase", t1 > t0 ? "start" : "instant"},
          {"job", job},          {"rank", rank},    {"pid", pid},   {"signal", sig},
          {"detail", detail}};
}

TEST(OpsExplained, AFailureWithNoCauseInTheHistoryIsAViolation) {
  auto r = check("ops.explained", failing_round("timeout", "timed out after 0 ms").build(meta(2, 1, 0)));
  EXPECT_EQ(r.verdict, Verdict::kInvalid) << dump(r);
  EXPECT_NE(r.problems.front().find("with no cause the history shows"), std::string::npos) << dump(r);
}

TEST(OpsExplained, AFaultThatCanCauseThatErrorExplainsIt) {
  auto e = failing_round("io", "lock: Input/output error");
  e.add(fault("fiu-errno", 0, 1, 11, 0, 0, 0, {{"errno", 5}}));
  auto r = check("ops.explained", e.build(meta(2, 1, 0)));
  EXPECT_EQ(r.verdict, Verdict::kValid) << dump(r);
  EXPECT_TRUE(reached(r, "failure-explained-by-fault"));
}

TEST(OpsExplained, AFaultThatCannotCauseThatErrorExplainsNothing) {
  auto e = failing_round("broken", "barrier broken: participant 0 died");
  e.add(fault("sigstop", 0, 0, 10, 3, 3, SIGSTOP));  // a stop never explains "broken"
  auto r = check("ops.explained", e.build(meta(2, 1, 0)));
  EXPECT_EQ(r.verdict, Verdict::kInvalid) << dump(r);
}

TEST(OpsExplained, APeersDeathExplainsABrokenRound) {
  auto e = failing_round("broken", "the barrier is broken");
  e.exit(0, 0, -1, 10, 20, {{"signal", SIGKILL}});
  auto r = check("ops.explained", e.build(meta(2, 1, 0)));
  EXPECT_TRUE(reached(r, "failure-explained-by-death") || reached(r, "failure-explained-by-fault")) << dump(r);
  EXPECT_EQ(r.verdict, Verdict::kValid) << dump(r);
}

TEST(OpsExplained, AnEarlierFailureInTheJobExplainsTheRest) {
  auto e = failing_round("broken", "the barrier is broken");
  e.op(0, 0, -1, 10, "barrier", 3, 4, {}, {{"round", 0}}, "fail", "mismatch");
  TrialMeta m = meta(2, 1, 0);
  m.jobs[0].misconfigured = true;  // explains rank 0's failure; rank 1's is the cascade (checked first)
  auto r = check("ops.explained", e.build(m));
  EXPECT_EQ(r.verdict, Verdict::kValid) << dump(r);
  EXPECT_TRUE(reached(r, "failure-explained-by-cascade"));
}

TEST(OpsExplained, AStopDuringTheOpExplainsATimeout) {
  auto e = failing_round("timeout", "timed out after 40 ms in round 0");
  Json stop = fault("sigstop", 0, 0, 10, 4, 4, SIGSTOP);
  stop["phase"] = "start";
  Json cont = stop;
  cont["t"] = Events::at(60), cont["phase"] = "end", cont["signal"] = SIGCONT;
  e.add(stop).add(cont);
  auto r = check("ops.explained", e.build(meta(2, 1, 0)));
  EXPECT_EQ(r.verdict, Verdict::kValid) << dump(r);
  EXPECT_TRUE(reached(r, "failure-explained-by-fault") || reached(r, "failure-explained-by-stop")) << dump(r);
}

TEST(OpsExplained, InUseNeedsAJobSharingTheDirWithARemote) {
  auto trial = [](bool remote) {
    Events e;
    e.op(0, 0, -1, 10, "acquire", 1, 2, {{"prefix", 0}});
    e.op(1, 0, -1, 20, "acquire", 3, 4, {}, Json::object(), "fail", "in-use");
    TrialMeta m = meta(1, 0, 0);
    m.jobs[0].dirs = {"/data/x"};
    m.jobs[0].has_remote = {remote};
    m.jobs.push_back(m.jobs[0]);
    return check("ops.explained", e.build(m));
  };
  auto shared = trial(true);
  EXPECT_EQ(shared.verdict, Verdict::kValid) << dump(shared);
  EXPECT_TRUE(reached(shared, "failure-explained-by-conflict"));
  EXPECT_EQ(trial(false).verdict, Verdict::kInvalid);
}

TEST(OpsExplained, AMisconfiguredLocalWorldSizeExplainsHowTheSubjectFailsOnIt) {
  Events e;
  e.op(0, 0, -1, 10, "acquire", 1, 2, {}, Json::object(), "fail", "file-exists");
  TrialMeta m = meta(1, 0, 0);
  EXPECT_EQ(check("ops.explained", e.build(m)).verdict, Verdict::kInvalid);
  m.jobs[0].misconfigured = true;
  auto r = check("ops.explained", e.build(m));
  EXPECT_EQ(r.verdict, Verdict::kValid) << dump(r);
  EXPECT_TRUE(reached(r, "failure-explained-by-config"));
}

TEST(OpsExplained, CallingALiveParticipantDeadIsAViolationEvenWithACause) {
  auto e = failing_round("broken", "barrier /r.000000_barrier is broken: participant 0 (pid 10) detached before "
                                   "entering round 0");
  e.round(0, 0, -1, 10, 0, 60, 61);  // pid 10 still runs at +60 ms, never detached
  e.add(fault("fiu-errno", 0, 1, 11, 0, 0, 0, {{"errno", 5}}));
  auto r = check("ops.explained", e.build(meta(2, 1, 0)));
  EXPECT_EQ(r.verdict, Verdict::kInvalid) << dump(r);
  EXPECT_NE(r.problems.front().find("it says participant 0 (pid 10) detached, but that process ran on until "
                                    "+61.000ms without having detached"),
            std::string::npos)
      << dump(r);
}

TEST(OpsExplained, ATrueClaimOfADeathHolds) {
  auto e = failing_round("broken", "barrier is broken: participant 0 (pid 10) died before entering round 0");
  e.exit(0, 0, -1, 10, 20, {{"signal", SIGKILL}, {"by_harness", true}});
  e.add(fault("sigkill", 0, 0, 10, 19, 19, SIGKILL));
  auto r = check("ops.explained", e.build(meta(2, 1, 0)));
  EXPECT_EQ(r.verdict, Verdict::kValid) << dump(r);
}

TEST(OpsExplained, AnUnnamedParticipantDyingInTheLockNeedsADeathInTheJob) {
  auto e = failing_round("broken", "barrier is broken: a participant died holding the barrier lock");
  e.exit(1, 0, -1, 30, 20, {{"signal", SIGKILL}});  // a death, but in another job (a cleanup)
  auto r = check("ops.explained", e.build(meta(2, 1, 0)));
  EXPECT_EQ(r.verdict, Verdict::kInvalid) << dump(r);
  EXPECT_NE(r.problems.front().find("no process of the job had died"), std::string::npos) << dump(r);
}

// A peer that killed itself at a crash point: its `point` event, then its
// SIGKILL exit as the supervisor reaped it (crash-points trial 252 of a 30-min
// soak: the reap came 0.5 ms after a newcomer was refused its seat).
Events peer_crashed(double announced, double reaped) {
  auto e = failing_round("broken", "barrier is broken: participant 0 (pid 10) died holding its seat");
  e.add({{"t", Events::at(announced)}, {"type", "point"}, {"name", "crash/barrier/wait/after-enter"}, {"hit", 7},
         {"job", 0}, {"rank", 0}, {"local_rank", 0}, {"pid", 10}});
  e.exit(0, 0, -1, 10, reaped, {{"signal", SIGKILL}});
  return e;
}

TEST(OpsExplained, APeerGoneAtItsCrashPointExplainsAFailureBeforeItsExitIsReaped) {
  auto r = check("ops.explained", peer_crashed(20, 60).build(meta(2, 1, 0)));  // failed at 50
  EXPECT_EQ(r.verdict, Verdict::kValid) << dump(r);
  EXPECT_TRUE(reached(r, "failure-explained-by-death")) << dump(r);
}

TEST(OpsExplained, ACrashPointAnnouncedAfterTheFailureExplainsNothing) {
  auto r = check("ops.explained", peer_crashed(55, 60).build(meta(2, 1, 0)));  // failed at 50
  EXPECT_EQ(r.verdict, Verdict::kInvalid) << dump(r);
  EXPECT_TRUE(std::any_of(r.problems.begin(), r.problems.end(),
                          [](const std::string& p) { return p.find("with no cause the history shows") != std::string::npos; }))
      << dump(r);
}

}  // namespace
}  // namespace harness
