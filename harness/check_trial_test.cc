// check_trial_dir: what a stored history adds up to. Hostile or broken
// events never crash it (they are history errors, and the trial is at best
// unknown); an excuse keeps a verdict out of the trial's; an expectation is
// met only by the expected invariant with the subject's own evidence.
// Hostile histories (issue 12: `"reason":5` aborted run, check and report):
// an event of the wrong shape is a history error in verdict.json and the
// trial is unknown, never an exception.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "checker.h"
#include "run.h"
#include "scenario.h"

namespace harness {
namespace {

namespace fs = std::filesystem;

class TrialDir {
 public:
  TrialDir() : path_(fs::temp_directory_path() / ("check_trial_" + std::to_string(::getpid()))) {
    fs::create_directories(path_);
  }
  ~TrialDir() { fs::remove_all(path_); }
  std::string Write(const std::vector<std::string>& lines) {
    std::ofstream f(path_ / "history.jsonl");
    for (const auto& l : lines) f << l << "\n";
    return path_.string();
  }

 private:
  fs::path path_;
};

Scenario Parse(const std::string& text) {
  ScenarioError err;
  auto s = parse_scenario(text, "t.toml", &err);
  EXPECT_TRUE(s.has_value()) << err.to_string();
  return s.value_or(Scenario{});
}

const std::string kStart = R"({"t":0,"type":"trial","phase":"start"})";
const std::string kEnd = R"({"t":90000000,"type":"trial","phase":"end","timed_out":false})";
const std::string kAudit = R"({"t":80000000,"type":"audit","leftover_shm":["shmstress.000000_x"],"leftover_locks":[],"orphans":[]})";
const std::string kCleanAudit = R"({"t":80000000,"type":"audit","leftover_shm":[],"leftover_locks":[],"orphans":[]})";

const CheckResult* Find(const TrialResult& t, const std::string& inv) {
  for (const auto& c : t.checks) {
    if (c.invariant == inv) return &c;
  }
  return nullptr;
}

TEST(CheckTrialDir, WrongTypedEventsAreHistoryErrorsAndTheTrialIsUnknownNotACrash) {
  TrialDir d;
  std::string dir = d.Write({kStart, R"({"t":1,"type":1,"pid":5})",
                             R"({"t":2,"type":"subject","available":"yes","reason":5})",
                             R"({"t":3,"type":"trial","phase":7})",
                             R"({"t":4,"type":"harness-error","message":["x"]})", "garbage",
                             kCleanAudit, kEnd});
  TrialResult t;
  ASSERT_NO_THROW(t = check_trial_dir(Parse("[[job]]\n"), dir, 0, 1, 2));
  EXPECT_EQ(t.verdict, Verdict::kUnknown);
  EXPECT_GE(t.history_error_count, 4u);
  EXPECT_TRUE(t.harness_error);  // the harness-error event, even malformed, says the harness failed
  ASSERT_FALSE(t.history_errors.empty());
  EXPECT_NE(t.history_errors[0].find("line 6: not JSON: garbage"), std::string::npos)
      << t.history_errors[0];
  EXPECT_TRUE(fs::exists(dir + "/verdict.json"));
}

// Job 0's rank holds prefix 0 until its release at +8 ms, after job 1's
// cleanup removed one of its names at +5 to +6: invalid from +8 on.
std::vector<std::string> CleanupUnderALiveHolder() {
  return {
      kStart,
      R"({"t":1000000,"type":"invoke","op":"acquire","id":1,"pid":10,"job":0,"rank":0,"local_rank":0,"args":{}})",
      R"({"t":2000000,"type":"ok","op":"acquire","id":1,"pid":10,"job":0,"rank":0,"local_rank":0,"value":{"prefix":0}})",
      R"({"t":5000000,"type":"invoke","op":"clean","id":1,"pid":20,"job":1,"rank":0,"local_rank":0,"args":{}})",
      R"({"t":6000000,"type":"ok","op":"clean","id":1,"pid":20,"job":1,"rank":0,"local_rank":0,"value":{"removed":["/shm.000000_shard_states"],"kept":[],"skipped":[]}})",
      R"({"t":8000000,"type":"invoke","op":"release","id":2,"pid":10,"job":0,"rank":0,"local_rank":0,"args":{}})",
      R"({"t":8500000,"type":"ok","op":"release","id":2,"pid":10,"job":0,"rank":0,"local_rank":0,"value":{}})"};
}

TEST(CheckTrialDir, ATrialCutAtItsFirstViolationIsJudgedUpToTheCut) {
  TrialDir d;
  std::vector<std::string> lines = CleanupUnderALiveHolder();
  lines.push_back(R"({"t":9000000,"type":"trial","phase":"cut","invalid":["cleanup.safety"]})");
  lines.push_back(
      R"({"t":20000000,"type":"exit","pid":10,"job":0,"rank":0,"signal":9,"by_harness":true,"teardown":true})");
  lines.push_back(kAudit);  // what the teardown left: not judged
  lines.push_back(kEnd);
  const TrialResult t = check_trial_dir(Parse("[[job]]\n[[job]]\n"), d.Write(lines), 0, 1, 2);
  EXPECT_EQ(t.verdict, Verdict::kInvalid);
  ASSERT_NE(Find(t, "cleanup.safety"), nullptr);
  EXPECT_EQ(Find(t, "cleanup.safety")->verdict, Verdict::kInvalid);
  ASSERT_NE(Find(t, "cleanup.no-leak"), nullptr);
  EXPECT_EQ(Find(t, "cleanup.no-leak")->excused, kNotJudgedAtCut);
  EXPECT_EQ(t.history_error_count, 0u);
}

TEST(CheckTrialDir, TheSpinBudgetIsTheScenariosDeadlinesSpin) {
  // An acquire that ran 60 ms of the 62 ms it was open: past the default
  // 40 ms budget, within a scenario's 100 ms.
  TrialDir d;
  const std::string dir = d.Write(
      {kStart, R"({"t":1000000,"type":"start","pid":10,"job":0,"rank":0,"local_rank":0})",
       R"({"t":2000000,"type":"invoke","op":"acquire","id":1,"pid":10,"job":0,"rank":0,"local_rank":0,"args":{},"cpu_run_ns":1000000,"cpu_wait_ns":0})",
       R"({"t":64000000,"type":"ok","op":"acquire","id":1,"pid":10,"job":0,"rank":0,"local_rank":0,"value":{"prefix":0,"present":[]},"cpu_run_ns":61000000,"cpu_wait_ns":0})",
       R"({"t":70000000,"type":"exit","pid":10,"job":0,"rank":0,"exit_code":0})", kCleanAudit,
       kEnd});
  const TrialResult by_default = check_trial_dir(Parse("[[job]]\n"), dir, 0, 1, 2);
  ASSERT_NE(Find(by_default, "ops.no-spin"), nullptr);
  EXPECT_EQ(Find(by_default, "ops.no-spin")->verdict, Verdict::kInvalid);
  const TrialResult wider =
      check_trial_dir(Parse("[deadlines]\nspin = \"100ms\"\n[[job]]\n"), dir, 0, 1, 2);
  ASSERT_NE(Find(wider, "ops.no-spin"), nullptr);
  EXPECT_EQ(Find(wider, "ops.no-spin")->verdict, Verdict::kValid);
}

TEST(CheckTrialDir, ACutMarkWithNoViolationBeforeItHidesNothing) {
  // A mark at +4 ms (a subject can write one): nothing is invalid up to it,
  // so the whole record is judged, and the removal after it is found.
  TrialDir d;
  std::vector<std::string> lines = CleanupUnderALiveHolder();
  lines.insert(lines.begin() + 2,
               R"({"t":4000000,"type":"trial","phase":"cut","invalid":["cleanup.safety"]})");
  lines.push_back(R"({"t":20000000,"type":"exit","pid":10,"job":0,"rank":0,"exit_code":0})");
  lines.push_back(R"({"t":21000000,"type":"exit","pid":20,"job":1,"rank":0,"exit_code":0})");
  lines.push_back(kCleanAudit);
  lines.push_back(kEnd);
  const TrialResult t = check_trial_dir(Parse("[[job]]\n[[job]]\n"), d.Write(lines), 0, 1, 2);
  ASSERT_NE(Find(t, "cleanup.safety"), nullptr);
  EXPECT_EQ(Find(t, "cleanup.safety")->verdict, Verdict::kInvalid);
  for (const auto& c : t.checks) EXPECT_NE(c.excused, kNotJudgedAtCut) << c.invariant;
}

TEST(CheckTrialDir, AnExcusedInvariantIsKeptButDoesNotDecideTheTrial) {
  TrialDir d;
  std::string dir = d.Write({kStart, kAudit, kEnd});
  Scenario plain = Parse("[[job]]\n");
  EXPECT_EQ(check_trial_dir(plain, dir, 0, 1, 2).verdict, Verdict::kInvalid);  // the leftover
  Scenario excused = Parse("[excuse]\n\"cleanup.no-leak\" = \"the fault's own file\"\n[[job]]\n");
  TrialResult t = check_trial_dir(excused, dir, 0, 1, 2);
  EXPECT_EQ(t.verdict, Verdict::kValid);
  const CheckResult* c = Find(t, "cleanup.no-leak");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kInvalid);
  EXPECT_EQ(c->excused, "the fault's own file");
}

TEST(CheckTrialDir, AnExpectationIsMetOnlyByTheExpectedInvariantWithTheSubjectsEvidence) {
  TrialDir d;
  // An acquire that failed "file-exists" and a leftover (cleanup.no-leak invalid).
  std::string dir = d.Write(
      {kStart,
       R"({"t":1000000,"type":"invoke","op":"acquire","id":1,"job":0,"rank":0,"pid":9,"args":{}})",
       R"({"t":2000000,"type":"fail","op":"acquire","id":1,"job":0,"rank":0,"pid":9,"error":{"code":"file-exists","message":"File exists: /000000_locals"}})",
       R"({"t":3000000,"type":"exit","job":0,"rank":0,"pid":9,"exit_code":1})", kAudit, kEnd});
  TrialResult met = check_trial_dir(
      Parse("expect_violation = [\"cleanup.no-leak\"]\nexpect_evidence = "
            "[\"error:acquire:file-exists\"]\n[[job]]\n"),
      dir, 0, 1, 2);
  EXPECT_EQ(met.expectation, Expectation::kMet) << met.expectation_note;
  EXPECT_EQ(met.expected, "cleanup.no-leak with error:acquire:file-exists");
  TrialResult no_evidence = check_trial_dir(
      Parse("expect_violation = [\"cleanup.no-leak\"]\nexpect_evidence = "
            "[\"error:acquire:not-registered-by-leader\"]\n[[job]]\n"),
      dir, 0, 1, 2);
  EXPECT_EQ(no_evidence.expectation, Expectation::kNoEvidence);
  EXPECT_NE(no_evidence.expectation_note.find("without error:acquire:not-registered-by-leader"),
            std::string::npos);
  TrialResult either = check_trial_dir(
      Parse("expect_violation = [\"cleanup.no-leak\"]\nexpect_evidence = "
            "[\"error:acquire:not-registered-by-leader|error:acquire:file-exists\"]\n[[job]]\n"),
      dir, 0, 1, 2);
  EXPECT_EQ(either.expectation, Expectation::kMet) << either.expectation_note;
  TrialResult other =
      check_trial_dir(Parse("expect_violation = [\"barrier.liveness\"]\n[[job]]\n"), dir, 0, 1, 2);
  EXPECT_EQ(other.expectation, Expectation::kOther);
  EXPECT_NE(other.expectation_note.find("broke only cleanup.no-leak, ops.explained, not barrier.liveness"),
            std::string::npos)
      << other.expectation_note;
}

class CheckTrialDirHostile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() / "check-trial-XXXXXX").string();
    ASSERT_NE(::mkdtemp(dir_.data()), nullptr);
    ScenarioError e;
    auto s = parse_scenario("name = \"t\"\n[[job]]\nranks = 1\n", "t.toml", &e);
    ASSERT_TRUE(s) << e.to_string();
    scenario_ = *s;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A finished trial's history with `extra` (one JSON line) in the middle.
  TrialResult check_with(const std::string& extra) {
    std::ofstream(dir_ + "/history.jsonl") << R"({"t":1,"type":"trial","phase":"start"})" << "\n"
                                           << extra << "\n"
                                           << R"({"t":9,"type":"trial","phase":"end"})" << "\n";
    return check_trial_dir(scenario_, dir_, 0, 1, 2);
  }
  nlohmann::json verdict_json() {
    std::ifstream in(dir_ + "/verdict.json");
    return nlohmann::json::parse(in);
  }
  std::string history_errors() { return verdict_json()["history_errors"].dump(); }

  std::string dir_;
  Scenario scenario_;
};

