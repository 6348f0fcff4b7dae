#include "history.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "checker.h"
#include "events.h"

namespace harness {
namespace {

constexpr std::int64_t kMs = 1'000'000;

Json Invoke(std::int64_t t, int job, int rank, int pid, std::int64_t id, const std::string& op,
            Json args = Json::object()) {
  return Json{{"t", t},     {"type", "invoke"}, {"job", job}, {"rank", rank}, {"local_rank", rank},
              {"pid", pid}, {"op", op},         {"id", id},   {"args", args}};
}
Json Ok(std::int64_t t, int job, int rank, int pid, std::int64_t id, Json value = Json::object()) {
  return Json{{"t", t},     {"type", "ok"}, {"job", job},    {"rank", rank},
              {"pid", pid}, {"id", id},     {"value", value}};
}
Json Fail(std::int64_t t, int job, int rank, int pid, std::int64_t id, const std::string& code,
          const std::string& msg) {
  return Json{{"t", t},
              {"type", "fail"},
              {"job", job},
              {"rank", rank},
              {"pid", pid},
              {"id", id},
              {"error", {{"code", code}, {"message", msg}}}};
}
Json ExitSignal(std::int64_t t, int job, int rank, int pid, int sig, bool by_harness,
                bool teardown = false) {
  return Json{{"t", t},
              {"type", "exit"},
              {"job", job},
              {"rank", rank},
              {"pid", pid},
              {"signal", sig},
              {"by_harness", by_harness},
              {"teardown", teardown}};
}
Json ExitCode(std::int64_t t, int job, int rank, int pid, int code) {
  return Json{{"t", t},       {"type", "exit"}, {"job", job},
              {"rank", rank}, {"pid", pid},     {"exit_code", code}};
}
Json Trial(std::int64_t t, const std::string& phase, bool timed_out = false) {
  return Json{{"t", t}, {"type", "trial"}, {"phase", phase}, {"timed_out", timed_out}};
}

History Build(const std::vector<Json>& events, std::vector<std::string>* errors = nullptr) {
  std::vector<std::string> local;
  History h = build_history(events, TrialMeta{}, errors ? errors : &local);
  if (errors == nullptr) {
    EXPECT_TRUE(local.empty()) << local.front();
  }
  return h;
}

bool AnyContains(const std::vector<std::string>& lines, const std::string& part) {
  for (const auto& l : lines) {
    if (l.find(part) != std::string::npos) return true;
  }
  return false;
}


// --- what a subject says is checked against what the harness did --------------

TEST(BelieveNothing, AnOpFromAPidTheHarnessStartedAsAnotherJobIsNotJudged) {
  std::vector<std::string> errors;
  History h = build_history({Trial(0, "start"), Invoke(1 * kMs, 1, 0, 40, 9, "acquire"),
                             Ok(2 * kMs, 1, 0, 40, 9, {{"prefix", 0}}), ExitCode(5 * kMs, 0, 0, 40, 0),
                             ExitCode(5 * kMs, 1, 0, 41, 0), Trial(6 * kMs, "end")},
                            TrialMeta{}, &errors);
  EXPECT_TRUE(AnyContains(errors, "an acquire op claims job 1 rank 0 from pid 40, which the harness started as job 0 "
                                  "rank 0: not judged"));
  EXPECT_TRUE(h.ops.empty());
}

TEST(BelieveNothing, AnOpFromAPidNeverStartedAsThatRankIsNotJudged) {
  std::vector<std::string> errors;
  History h = build_history({Trial(0, "start"), Invoke(1 * kMs, 0, 0, 99999, 9, "acquire"),
                             Ok(2 * kMs, 0, 0, 99999, 9, {{"prefix", 0}}), ExitCode(5 * kMs, 0, 0, 40, 0),
                             Trial(6 * kMs, "end")},
                            TrialMeta{}, &errors);
  EXPECT_TRUE(AnyContains(errors, "claims job 0 rank 0 from pid 99999, which the harness never started as that rank"));
  EXPECT_TRUE(h.ops.empty());
}

TEST(BelieveNothing, ACompletionOutsideTheTrialIsAHistoryErrorAndItsOpIsDropped) {
  std::vector<std::string> errors;
  History h = build_history({Trial(0, "start"), Invoke(1 * kMs, 0, 0, 40, 9, "clean"),
                             Ok(std::int64_t{1} << 62, 0, 0, 40, 9), ExitCode(5 * kMs, 0, 0, 40, 0),
                             Trial(6 * kMs, "end")},
                            TrialMeta{}, &errors);
  EXPECT_TRUE(AnyContains(errors, "a worker event outside the trial (it ran from t=0 to t=6000000)"));
  EXPECT_TRUE(h.ops.empty()) << "a 2^62 ns latency reached the ops";
}

// --- a worker must have run its workload --------------------------------------

TrialMeta OneJobTwoRounds() {
  TrialMeta m;
  JobMeta j;
  j.ranks = 1;
  j.barrier_rounds = 2;
  m.jobs.push_back(j);
  return m;
}

TEST(WorkloadRun, AWorkerThatExitedWithoutAnyOpIsAHistoryError) {
  std::vector<std::string> errors;
  build_history({Trial(0, "start"), ExitCode(5 * kMs, 0, 0, 40, 0), Trial(6 * kMs, "end")}, OneJobTwoRounds(), &errors);
  EXPECT_TRUE(AnyContains(errors, "job 0 rank 0 (pid 40) exited 0 without logging any operation")) << errors.size();
}

TEST(WorkloadRun, AWorkerThatLeftTheRoundsEarlyWithNothingFailedIsAHistoryError) {
  std::vector<std::string> errors;
  build_history({Trial(0, "start"), Invoke(1 * kMs, 0, 0, 40, 1, "acquire"), Ok(2 * kMs, 0, 0, 40, 1, {{"prefix", 0}}),
                 Invoke(3 * kMs, 0, 0, 40, 2, "barrier", {{"round", 0}}), Ok(4 * kMs, 0, 0, 40, 2),
                 ExitCode(5 * kMs, 0, 0, 40, 0), Trial(6 * kMs, "end")},
                OneJobTwoRounds(), &errors);
  EXPECT_TRUE(AnyContains(errors, "exited 0 after barrier round 0 of 2 with nothing failed")) << errors.size();
}

TEST(WorkloadRun, AWorkerThatRanEveryRoundOrFailedOrWasKilledIsFine) {
  for (const auto& events : std::vector<std::vector<Json>>{
           {Trial(0, "start"), Invoke(1 * kMs, 0, 0, 40, 1, "barrier", {{"round", 0}}), Ok(2 * kMs, 0, 0, 40, 1),
            Invoke(3 * kMs, 0, 0, 40, 2, "barrier", {{"round", 1}}), Ok(4 * kMs, 0, 0, 40, 2),
            ExitCode(5 * kMs, 0, 0, 40, 0), Trial(6 * kMs, "end")},
           {Trial(0, "start"), Invoke(1 * kMs, 0, 0, 40, 1, "acquire"), Fail(2 * kMs, 0, 0, 40, 1, "timeout", "x"),
            ExitCode(5 * kMs, 0, 0, 40, 1), Trial(6 * kMs, "end")},
           {Trial(0, "start"), ExitSignal(5 * kMs, 0, 0, 40, SIGKILL, true), Trial(6 * kMs, "end")}}) {
    std::vector<std::string> errors;
    build_history(events, OneJobTwoRounds(), &errors);
    EXPECT_TRUE(errors.empty()) << errors.front();
  }
}

// A replacement rank (fault kind "replacement") takes its dead predecessor's
// seat at the round it had not completed: after the last round there is none.
std::vector<Json> ReplacementJoiningAt(int first_round) {
  Json start = {{"t", 1 * kMs}, {"type", "fault"}, {"kind", "replacement"}, {"phase", "start"},
                {"job", 0},     {"rank", 0},       {"pid", 40},            {"detail", Json::object()}};
  Json end = {{"t", 2 * kMs}, {"type", "fault"}, {"kind", "replacement"}, {"phase", "end"}, {"job", 0}, {"rank", 0},
              {"pid", 40},    {"detail", {{"first_round", first_round}, {"replacement_pid", 41}}}};
  return {Trial(0, "start"),
          start,
          ExitSignal(2 * kMs, 0, 0, 40, SIGKILL, true),
          end,
          Invoke(3 * kMs, 0, 0, 41, 1, "barrier_attach"),
          Ok(4 * kMs, 0, 0, 41, 1),
          Invoke(5 * kMs, 0, 0, 41, 2, "barrier_detach"),
          Ok(6 * kMs, 0, 0, 41, 2),
          ExitCode(7 * kMs, 0, 0, 41, 0),
          Trial(8 * kMs, "end")};
}

TEST(WorkloadRun, AReplacementThatCameAfterTheLastRoundRunsNoRoundAndIsFine) {
  std::vector<std::string> errors;
  build_history(ReplacementJoiningAt(2), OneJobTwoRounds(), &errors);
  EXPECT_TRUE(errors.empty()) << errors.front();
}

TEST(WorkloadRun, AReplacementThatCameMidWayAndRanNoRoundStoppedEarly) {
  std::vector<std::string> errors;
  build_history(ReplacementJoiningAt(1), OneJobTwoRounds(), &errors);
  EXPECT_TRUE(AnyContains(errors, "job 0 rank 0 (pid 41) exited 0 after barrier round -1 of 2 with nothing failed"))
      << errors.size();
}

TEST(ParseJsonl, KeepsObjectsSkipsBlankLinesAndNamesBadLinesByNumber) {
  std::string text =
      "{\"t\":1,\"type\":\"trial\",\"phase\":\"start\"}\n"
      "\n"
      "   \n"
      "not json at all\n"
      "[1,2,3]\n"
      "{\"t\":2,\"type\":\"trial\",\"phase\":\"end\"}\r\n"
      "{\"t\":3,\"type\":";  // a torn last line
  std::vector<std::string> errors;
  auto events = parse_jsonl(text, &errors);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1]["t"], 2);
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_TRUE(AnyContains(errors, "line 4: not JSON"));
  EXPECT_TRUE(AnyContains(errors, "line 5: not a JSON object"));
  EXPECT_TRUE(AnyContains(errors, "line 7"));
}

