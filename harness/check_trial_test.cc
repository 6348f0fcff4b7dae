// check_trial_dir: what a stored history adds up to. Hostile or broken
// events never crash it (they are history errors, and the trial is at best
// unknown); an excuse keeps a verdict out of the trial's; an expectation is
// met only by the expected invariant with the subject's own evidence.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

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
  EXPECT_NE(other.expectation_note.find("broke only cleanup.no-leak, not barrier.liveness"),
            std::string::npos)
      << other.expectation_note;
}

}  // namespace
}  // namespace harness