TEST_F(CheckTrialDirHostile, WellFormedHistoryHasNoHistoryError) {
  const TrialResult t = check_with(R"({"t":2,"type":"subject","available":true})");
  EXPECT_EQ(history_errors(), "[]");
  EXPECT_FALSE(t.harness_error);
}

TEST_F(CheckTrialDirHostile, UnavailableReasonOfWrongTypeIsAHistoryError) {
  const TrialResult t = check_with(R"({"t":2,"type":"subject","available":false,"reason":5})");
  EXPECT_NE(history_errors().find("subject reason must be a string"), std::string::npos)
      << history_errors();
  EXPECT_EQ(t.verdict, Verdict::kUnknown);
  EXPECT_EQ(t.unavailable, "the subject reported itself unavailable");
}

TEST_F(CheckTrialDirHostile, AvailableOfWrongTypeIsAHistoryError) {
  const TrialResult t = check_with(R"({"t":2,"type":"subject","available":"no"})");
  EXPECT_NE(history_errors().find("subject event needs available: true or false"), std::string::npos)
      << history_errors();
  EXPECT_EQ(t.verdict, Verdict::kUnknown);
}

TEST_F(CheckTrialDirHostile, TrialPhaseOfWrongTypeIsAHistoryError) {
  const TrialResult t = check_with(R"({"t":2,"type":"trial","phase":7})");
  EXPECT_NE(history_errors().find("trial phase must be start, end, timeout or cut"),
            std::string::npos)
      << history_errors();
  EXPECT_EQ(t.verdict, Verdict::kUnknown);
}