TEST(ParseJsonl, ATornLineDoesNotSwallowTheEventWrittenAfterIt) {
  // A writer killed inside write(2) left half a line; the next writer's line
  // begins right after it, on the same line.
  std::string text =
      "{\"t\":1,\"type\":\"trial\",\"phase\":\"start\"}\n"
      "{\"t\":2,\"type\":\"ok\",\"op\":\"clean\",\"id\":1,\"value\":{\"removed\":[\"/a\","
      "{\"t\":3,\"type\":\"trial\",\"phase\":\"end\",\"note\":{\"x\":1}}\n";
  std::vector<std::string> errors;
  auto events = parse_jsonl(text, &errors);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].value("phase", ""), "end");
  EXPECT_EQ(events[1]["note"]["x"], 1);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("line 2: a torn event (its writer died inside write(2)) before a "
                           "complete one; the torn one is lost: {\"t\":2,\"type\":\"ok\""),
            std::string::npos)
      << errors[0];
}

// A real SIGKILL landing mid-write: the child writes the first half of an
// event line with write(2) and is killed before the second half; then another
// process appends a whole event. Only the torn event is lost.
TEST(ParseJsonl, ASigkillMidWriteLosesOnlyTheTornEvent) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("history_sigkill_" + std::to_string(::getpid()) + ".jsonl"))
                               .string();
  struct Remove {
    std::string p;
    ~Remove() { std::filesystem::remove(p); }
  } remove{path};
  EventLog log(path);
  ASSERT_TRUE(log.ok());
  log.emit({{"t", 1}, {"type", "trial"}, {"phase", "start"}});
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int fd = ::open(path.c_str(), O_WRONLY | O_APPEND);
    const std::string line = split_event(
        Json{{"t", 2}, {"type", "invoke"}, {"op", "clean"}, {"id", 1}, {"job", 0}, {"rank", 0},
             {"pid", ::getpid()}},
        4096)[0];
    (void)!::write(fd, line.data(), line.size() / 2);  // the half that made it
    char c = 1;
    (void)!::write(ready[1], &c, 1);
    for (;;) ::pause();  // killed before the rest
  }
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::kill(child, SIGKILL);
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFSIGNALED(st));
  ::close(ready[0]);
  ::close(ready[1]);
  log.emit({{"t", 3}, {"type", "trial"}, {"phase", "end"}, {"timed_out", false}});

  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> errors;
  auto events = parse_jsonl(text.str(), &errors);
  ASSERT_EQ(events.size(), 2u) << text.str();
  EXPECT_EQ(events[1].value("phase", ""), "end");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("line 2: a torn event"), std::string::npos) << errors[0];
  History h = build_history(events, TrialMeta{}, &errors);
  EXPECT_TRUE(h.started && h.ended);
}

