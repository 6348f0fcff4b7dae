// The process model in the checkers: loader workers as barrier seats, a
// launcher's teardown, a tracker's reap without a cleanup step, and the exits
// of processes the supervisor did not start (docs/worker-protocol.md,
// version 2). Histories are raw protocol events through build_history.
#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <vector>

#include "checkers/test_events.h"

namespace harness {
namespace {

using testing_events::Events;
using testing_events::check;
using testing_events::dump;
using testing_events::meta;
using testing_events::reached;

TEST(LoaderWorkerSeats, AWorkerLeavingBeforeAnotherWorkerOfItsRankEnteredBreaksBarrierSafety) {
  // One rank, two loader workers in the barrier: two seats, "rank 0 worker 0" and "rank 0 worker 1".
  Events e;
  e.op(0, 0, -1, 10, "acquire", 1, 2, {{"prefix", 0}});
  e.op(0, 0, 0, 11, "barrier_attach", 3, 4).op(0, 0, 1, 12, "barrier_attach", 3, 4);
  e.round(0, 0, 0, 11, 0, 5, 6).round(0, 0, 1, 12, 0, 7, 8);
  auto r = check("barrier.safety", e.build(meta(1, 1, 2)));
  EXPECT_EQ(r.verdict, Verdict::kInvalid) << dump(r);
  ASSERT_FALSE(r.problems.empty());
  EXPECT_NE(r.problems.front().find("rank 0 worker 0 (pid 11) left at +6.000ms before rank 0 worker 1 entered"),
            std::string::npos)
      << dump(r);
}

TEST(LoaderWorkerSeats, EveryWorkerEnteringBeforeAnyLeavesHoldsAndTheRankTakesNoSeat) {
  Events e;
  e.op(0, 0, -1, 10, "acquire", 1, 2, {{"prefix", 0}});
  e.op(0, 0, 0, 11, "barrier_attach", 3, 4).op(0, 0, 1, 12, "barrier_attach", 3, 4);
  e.round(0, 0, 0, 11, 0, 5, 8).round(0, 0, 1, 12, 0, 7, 8);
  e.op(0, 0, -1, 10, "iterate", 2, 9, {}, {{"workers", 2}});
  auto r = check("barrier.safety", e.build(meta(1, 1, 2)));
  EXPECT_EQ(r.verdict, Verdict::kValid) << dump(r);
}

TEST(LoaderWorkerSeats, AKilledWorkersPeersMustFailWithinTheLivenessBound) {
  // Worker 1 dies without entering round 1; worker 0 waits 900 ms for it: past 200 ms + slack.
  Events e;
  e.op(0, 0, 0, 11, "barrier_attach", 1, 2).op(0, 0, 1, 12, "barrier_attach", 1, 2);
  e.round(0, 0, 0, 11, 0, 3, 4).round(0, 0, 1, 12, 0, 3, 4);
  e.add({{"t", Events::at(10)}, {"type", "fault"}, {"kind", "sigkill"}, {"phase", "instant"}, {"job", 0},
         {"rank", 0}, {"worker", 1}, {"pid", 12}, {"signal", SIGKILL}, {"effect_t", Events::at(10.5)}});
  e.exit(0, 0, 1, 12, 11, {{"signal", SIGKILL}, {"by_harness", true}});
  e.op(0, 0, 0, 11, "barrier", 5, 911, {}, {{"round", 1}}, "fail", "broken");
  auto r = check("barrier.liveness", e.build(meta(1, 2, 2)));
  EXPECT_EQ(r.verdict, Verdict::kInvalid) << dump(r);
  ASSERT_FALSE(r.problems.empty());
  EXPECT_NE(r.problems.front().find("after rank 0 worker 1 (pid 12) was killed"), std::string::npos) << dump(r);
}

TEST(JobTeardown, AMemberGoneWithinTheBoundHoldsOneGoneLaterOrNeverBreaksIt) {
  auto teardown = [](Json members) {
    Events e;
    e.add({{"t", Events::at(100)}, {"type", "teardown"}, {"job", 0}, {"launcher_pid", 2}, {"bound_ms", 1000},
           {"members", members}});
    return check("job.teardown", e.build(meta(2, 0, 0)));
  };
  auto ok = teardown({{{"pid", 5}, {"role", "rank"}, {"gone_t", Events::at(900)}}});
  EXPECT_EQ(ok.verdict, Verdict::kValid) << dump(ok);
  EXPECT_TRUE(reached(ok, "job-torn-down-in-time"));
  auto late = teardown({{{"pid", 5}, {"role", "rank"}, {"gone_t", Events::at(1200)}}});
  EXPECT_EQ(late.verdict, Verdict::kInvalid) << dump(late);
  EXPECT_NE(late.problems.front().find("its rank pid 5 lived on until +1200.000ms, 1100.000ms later"),
            std::string::npos)
      << dump(late);
  auto never = teardown({{{"pid", 7}, {"role", "loader"}}});
  EXPECT_EQ(never.verdict, Verdict::kInvalid) << dump(never);
  EXPECT_NE(never.problems.front().find("its loader pid 7 was still alive when the trial ended"), std::string::npos);
}

TEST(JobTeardown, ATeardownEventWithoutItsFieldsIsAHistoryError) {
  Events e;
  e.add({{"t", Events::at(1)}, {"type", "teardown"}, {"job", 0}, {"members", "all"}});
  std::vector<std::string> errors;
  History h = e.build(meta(1, 0, 0), &errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors.front().find("teardown needs integer job, launcher_pid, bound_ms and a members array"),
            std::string::npos);
  EXPECT_TRUE(h.teardowns.empty());
}

// Without a cleanup step: a job whose holders were killed alone (their
// trackers alive) leaves nothing; one killed with its tree may.
History killed_holder(bool tree, std::vector<std::string> leftovers) {
  Events e;
  e.op(0, 0, -1, 10, "acquire", 1, 2, {{"prefix", 3}});
  Json kill = {{"t", Events::at(5)}, {"type", "fault"}, {"kind", "sigkill"}, {"phase", "instant"}, {"job", 0},
               {"rank", 0},        {"pid", 10},         {"signal", SIGKILL}};
  if (tree) kill["tree"] = true;
  e.add(kill);
  e.exit(0, 0, -1, 10, 6, {{"signal", SIGKILL}, {"by_harness", true}});
  e.add({{"t", Events::at(50)}, {"type", "audit"}, {"leftover_shm", leftovers}, {"leftover_locks", Json::array()},
         {"orphans", Json::array()}});
  return e.build(meta(1, 0, 0, /*cleanup_step=*/false));
}

TEST(TrackerReap, AHolderKilledAloneMustLeaveNothingUnderItsPrefixWithoutACleanupStep) {
  auto r = check("cleanup.no-leak", killed_holder(false, {"shmstress.000003_shard_states", "shmstress.registry"}));
  EXPECT_EQ(r.verdict, Verdict::kInvalid) << dump(r);
  EXPECT_NE(r.problems.front().find("prefix 3 (pids 10) were killed alone"), std::string::npos) << dump(r);
  EXPECT_EQ(r.problems.front().find("registry"), std::string::npos) << "the namespace's own objects stay";
  auto clean = check("cleanup.no-leak", killed_holder(false, {"shmstress.registry"}));
  EXPECT_EQ(clean.verdict, Verdict::kValid) << dump(clean);
  EXPECT_TRUE(reached(clean, "killed-alone-tracker-reaps"));
}

TEST(TrackerReap, AHolderKilledWithItsTreeTakesItsTrackerAlongAndIsNotJudged) {
  auto r = check("cleanup.no-leak", killed_holder(true, {"shmstress.000003_shard_states"}));
  EXPECT_EQ(r.verdict, Verdict::kValid) << dump(r);
  EXPECT_FALSE(reached(r, "killed-alone-tracker-reaps"));
}

TEST(ProcessExits, ALoaderWorkerKilledWithItsRankIsNoCrashButAnUnexplainedKillIs) {
  Events e;
  e.exit(0, 0, 0, 11, 5, {{"signal", SIGKILL}, {"parent_gone", true}});
  auto with_rank = check("worker.clean-exit", e.build(meta(1, 0, 1)));
  EXPECT_EQ(with_rank.verdict, Verdict::kValid) << dump(with_rank);
  EXPECT_TRUE(reached(with_rank, "loader-died-with-its-rank"));
  Events f;
  f.exit(0, 0, 0, 11, 5, {{"signal", SIGKILL}});
  auto alone = check("worker.clean-exit", f.build(meta(1, 0, 1)));
  EXPECT_EQ(alone.verdict, Verdict::kInvalid) << dump(alone);
  EXPECT_NE(alone.problems.front().find("job 0 rank 0 worker 0 (pid 11) was killed by SIGKILL"), std::string::npos)
      << dump(alone);
}

TEST(ProcessExits, ARankItsLauncherStoppedAndTheLaunchersExitOneAreNoCrash) {
  Events e;
  e.exit(0, 1, -1, 6, 5, {{"signal", SIGTERM}, {"by_launcher", true}, {"role", "rank"}});
  e.exit(0, -1, -1, 2, 9, {{"exit_code", 1}, {"role", "launcher"}});
  auto r = check("worker.clean-exit", e.build(meta(2, 0, 0)));
  EXPECT_EQ(r.verdict, Verdict::kValid) << dump(r);
  EXPECT_TRUE(reached(r, "rank-stopped-by-launcher"));
  EXPECT_TRUE(reached(r, "launcher-ended-with-failure"));
}

// torchrun's agent SIGTERMs a rank and, as its parent, usually reaps it before
// the supervisor reads the zombie: the rank's own `signalled` event, naming the
// launcher as sender, then says how it ended.
Events LaunchedRankReapedFirst(int sender, int sig) {
  Events e;
  e.add({{"t", Events::at(1)}, {"type", "start"}, {"role", "launcher"}, {"job", 0}, {"rank", -1}, {"pid", 2}});
  e.add({{"t", Events::at(2)}, {"type", "start"}, {"role", "rank"}, {"job", 0}, {"rank", 0}, {"pid", 5}, {"ppid", 2}});
  e.add({{"t", Events::at(4)}, {"type", "signalled"}, {"job", 0}, {"rank", 0}, {"local_rank", 0}, {"pid", 5},
         {"signal", sig}, {"sender", sender}});
  e.exit(0, 0, -1, 5, 5, {{"status_unknown", true}, {"role", "rank"}});
  return e;
}

TEST(ProcessExits, ARankReapedByItsLauncherFirstIsStoppedByTheLauncherWhenItSaidTheLauncherSignalledIt) {
  History h = LaunchedRankReapedFirst(2, SIGTERM).build(meta(1, 0, 0));
  ASSERT_EQ(h.exits.size(), 1u);
  EXPECT_FALSE(h.exits[0].status_unknown);
  EXPECT_EQ(h.exits[0].signal, SIGTERM);
  EXPECT_TRUE(h.exits[0].by_launcher);
  auto r = check("worker.clean-exit", h);
  EXPECT_EQ(r.verdict, Verdict::kValid) << dump(r);
  EXPECT_TRUE(reached(r, "rank-stopped-by-launcher"));
}

TEST(ProcessExits, ASignalFromAnyoneButTheLauncherLeavesAReapedRanksStatusUnknown) {
  for (auto [sender, sig] : {std::pair{0, SIGTERM}, std::pair{7, SIGTERM}, std::pair{2, SIGUSR1}}) {
    History h = LaunchedRankReapedFirst(sender, sig).build(meta(1, 0, 0));
    ASSERT_EQ(h.exits.size(), 1u);
    EXPECT_TRUE(h.exits[0].status_unknown) << "sender " << sender << " signal " << sig;
    EXPECT_FALSE(h.exits[0].by_launcher);
    EXPECT_FALSE(reached(check("worker.clean-exit", h), "rank-stopped-by-launcher"));
  }
}

TEST(ProcessEvents, ASignalledEventWithoutASignalOrSenderIsAHistoryError) {
  Events e;
  e.add({{"t", Events::at(1)}, {"type", "signalled"}, {"job", 0}, {"rank", 0}, {"pid", 5}, {"signal", 0},
         {"sender", 2}});
  e.add({{"t", Events::at(2)}, {"type", "signalled"}, {"job", 0}, {"rank", 0}, {"pid", 5}, {"signal", 15}});
  std::vector<std::string> errors;
  e.build(meta(1, 0, 0), &errors);
  ASSERT_EQ(errors.size(), 2u);
  for (const auto& err : errors) {
    EXPECT_NE(err.find("signalled needs a positive integer signal and a non-negative integer sender"),
              std::string::npos)
        << err;
  }
}

TEST(ProcessEvents, StartAndGateAreReadAndASecondGateOrABadRoleIsAHistoryError) {
  Events e;
  e.add({{"t", Events::at(1)}, {"type", "start"}, {"role", "loader"}, {"job", 0}, {"rank", 0}, {"worker", 1},
         {"pid", 12}, {"ppid", 10}});
  e.add({{"t", Events::at(2)}, {"type", "gate"}, {"phase", "open"}, {"by", "all-ready"}});
  e.add({{"t", Events::at(3)}, {"type", "gate"}, {"phase", "open"}});
  e.add({{"t", Events::at(4)}, {"type", "start"}, {"role", "boss"}, {"job", 0}, {"rank", 0}, {"pid", 13}});
  e.add({{"t", Events::at(5)}, {"type", "ready"}, {"job", 0}, {"rank", 0}, {"worker", -1}, {"pid", 10}});
  std::vector<std::string> errors;
  History h = e.build(meta(1, 0, 2), &errors);
  ASSERT_EQ(h.processes.size(), 1u);
  EXPECT_EQ(h.processes[0].worker, 1);
  EXPECT_EQ(h.processes[0].ppid, 10);
  ASSERT_TRUE(h.gate_t.has_value());
  EXPECT_EQ(*h.gate_t, Events::at(2));
  ASSERT_EQ(errors.size(), 2u) << errors.front();
  EXPECT_NE(errors[0].find("the start gate opened twice"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("start role must be rank, loader or launcher"), std::string::npos) << errors[1];
}

}  // namespace
}  // namespace harness