TEST_F(CheckTrialDirHostile, HarnessErrorMessageOfWrongTypeIsAHistoryError) {
  const TrialResult t = check_with(R"({"t":2,"type":"harness-error","message":["x"]})");
  EXPECT_NE(history_errors().find("harness-error needs a string message"), std::string::npos)
      << history_errors();
  EXPECT_TRUE(t.harness_error);
  EXPECT_EQ(t.verdict, Verdict::kUnknown);
}

TEST_F(CheckTrialDirHostile, TypeOfWrongTypeIsAHistoryError) {
  const TrialResult t = check_with(R"({"t":2,"type":1,"pid":1})");
  EXPECT_NE(history_errors().find("needs an integer t and a string type"), std::string::npos)
      << history_errors();
  EXPECT_EQ(t.verdict, Verdict::kUnknown);
}

TEST_F(CheckTrialDirHostile, AMalformedTrialStartIsAHistoryErrorNotAHarnessFailure) {
  std::ofstream(dir_ + "/history.jsonl") << R"({"t":1,"type":"trial","phase":7})" << "\n"
                                         << R"({"t":9,"type":"trial","phase":"end"})" << "\n";
  const TrialResult t = check_trial_dir(scenario_, dir_, 0, 1, 2);
  EXPECT_NE(history_errors().find("the history has no well-formed trial start and end"), std::string::npos)
      << history_errors();
  EXPECT_FALSE(t.harness_error);
  EXPECT_EQ(t.verdict, Verdict::kUnknown);
}