TEST(ParseJsonl, BinaryGarbageAndInvalidUtf8NeverThrow) {
  std::string text = std::string("\x00\xff\xfe", 3) +
                     "{\"t\":\xc3\x28}\n\x80\x81\n{\"t\":1,\"type\":\"x\xff\"}\n" +
                     std::string(5000, '{') + "\n";
  std::vector<std::string> errors;
  std::vector<Json> events;
  EXPECT_NO_THROW(events = parse_jsonl(text, &errors));
  EXPECT_FALSE(errors.empty());
  // Whatever parsed must still be printable and buildable.
  EXPECT_NO_THROW(build_history(events, TrialMeta{}, &errors));
}

TEST(ParseJsonl, AcceptsANullErrorSink) {
  EXPECT_EQ(parse_jsonl("garbage\n{\"a\":1}\n", nullptr).size(), 1u);
}

TEST(BuildHistory, AnAliveLookIsKeptAndNoneMayFollowTheProcesssExit) {
  std::vector<std::string> errors;
  const History h = build_history(
      {Json{{"t", 1}, {"type", "trial"}, {"phase", "start"}},
       Json{{"t", 5}, {"type", "alive"}, {"pid", 10}, {"job", 0}, {"rank", 0}},
       Json{{"t", 8}, {"type", "exit"}, {"pid", 10}, {"job", 0}, {"rank", 0}, {"exit_code", 0}},
       Json{{"t", 9}, {"type", "alive"}, {"pid", 10}, {"job", 0}, {"rank", 0}},
       Json{{"t", 9}, {"type", "alive"}, {"pid", 11}, {"job", 0}},
       Json{{"t", 20}, {"type", "trial"}, {"phase", "end"}}},
      TrialMeta{}, &errors);
  ASSERT_EQ(h.alive.size(), 1u);
  EXPECT_EQ(h.alive[0].t, 5);
  EXPECT_EQ(h.alive[0].pid, 10);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find("alive after the process's exit"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("worker event needs integer job, rank and pid"), std::string::npos)
      << errors[1];
}

TEST(BuildHistory, PairsInvokeAndCompletionByWorkerAndIdEvenWhenInterleaved) {
  History h = Build({
      Invoke(10, 0, 0, 100, 1, "acquire"),
      Invoke(11, 0, 1, 101, 1, "acquire"),
      Fail(20, 0, 1, 101, 1, "in-use", "local dir /data/0 is in use"),
      Ok(21, 0, 0, 100, 1, {{"prefix", 3}}),
  });
  ASSERT_EQ(h.ops.size(), 2u);
  EXPECT_EQ(h.ops[0].pid, 100);
  EXPECT_EQ(h.ops[0].outcome, Outcome::kOk);
  EXPECT_EQ(h.ops[0].value["prefix"], 3);
  EXPECT_EQ(h.ops[0].complete_t, 21);
  EXPECT_EQ(h.ops[0].local_rank, 0);
  EXPECT_EQ(h.ops[1].outcome, Outcome::kFail);
  EXPECT_EQ(h.ops[1].error_code, "in-use");
  EXPECT_EQ(h.ops[1].error_message, "local dir /data/0 is in use");
  EXPECT_EQ(h.ops[1].complete_t, 20);
}

TEST(BuildHistory, SortsByTimeSoFileOrderDoesNotMatter) {
  History h = Build({
      Ok(30, 0, 0, 100, 2),
      Trial(0, "start"),
      Invoke(25, 0, 0, 100, 2, "release"),
      Ok(20, 0, 0, 100, 1, {{"prefix", 0}}),
      Invoke(10, 0, 0, 100, 1, "acquire"),
      ExitCode(40, 0, 0, 100, 0),
      Trial(50, "end"),
  });
  ASSERT_EQ(h.ops.size(), 2u);
  EXPECT_EQ(h.ops[0].op, "acquire");
  EXPECT_EQ(h.ops[0].outcome, Outcome::kOk);
  EXPECT_EQ(h.ops[1].op, "release");
  EXPECT_EQ(h.ops[1].outcome, Outcome::kOk);
  EXPECT_EQ(h.start_t, 0);
  EXPECT_EQ(h.end_t, 50);
}

TEST(BuildHistory, OpenOpOfWorkerKilledByHarnessIsInfoClosedAtItsExit) {
  History h = Build({
      Invoke(10 * kMs, 0, 1, 101, 1, "barrier", {{"round", 0}}),
      Json{{"t", 12 * kMs},
           {"type", "fault"},
           {"kind", "sigkill"},
           {"job", 0},
           {"rank", 1},
           {"pid", 101},
           {"phase", "instant"}},
      ExitSignal(13 * kMs, 0, 1, 101, SIGKILL, true),
  });
  ASSERT_EQ(h.ops.size(), 1u);
  EXPECT_EQ(h.ops[0].outcome, Outcome::kInfo);
  EXPECT_EQ(h.ops[0].complete_t, 13 * kMs);
  EXPECT_EQ(h.ops[0].info_cause, "killed by harness (SIGKILL)");
  EXPECT_TRUE(h.exits[0].crash_point.empty());
}

TEST(BuildHistory, CrashPointAnnouncedBeforeASelfKillNamesTheCauseAndTheExit) {
  History h = Build({
      Invoke(10, 0, 0, 100, 1, "barrier", {{"round", 0}}),
      Json{{"t", 11},
           {"type", "point"},
           {"job", 0},
           {"rank", 0},
           {"pid", 100},
           {"name", "crash/barrier/wait/after-enter"}},
      ExitSignal(12, 0, 0, 100, SIGKILL, false),
  });
  EXPECT_EQ(h.ops[0].outcome, Outcome::kInfo);
  EXPECT_EQ(h.ops[0].info_cause, "killed itself at crash point crash/barrier/wait/after-enter");
  EXPECT_EQ(h.exits[0].crash_point, "crash/barrier/wait/after-enter");
}

TEST(BuildHistory, PointOfAnotherProcessDoesNotMarkACrash) {
  History h = Build({
      Json{
          {"t", 11}, {"type", "point"}, {"job", 0}, {"rank", 0}, {"pid", 100}, {"name", "crash/x"}},
      ExitSignal(12, 0, 1, 101, SIGKILL, true),
      ExitCode(13, 0, 0, 100, 0),  // announced a point, yet exited: it did not crash there
  });
  EXPECT_TRUE(h.exits[0].crash_point.empty());
  EXPECT_TRUE(h.exits[1].crash_point.empty());
}

TEST(BuildHistory, OpenOpOfWorkerDeadOfSegvSaysWhichSignal) {
  History h =
      Build({Invoke(10, 0, 0, 100, 1, "acquire"), ExitSignal(12, 0, 0, 100, SIGSEGV, false)});
  EXPECT_EQ(h.ops[0].info_cause.rfind("signal 11", 0), 0u) << h.ops[0].info_cause;
}

TEST(BuildHistory, OpenOpKilledAtTeardownOfATimedOutTrialIsATrialTimeout) {
  History h = Build({
      Trial(0, "start"),
      Invoke(10, 0, 0, 100, 1, "barrier", {{"round", 0}}),
      Json{{"t", 900}, {"type", "trial"}, {"phase", "timeout"}, {"timed_out", true}},
      ExitSignal(1000, 0, 0, 100, SIGKILL, true, true),
      Trial(1100, "end", true),
  });
  EXPECT_TRUE(h.timed_out);
  EXPECT_EQ(h.ops[0].outcome, Outcome::kInfo);
  EXPECT_EQ(h.ops[0].info_cause, kCauseTrialTimeout);
  EXPECT_EQ(h.ops[0].complete_t, 1000);
}

TEST(BuildHistory, OpenOpOfANeverReapedWorkerClosesAtTrialEnd) {
  History h = Build({Trial(0, "start"), Invoke(10, 0, 0, 100, 1, "acquire"), Trial(500, "end")});
  EXPECT_EQ(h.ops[0].outcome, Outcome::kInfo);
  EXPECT_EQ(h.ops[0].complete_t, 500);
  EXPECT_EQ(h.ops[0].info_cause, "still running at trial end");
}

TEST(BuildHistory, OpenOpOfAWorkerThatExitedNormallySaysSo) {
  History h = Build({Invoke(10, 0, 0, 100, 1, "release"), ExitCode(20, 0, 0, 100, 0)});
  EXPECT_EQ(h.ops[0].info_cause, "exited 0 without completing");
  EXPECT_EQ(h.ops[0].complete_t, 20);
}

TEST(BuildHistory, FaultWindowsPairStartAndEndAndUnmatchedStartsLastToTrialEnd) {
  auto fault = [](std::int64_t t, const std::string& kind, const std::string& phase, int rank,
                  Json detail = {}) {
    return Json{{"t", t},       {"type", "fault"},   {"kind", kind},   {"job", 0},
                {"rank", rank}, {"pid", 100 + rank}, {"phase", phase}, {"detail", detail}};
  };
  History h = Build({
      Trial(0, "start"),
      fault(10, "sigstop", "start", 0, {{"duration_ms", 5}}),
      fault(12, "sigkill", "instant", 1),
      fault(15, "sigstop", "end", 0, {{"resumed", true}}),
      fault(20, "sigstop", "start", 1),
      Trial(100, "end"),
  });
  ASSERT_EQ(h.faults.size(), 3u);
  EXPECT_EQ(h.faults[0].kind, "sigstop");
  EXPECT_EQ(h.faults[0].start_t, 10);
  EXPECT_EQ(h.faults[0].end_t, 15);
  EXPECT_EQ(h.faults[0].detail["duration_ms"], 5);
  EXPECT_EQ(h.faults[0].detail["resumed"], true);
  EXPECT_EQ(h.faults[1].kind, "sigkill");
  EXPECT_EQ(h.faults[1].start_t, h.faults[1].end_t);
  EXPECT_EQ(h.faults[2].end_t, 100);
  EXPECT_EQ(h.faults[2].pid, 101);
}