TEST_F(CheckTrialDirHostile, AMissingTrialEndIsTheSupervisorsFailure) {
  std::ofstream(dir_ + "/history.jsonl") << R"({"t":1,"type":"trial","phase":"start"})" << "\n";
  const TrialResult t = check_trial_dir(scenario_, dir_, 0, 1, 2);
  EXPECT_TRUE(t.harness_error);
  EXPECT_EQ(t.harness_error_text, "the trial supervisor did not finish its history");
}

TEST_F(CheckTrialDirHostile, AnExitSignalOfWrongTypeIsAHistoryError) {
  const TrialResult t = check_with(R"({"t":2,"type":"exit","job":0,"rank":0,"pid":5,"signal":"KILL"})");
  EXPECT_NE(history_errors().find("'signal' must be an integer"), std::string::npos) << history_errors();
  EXPECT_EQ(t.verdict, Verdict::kUnknown);
}

// The adaptive concurrency backs off on a trial whose signals fired late: the
// lateness is each timed signal's fault event after its planned time (a stop
// window's end for its SIGCONT), matched by kind and target; an action with
// no event (its target had exited) and an earlier window do not count.
TEST(FaultLateness, IsTheWorstDelayOfATimedSignalAfterItsPlannedTime) {
  std::vector<std::string> errors;
  std::vector<Json> events;
  for (const char* line : {
           R"({"t":1000000000,"type":"trial","phase":"start"})",
           R"({"t":1001000000,"type":"fault","kind":"sigstop","job":0,"rank":0,"phase":"start","signal":19})",
           R"({"t":1003000000,"type":"fault","kind":"sigstop","job":0,"rank":0,"phase":"end","signal":18})",
           R"({"t":1010000000,"type":"fault","kind":"sigstop","job":0,"rank":0,"phase":"start","signal":19})",
           R"({"t":1054000000,"type":"fault","kind":"sigstop","job":0,"rank":0,"phase":"end","signal":18})",
           R"({"t":1020500000,"type":"fault","kind":"sigkill","job":1,"rank":0,"phase":"instant","signal":9})",
           R"({"t":1090000000,"type":"trial","phase":"end","timed_out":false})"}) {
    events.push_back(Json::parse(line));
  }
  History h = build_history(events, TrialMeta{}, &errors);
  ASSERT_TRUE(errors.empty()) << errors.front();
  auto action = [](std::int64_t at_ms, const char* fault, const char* phase, int job, int signal) {
    Action a;
    a.at_ns = at_ms * 1000000;
    a.fault = fault;
    a.phase = phase;
    a.job = job;
    a.rank = 0;
    a.signal = signal;
    return a;
  };
  // The second stop window: planned 10 ms .. 50 ms, its SIGCONT 4 ms late.
  std::vector<Action> actions = {action(10, "sigstop", "start", 0, 19), action(50, "sigstop", "end", 0, 18),
                                 action(20, "sigkill", "instant", 1, 9)};
  EXPECT_NEAR(fault_lateness_ms(h, actions), 4.0, 1e-9);
  // A kill whose target had already exited logged nothing: not late.
  actions = {action(20, "sigkill", "instant", 1, 9), action(30, "sigkill", "instant", 2, 9)};
  EXPECT_NEAR(fault_lateness_ms(h, actions), 0.5, 1e-9);
  // Actions that are not timed signals say nothing about lateness.
  Action seeded = action(0, "stale-segment", "instant", 0, 0);
  Action triggered = action(0, "sigkill", "instant", 1, 9);
  triggered.on_type = "point";
  EXPECT_EQ(fault_lateness_ms(h, {seeded, triggered}), 0);
}

}  // namespace
}  // namespace harness