TEST(BuildHistory, AuditAndFdReportsFillTheAudit) {
  History h = Build({
      Json{{"t", 5}, {"type", "fds"}, {"job", 0}, {"rank", 0}, {"pid", 100}, {"count", 7}},
      Json{{"t", 6}, {"type", "fds"}, {"job", 1}, {"rank", 1}, {"pid", 111}, {"count", 9}},
      Json{{"t", 90},
           {"type", "audit"},
           {"leftover_shm", {"/shm.000001_barrier"}},
           {"leftover_locks", {"/locks/000001_barrier_filelock"}},
           {"orphans", {4242}}},
  });
  EXPECT_TRUE(h.audit.ran);
  EXPECT_EQ(h.audit.max_fds, 9);
  EXPECT_EQ(h.audit.max_fds_pid, 111);
  EXPECT_EQ(h.audit.max_fds_job, 1);
  EXPECT_EQ(h.audit.leftover_shm, std::vector<std::string>{"/shm.000001_barrier"});
  EXPECT_EQ(h.audit.leftover_locks, std::vector<std::string>{"/locks/000001_barrier_filelock"});
  EXPECT_EQ(h.audit.orphan_pids, std::vector<int>{4242});
}

TEST(BuildHistory, WithoutAnAuditEventTheAuditDidNotRun) {
  History h = Build({Trial(0, "start"), Trial(10, "end")});
  EXPECT_FALSE(h.audit.ran);
  EXPECT_EQ(h.audit.max_fds, -1);
}

TEST(BuildHistory, MalformedEventsAreReportedAndSkippedWithoutLosingGoodOnes) {
  std::vector<std::string> errors;
  History h = Build(
      {
          Json{{"type", "invoke"}},             // no t
          Json{{"t", "soon"}, {"type", "ok"}},  // t not an integer
          Json{{"t", 1}, {"type", 7}},          // type not a string
          Json{{"t", 2}, {"type", "invoke"}, {"job", 0}, {"rank", 0}, {"pid", 1}},  // no op / id
          Json{{"t", 3},
               {"type", "invoke"},
               {"job", "zero"},
               {"rank", 0},
               {"pid", 1},
               {"op", "acquire"},
               {"id", 1}},
          Ok(4, 0, 0, 1, 99),                    // never invoked
          Json{{"t", 5}, {"type", "levitate"}},  // unknown type
          Invoke(6, 0, 0, 1, 1, "acquire"),
          Invoke(7, 0, 0, 1, 1, "acquire"),  // same id while open
          Ok(8, 0, 0, 1, 1, {{"prefix", 0}}),
          Json{{"t", 9}, {"type", "exit"}, {"job", 0}, {"rank", 0}},  // neither code nor signal
          Json{{"t", 10},
               {"type", "fault"},
               {"kind", "sigstop"},
               {"phase", "end"},
               {"job", 0},
               {"rank", 0}},
          Json{
              {"t", 11}, {"type", "audit"}, {"leftover_shm", "not-a-list"}, {"orphans", {"x", -3}}},
          Json::array({1, 2}),
      },
      &errors);
  EXPECT_EQ(errors.size(), 14u);
  EXPECT_TRUE(AnyContains(errors, "completion without an open invoke"));
  EXPECT_TRUE(AnyContains(errors, "unknown event type \"levitate\""));
  EXPECT_TRUE(AnyContains(errors, "second invoke"));
  EXPECT_TRUE(AnyContains(errors, "fault end without a start"));
  ASSERT_EQ(h.ops.size(), 1u);
  EXPECT_EQ(h.ops[0].outcome, Outcome::kOk);
  EXPECT_EQ(h.exits.size(), 1u);
  EXPECT_TRUE(h.audit.orphan_pids.empty());
}

TEST(BuildHistory, AFloodOfBadEventsIsCappedWithACount) {
  std::vector<Json> events(1000, Json{{"t", 1}, {"type", "nonsense"}});
  std::vector<std::string> errors;
  build_history(events, TrialMeta{}, &errors);
  ASSERT_EQ(errors.size(), 201u);
  EXPECT_EQ(errors.back(), "... and 800 more errors");
}

TEST(BuildHistory, OddlyTypedArgsValuesAndErrorsAreHistoryErrorsAndCheckersDoNotThrow) {
  std::vector<std::string> errors;
  History h = Build(
      {
          Trial(0, "start"),
          Json{{"t", 1},
               {"type", "invoke"},
               {"job", 0},
               {"rank", 0},
               {"pid", 1},
               {"op", "barrier"},
               {"id", 1},
               {"args", "round three"}},
          Json{{"t", 2},
               {"type", "ok"},
               {"job", 0},
               {"rank", 0},
               {"pid", 1},
               {"id", 1},
               {"value", {1, 2}}},
          Json{{"t", 3},
               {"type", "invoke"},
               {"job", 0},
               {"rank", 0},
               {"pid", 1},
               {"op", "acquire"},
               {"id", 2}},
          Json{{"t", 4},
               {"type", "fail"},
               {"job", 0},
               {"rank", 0},
               {"pid", 1},
               {"id", 2},
               {"error", "plain text"}},
          Json{{"t", 5},
               {"type", "invoke"},
               {"job", 0},
               {"rank", 0},
               {"pid", 1},
               {"op", "clean"},
               {"id", 3}},
          Json{{"t", 6},
               {"type", "ok"},
               {"job", 0},
               {"rank", 0},
               {"pid", 1},
               {"id", 3},
               {"value", {{"removed", "all of it"}, {"kept", {1, "\xff\xfe"}}}}},
          Json{{"t", 7}, {"type", "fault"}, {"kind", "sigstop"}, {"detail", "x"}, {"job", 0}},
          ExitCode(8, 0, 0, 1, 1),
          Trial(9, "end"),
      },
      &errors);
  // Each oddly typed piece is named, and the ops survive with what was valid.
  std::string all;
  for (const auto& e : errors) all += e + "\n";
  EXPECT_NE(all.find("event 1 (t=1): invoke args must be an object"), std::string::npos) << all;
  EXPECT_NE(all.find("event 2 (t=2): ok value must be an object"), std::string::npos) << all;
  EXPECT_NE(all.find("event 6 (t=6): clean removed, kept and skipped must be lists of names"),
            std::string::npos)
      << all;
  ASSERT_EQ(h.ops.size(), 3u);
  EXPECT_EQ(h.ops[1].error_message, "plain text");  // a bare string error is still its message
  EXPECT_TRUE(h.ops[2].removed.empty());
  std::vector<CheckResult> results;
  ASSERT_NO_THROW(results = run_checkers(h));
  for (const auto& r : results) {
    if (r.invariant.starts_with("test.")) continue;  // test doubles registered by other tests
    for (const auto& p : r.problems)
      EXPECT_EQ(p.find("checker failed"), std::string::npos) << r.invariant << ": " << p;
  }
}

TEST(BuildHistory, ContinuationLinesMergeIntoOneResult) {
  Json first = Ok(3, 0, 0, 7, 1, {{"removed", {"/a", "/b"}}, {"kept", {"/k"}}, {"skipped", Json::array()}});
  first["continues"] = true;
  Json last = Ok(3, 0, 0, 7, 1, {{"removed", {"/c"}}, {"kept", Json::array()}, {"skipped", Json::array()}});
  History h = Build({Trial(0, "start"), Invoke(1, 0, 0, 7, 1, "clean"),
                     Invoke(2, 1, 0, 8, 1, "clean"), first, Ok(3, 1, 0, 8, 1), last,
                     Trial(9, "end")});
  ASSERT_EQ(h.ops.size(), 2u);
  const Op& clean = h.ops[0];
  EXPECT_EQ(clean.outcome, Outcome::kOk);
  EXPECT_EQ(clean.removed, (std::vector<std::string>{"/a", "/b", "/c"}));
  EXPECT_EQ(clean.kept, (std::vector<std::string>{"/k"}));
  EXPECT_FALSE(clean.truncated);
  EXPECT_FALSE(clean.value.contains("continues"));
  EXPECT_EQ(h.ops[1].outcome, Outcome::kOk);  // another writer's event in between is its own
}

TEST(BuildHistory, AWriterKilledBetweenContinuationLinesLeavesTheOpOpenAndTruncated) {
  Json first = Ok(3, 0, 0, 7, 1, {{"removed", {"/a", "/b"}}});
  first["continues"] = true;
  History h = Build({Trial(0, "start"), Invoke(1, 0, 0, 7, 1, "clean"), first,
                     ExitSignal(5, 0, 0, 7, SIGKILL, true), Trial(9, "end")});
  ASSERT_EQ(h.ops.size(), 1u);
  EXPECT_EQ(h.ops[0].outcome, Outcome::kInfo);
  EXPECT_TRUE(h.ops[0].truncated);
}

TEST(BuildHistory, TruncatedAtTheTopOrInTheValueMarksTheOp) {
  Json top = Ok(2, 0, 0, 7, 1, {{"removed", {"/a"}}});
  top["truncated"] = true;
  History h = Build({Trial(0, "start"), Invoke(1, 0, 0, 7, 1, "clean"), top,
                     Invoke(3, 0, 0, 7, 2, "clean"),
                     Ok(4, 0, 0, 7, 2, {{"removed", {"/b"}}, {"truncated", true}}),
                     Invoke(5, 0, 0, 7, 3, "clean"), Ok(6, 0, 0, 7, 3, {{"removed", {"/c"}}}),
                     Trial(9, "end")});
  ASSERT_EQ(h.ops.size(), 3u);
  EXPECT_TRUE(h.ops[0].truncated);
  EXPECT_TRUE(h.ops[1].truncated);
  EXPECT_FALSE(h.ops[2].truncated);
}

TEST(BuildHistory, TheSubjectEventIsAFactNotAnError) {
  History h = Build({Trial(0, "start"),
                     Json{{"t", 1}, {"type", "subject"}, {"available", true}, {"name", "streaming"},
                          {"pid", 3}, {"job", 0}, {"rank", 0}},
                     Trial(9, "end")});
  EXPECT_FALSE(h.unavailable.has_value());
  History off = Build({Trial(0, "start"),
                       Json{{"t", 1}, {"type", "subject"}, {"available", false},
                            {"reason", "cannot import streaming"}},
                       Trial(9, "end")});
  EXPECT_EQ(off.unavailable, "cannot import streaming");
  std::vector<std::string> errors;
  Build({Json{{"t", 1}, {"type", "subject"}, {"available", "no"}}}, &errors);
  EXPECT_TRUE(AnyContains(errors, "subject event needs available: true or false")) << errors.size();
}

TEST(BuildHistory, WrongTypedIdentityFieldsAreHistoryErrorsNotCrashes) {
  std::vector<std::string> errors;
  History h = Build({Trial(0, "start"), Json{{"t", 1}, {"type", 1}, {"pid", 3}},
                     Json{{"t", 2}, {"type", "trial"}, {"phase", 7}},
                     Json{{"t", 3}, {"type", "subject"}, {"available", false}, {"reason", 5}},
                     Json{{"t", 4}, {"type", "harness-error"}, {"message", 3}},
                     Trial(9, "end")},
                    &errors);
  EXPECT_TRUE(AnyContains(errors, "event 1: needs an integer t and a string type"));
  EXPECT_TRUE(AnyContains(errors, "trial phase must be start, end, timeout or cut"));
  EXPECT_TRUE(AnyContains(errors, "subject reason must be a string"));
  EXPECT_TRUE(AnyContains(errors, "harness-error needs a string message"));
  EXPECT_EQ(h.unavailable, "the subject reported itself unavailable");
  EXPECT_EQ(h.harness_errors.size(), 1u);
  EXPECT_TRUE(h.started && h.ended);
}

TEST(BuildHistory, SegmentWitnessAndPresentValuesAreTyped) {
  Json present = Json::array();
  present.push_back("/r000003_locals");
  present.push_back(Json{{"name", "/r000003_x"}, {"dev", 4}, {"ino", 9}});
  Json seen = Json::array();
  seen.push_back(Json{{"name", "/r000003_x"}, {"dev", 4}, {"ino", 10}});
  seen.push_back(Json{{"name", "/r000003_y"}, {"missing", true}});
  seen.push_back(Json{{"name", "/r000003_z"}, {"error", "EACCES: Permission denied"}});
  History h = Build({Trial(0, "start"), Invoke(1, 0, 0, 7, 1, "acquire"),
                     Ok(2, 0, 0, 7, 1, Json{{"prefix", 3}, {"present", present}}),
                     Invoke(3, 0, 0, 7, 2, "segment", Json{{"name", "/r000003_x"}}),
                     Ok(4, 0, 0, 7, 2, Json{{"name", "/r000003_x"}, {"dev", 4}, {"ino", 10}}),
                     Invoke(5, 0, 0, 7, 3, "witness", Json{{"when", "release"}}),
                     Ok(6, 0, 0, 7, 3, Json{{"segments", seen}}), Trial(9, "end")});
  ASSERT_EQ(h.ops.size(), 3u);
  EXPECT_EQ(h.ops[0].prefix, 3);
  ASSERT_EQ(h.ops[0].present.size(), 2u);
  EXPECT_FALSE(h.ops[0].present[0].ino.has_value());
  EXPECT_EQ(h.ops[0].present[1].ino, 9u);
  ASSERT_TRUE(h.ops[1].segment.has_value());
  EXPECT_EQ(h.ops[1].segment->ino, 10u);
  EXPECT_EQ(h.ops[2].witness_when, "release");
  ASSERT_EQ(h.ops[2].sightings.size(), 3u);
  EXPECT_EQ(h.ops[2].sightings[0].state, Sighting::State::kPresent);
  EXPECT_EQ(h.ops[2].sightings[1].state, Sighting::State::kMissing);
  EXPECT_EQ(h.ops[2].sightings[2].state, Sighting::State::kError);

  std::vector<std::string> errors;
  Json bad_seen = Json::array();
  bad_seen.push_back(Json{{"name", "/x"}});
  Build({Invoke(1, 0, 0, 7, 1, "witness", Json{{"when", "later"}}),
         Ok(2, 0, 0, 7, 1, Json{{"segments", bad_seen}}), Invoke(3, 0, 0, 7, 2, "acquire"),
         Ok(4, 0, 0, 7, 2, Json{{"prefix", "3"}})},
        &errors);
  EXPECT_TRUE(AnyContains(errors, "witness args.when must be \"release\", \"end\" or \"live\""));
  EXPECT_TRUE(AnyContains(errors, "witness ok needs segments"));
  EXPECT_TRUE(AnyContains(errors, "acquire ok needs an integer prefix >= 0"));
}

TEST(BuildHistory, AnAcquiresRemovedNamesAreReadAndABadListIsAHistoryError) {
  std::vector<std::string> errors;
  History h = Build({Trial(0, "start"), Invoke(1, 0, 0, 7, 1, "acquire"),
                     Ok(2, 0, 0, 7, 1, Json{{"prefix", 3}, {"removed", {"/r000001_barrier"}}}),
                     Invoke(3, 0, 0, 7, 2, "acquire"),
                     Ok(4, 0, 0, 7, 2, Json{{"prefix", 4}, {"removed", {"/r000002_x", 7}}}), Trial(9, "end")},
                    &errors);
  ASSERT_EQ(h.ops.size(), 2u);
  EXPECT_EQ(h.ops[0].removed, std::vector<std::string>{"/r000001_barrier"});
  EXPECT_TRUE(h.ops[1].removed.empty()) << "a list with a bad entry shows nothing";
  EXPECT_TRUE(AnyContains(errors, "acquire removed must be a list of names"));
}

TEST(BuildHistory, PoolFolderFileChmodAndRemoveValuesAreTyped) {
  const std::string dir = "/dev/shm/joblib_memmapping_folder_7_a_b";
  History h = Build({Trial(0, "start"), Invoke(1, 0, 0, 7, 1, "pool"),
                     Invoke(2, 0, 0, 7, 2, "folder", Json{{"name", dir}}),
                     Ok(3, 0, 0, 7, 2, Json{{"name", dir}, {"dev", 4}, {"ino", 9}, {"mode", 0755}}),
                     Invoke(4, 0, 0, 7, 3, "file", Json{{"name", dir + "/x.pkl"}}),
                     Ok(5, 0, 0, 7, 3, Json{{"name", dir + "/x.pkl"}, {"dev", 4}, {"ino", 10}, {"mode", 0644}}),
                     Invoke(6, 0, 0, 7, 4, "chmod", Json{{"name", dir + "/x.pkl"}, {"mode", 0600}}),
                     Ok(7, 0, 0, 7, 4, Json{{"name", dir + "/x.pkl"}, {"dev", 4}, {"ino", 10}, {"mode", 0600}}),
                     Invoke(8, 0, 0, 7, 5, "remove", Json{{"name", dir}}),
                     Ok(9, 0, 0, 7, 5, Json{{"removed", {dir, dir + "/x.pkl"}}}), Ok(10, 0, 0, 7, 1),
                     Trial(11, "end")});
  ASSERT_EQ(h.ops.size(), 5u);
  ASSERT_TRUE(h.ops[1].segment.has_value());
  EXPECT_EQ(h.ops[1].segment->ino, 9u);
  EXPECT_EQ(h.ops[1].mode, 0755u);
  EXPECT_EQ(h.ops[2].mode, 0644u);
  EXPECT_EQ(h.ops[3].segment->name, dir + "/x.pkl");
  EXPECT_EQ(h.ops[3].mode, 0600u);
  EXPECT_EQ(h.ops[4].removed, (std::vector<std::string>{dir, dir + "/x.pkl"}));

  std::vector<std::string> errors;
  Build({Invoke(1, 0, 0, 7, 1, "folder", Json{{"name", dir}}), Ok(2, 0, 0, 7, 1, Json{{"name", dir}, {"mode", 070000}}),
         Invoke(3, 0, 0, 7, 2, "chmod"), Ok(4, 0, 0, 7, 2, Json{{"mode", 0600}}),
         Invoke(5, 0, 0, 7, 3, "remove"), Ok(6, 0, 0, 7, 3, Json{{"removed", "all"}})},
        &errors);
  EXPECT_TRUE(AnyContains(errors, "folder ok value.mode must be a permission mode (0..07777)"));
  EXPECT_TRUE(AnyContains(errors, "chmod ok needs a name"));
  EXPECT_TRUE(AnyContains(errors, "remove removed must be a list of names"));
}

TEST(BuildHistory, AuditSaysHowLongStragglersRanAndWhetherTheyExited) {
  History h = Build({Trial(0, "start"),
                     Json{{"t", 5}, {"type", "audit"}, {"leftover_shm", Json::array()}, {"straggler_wait_ms", 45000},
                          {"stragglers_exited", true}, {"settled_t", 4}},
                     Trial(9, "end")});
  EXPECT_EQ(h.audit.straggler_wait_ns, 45'000'000'000LL);
  EXPECT_EQ(h.audit.stragglers_exited, true);
  EXPECT_EQ(h.audit.settled_t, 4);
  std::vector<std::string> errors;
  Build({Json{{"t", 5}, {"type", "audit"}, {"straggler_wait_ms", -1}, {"stragglers_exited", "yes"}}}, &errors);
  EXPECT_TRUE(AnyContains(errors, "audit straggler_wait_ms must be a non-negative integer"));
  EXPECT_TRUE(AnyContains(errors, "audit stragglers_exited must be true or false"));
}

TEST(BuildHistory, ARandomSoupOfEventsNeverThrowsThroughBuilderAndCheckers) {
  std::mt19937_64 rng(20240601);
  auto pick = [&](std::initializer_list<Json> options) {
    std::vector<Json> v(options);
    return v[std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(rng)];
  };
  auto small = [&]() { return Json(std::uniform_int_distribution<int>(-1, 3)(rng)); };
  std::vector<Json> events;
  for (int i = 0; i < 3000; ++i) {
    Json e = Json::object();
    e["t"] = pick({Json(std::uniform_int_distribution<std::int64_t>(0, 1000)(rng)), Json(-5),
                   Json("x"), Json(1.5)});
    e["type"] =
        pick({"invoke", "ok", "fail", "point", "fds", "fault", "exit", "audit", "trial", "zzz"});
    e["job"] = pick({small(), small(), Json("j"), Json()});
    e["rank"] = pick({small(), small(), Json(nullptr)});
    e["pid"] = pick({small(), small(), Json(1e300)});
    e["id"] = pick({small(), small(), Json::array()});
    e["op"] = pick({"acquire", "release", "barrier", "barrier_attach", "barrier_detach", "clean",
                    "segment", 7});
    e["args"] = pick({Json{{"round", small()}}, Json("r"), Json::array({1})});
    e["value"] = pick(
        {Json{{"prefix", small()}}, Json{{"round", small()}},
         Json{{"removed", {"/shm.000001_barrier", "/shm.registry"}}, {"kept", {"/shm.000002_x"}}},
         Json{{"prefix", "zero"}}, Json(3)});
    e["error"] = pick({Json{{"code", "broken"}, {"message", "m"}}, Json("e"), Json(4)});
    e["kind"] = pick({"sigkill", "sigstop", "crash-point", 1});
    e["phase"] = pick({"start", "end", "instant", "timeout", 2});
    e["signal"] = pick({Json(9), Json(11), Json(0), Json("KILL")});
    e["exit_code"] = pick({Json(0), Json(1), Json(70), Json(nullptr)});
    e["count"] = pick({Json(3), Json(99), Json(-1)});
    e["name"] = pick({"crash/x", 5});
    e["orphans"] = pick({Json::array({1, 2}), Json("none")});
    e["leftover_shm"] = pick({Json::array({"/shm.000001_barrier"}), Json(1)});
    e["detail"] = pick({Json{{"foreign", true}, {"name", "/shm.000001_barrier"}}, Json("d")});
    events.push_back(std::move(e));
  }
  TrialMeta meta;
  meta.jobs.resize(2);
  meta.jobs[0].dirs = {"/d"};
  meta.jobs[0].has_remote = {true};
  meta.jobs[1].dirs = {"/d"};
  meta.acquire_deadline_ns = 10;
  meta.barrier_deadline_ns = 10;
  meta.cleanup_step = true;
  std::vector<std::string> errors;
  History h;
  ASSERT_NO_THROW(h = build_history(events, meta, &errors));
  EXPECT_FALSE(errors.empty());
  std::vector<CheckResult> results;
  ASSERT_NO_THROW(results = run_checkers(h));
  for (const auto& r : results) {
    if (r.invariant.starts_with("test.")) continue;
    for (const auto& p : r.problems)
      EXPECT_EQ(p.find("checker failed"), std::string::npos) << r.invariant << ": " << p;
  }
}

}  // namespace
}  // namespace harness
