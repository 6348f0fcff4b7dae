// The stored-file decoders (stored.h): a corrupted schedule.json, verdict.json
// or summary.json is an error naming the file and where in it, never an
// exception; what the run writes decodes back.
#include "stored.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "summary.h"

namespace harness {
namespace {

const char kSchedule[] = R"({
  "actions": [], "final_cleanup": true, "run_seed": 5, "scenario": "basic",
  "scenario_file": "scenarios/basic.toml", "seed": 7194491949275060694, "trial": 3
})";

std::string ScheduleError(const std::string& text) {
  StoredError e;
  EXPECT_FALSE(parse_schedule(text, "t/schedule.json", &e)) << text;
  return e.to_string();
}

TEST(StoredSchedule, DecodesWhatTheRunWrites) {
  StoredError e;
  auto s = parse_schedule(kSchedule, "schedule.json", &e);
  ASSERT_TRUE(s) << e.to_string();
  EXPECT_EQ(s->trial, 3);
  EXPECT_EQ(s->run_seed, 5u);
  EXPECT_EQ(s->seed, 7194491949275060694u);
  EXPECT_EQ(s->scenario, "basic");
  EXPECT_EQ(s->scenario_file, "scenarios/basic.toml");
}

TEST(StoredSchedule, SeedsUseAll64Bits) {
  StoredError e;
  auto s = parse_schedule(R"({"trial":0,"run_seed":18446744073709551615,"seed":0})", "f", &e);
  ASSERT_TRUE(s) << e.to_string();
  EXPECT_EQ(s->run_seed, 18446744073709551615u);
}

TEST(StoredSchedule, ATrialThatIsAStringNamesTheFileAndKey) {
  EXPECT_EQ(ScheduleError(R"({"trial":"abc","run_seed":5,"seed":1})"),
            "t/schedule.json: /trial: must be an integer in 0..2147483647, got the string \"abc\"");
}

TEST(StoredSchedule, NegativeFractionalOrHugeNumbersAreRefused) {
  EXPECT_EQ(ScheduleError(R"({"trial":-1,"run_seed":5,"seed":1})"),
            "t/schedule.json: /trial: must be an integer in 0..2147483647, got -1");
  EXPECT_EQ(ScheduleError(R"({"trial":4294967297,"run_seed":5,"seed":1})"),
            "t/schedule.json: /trial: must be an integer in 0..2147483647, got 4294967297");
  EXPECT_EQ(ScheduleError(R"({"trial":1.5,"run_seed":5,"seed":1})"),
            "t/schedule.json: /trial: must be an integer in 0..2147483647, got 1.5");
  EXPECT_EQ(ScheduleError(R"({"trial":1,"run_seed":-5,"seed":1})"),
            "t/schedule.json: /run_seed: must be an integer in 0..18446744073709551615, got -5");
  EXPECT_EQ(ScheduleError(R"({"trial":1,"run_seed":1e300,"seed":1})"),
            "t/schedule.json: /run_seed: must be an integer in 0..18446744073709551615, got 1e+300");
}

TEST(StoredSchedule, MissingKeysAreNamed) {
  EXPECT_EQ(ScheduleError(R"({"run_seed":5,"seed":1})"), "t/schedule.json: /trial: is missing");
  EXPECT_EQ(ScheduleError(R"({"trial":0,"seed":1})"), "t/schedule.json: /run_seed: is missing");
}

TEST(StoredSchedule, AScenarioNameThatWouldLeaveTheRunDirIsRefused) {
  EXPECT_EQ(ScheduleError(R"({"trial":0,"run_seed":5,"seed":1,"scenario":"../../etc"})"),
            "t/schedule.json: /scenario: \"../../etc\" may only contain letters, digits, '-', '_' "
            "and '.' (it names the run directory)");
  EXPECT_EQ(ScheduleError(R"({"trial":0,"run_seed":5,"seed":1,"scenario":".."})"),
            "t/schedule.json: /scenario: \"..\" must not be \".\" or \"..\" (it names the run "
            "directory)");
}

TEST(StoredSchedule, NotJsonOrNotAnObjectSaysWhere) {
  EXPECT_EQ(ScheduleError("{\"trial\":\n  1,,}"),
            "t/schedule.json: not valid JSON: parse error at line 2, column 5: syntax error while "
            "parsing object key - unexpected ','; expected string literal");
  EXPECT_EQ(ScheduleError("[1]"), "t/schedule.json: must be a JSON object, got an array");
  EXPECT_EQ(ScheduleError(""),
            "t/schedule.json: not valid JSON: parse error at line 1, column 1: syntax error while "
            "parsing value - unexpected end of input; expected '[', '{', or a literal");
}

TEST(StoredSchedule, DeepNestingIsRefusedBeforeParsing) {
  const std::string deep = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_EQ(ScheduleError(deep), "t/schedule.json: line 1: nested deeper than 64 levels");
}

TEST(StoredSchedule, BracketsInsideStringsDoNotCountAsNesting) {
  StoredError e;
  const std::string text = R"({"trial":0,"run_seed":5,"seed":1,"scenario_file":")" +
                           std::string(100, '[') + R"(\"{"})";
  EXPECT_TRUE(parse_schedule(text, "f", &e)) << e.to_string();
}

TEST(StoredSchedule, AStringWithANulByteIsRefused) {
  EXPECT_EQ(ScheduleError(R"({"trial":0,"run_seed":5,"seed":1,"scenario_file":"a\u0000b"})"),
            "t/schedule.json: /scenario_file: holds a NUL byte");
}

TEST(StoredSchedule, InvalidUtf8IsAJsonError) {
  const std::string text = "{\"trial\":0,\"run_seed\":5,\"seed\":1,\"scenario_file\":\"\xff\"}";
  EXPECT_NE(ScheduleError(text).find("t/schedule.json: not valid JSON: "), std::string::npos);
}

TEST(StoredVerdict, DecodesChecks) {
  StoredError e;
  auto v = parse_verdict(
      R"({"verdict":"invalid","history_errors":[],"checks":[
           {"invariant":"prefix.unique","verdict":"invalid","problems":["x"],"reached":[]},
           {"invariant":"barrier.safety","verdict":"valid","problems":[],"reached":[]}]})",
      "verdict.json", &e);
  ASSERT_TRUE(v) << e.to_string();
  EXPECT_EQ(v->verdict, Verdict::kInvalid);
  ASSERT_EQ(v->checks.size(), 2u);
  EXPECT_EQ(v->checks[0].invariant, "prefix.unique");
  EXPECT_EQ(v->checks[0].problems, std::vector<std::string>{"x"});
  EXPECT_EQ(v->checks[0].verdict, Verdict::kInvalid);
}

TEST(StoredVerdict, AnUnknownVerdictNameOrAWrongTypeIsNamed) {
  StoredError e;
  EXPECT_FALSE(parse_verdict(R"({"checks":[{"invariant":"a","verdict":"maybe"}]})", "v", &e));
  EXPECT_EQ(e.to_string(),
            "v: /checks/0/verdict: must be \"valid\", \"unknown\" or \"invalid\", got the string "
            "\"maybe\"");
  EXPECT_FALSE(parse_verdict(R"({"checks":{"a":1}})", "v", &e));
  EXPECT_EQ(e.to_string(), "v: /checks: must be an array, got an object");
  EXPECT_FALSE(parse_verdict(R"({"checks":[{"invariant":7,"verdict":"valid"}]})", "v", &e));
  EXPECT_EQ(e.to_string(), "v: /checks/0/invariant: must be a string, got 7");
  EXPECT_FALSE(parse_verdict(R"({"checks":[{"invariant":"a","verdict":"valid","problems":["p",3]}]})", "v", &e));
  EXPECT_EQ(e.to_string(), "v: /checks/0/problems/1: must be a string, got 3");
}

TEST(StoredSummary, DecodesWhatReportsUse) {
  StoredError e;
  auto s = parse_summary(R"({"run_id":"r1","subject":"native","elapsed_s":1.5,
      "violations":[{"trial_dir":"/x/t0","reproduce":"shmstress run a.toml --seed 1 --trial 0"},
                    {"trial_dir":"","reproduce":"dropped past --max-kept"}],
      "unknown":[]})",
                         "summary.json", &e);
  ASSERT_TRUE(s) << e.to_string();
  EXPECT_EQ(s->run_id, "r1");
  EXPECT_EQ(s->elapsed_s, 1.5);
  // The one without a dir has nothing to look up.
  EXPECT_EQ(s->reproduce_by_dir(), (std::map<std::string, std::string>{
                                       {"/x/t0", "shmstress run a.toml --seed 1 --trial 0"}}));
}

TEST(StoredSummary, ARunIdThatIsANumberIsNamed) {
  StoredError e;
  EXPECT_FALSE(parse_summary(R"({"run_id":5})", "s/summary.json", &e));
  EXPECT_EQ(e.to_string(), "s/summary.json: /run_id: must be a string, got 5");
}

TEST(StoredSummary, AReproduceThatIsAnArrayIsNamed) {
  StoredError e;
  EXPECT_FALSE(parse_summary(R"({"violations":[{"trial_dir":"/t","reproduce":["a"]}]})", "s", &e));
  EXPECT_EQ(e.to_string(), "s: /violations/0/reproduce: must be a string, got an array");
}

TEST(StoredSummary, ANegativeOrNonNumericElapsedIsNamed) {
  StoredError e;
  EXPECT_FALSE(parse_summary(R"({"elapsed_s":-1})", "s", &e));
  EXPECT_EQ(e.to_string(), "s: /elapsed_s: must be a number >= 0.0, got -1");
  EXPECT_FALSE(parse_summary(R"({"elapsed_s":"1s"})", "s", &e));
  EXPECT_EQ(e.to_string(), "s: /elapsed_s: must be a number >= 0.0, got the string \"1s\"");
}

TEST(StoredSummary, ValuesInMessagesAreShortAndPrintable) {
  StoredError e;
  EXPECT_FALSE(parse_summary("{\"subject\":[1],\"run_id\":\"\\u001b[31m" + std::string(100, 'x') +
                                 "\"}",
                             "s", &e));
  EXPECT_EQ(e.to_string(), "s: /subject: must be a string, got an array");
  EXPECT_FALSE(parse_summary("{\"elapsed_s\":\"\\u001b[31m" + std::string(100, 'x') + "\"}", "s",
                             &e));
  EXPECT_EQ(e.to_string(), "s: /elapsed_s: must be a number >= 0.0, got the string \"?[31m" +
                               std::string(35, 'x') + "...\"");
}

TEST(StoredFiles, LoadingAFileThatIsNotThereSaysSo) {
  StoredError e;
  EXPECT_FALSE(load_schedule("/nonexistent/schedule.json", &e));
  EXPECT_EQ(e.to_string(), "/nonexistent/schedule.json: cannot read: No such file or directory");
  EXPECT_FALSE(load_summary("/dev/zero", &e));
  EXPECT_EQ(e.to_string(), "/dev/zero: cannot read: is a character device, not a regular file");
}

}  // namespace
}  // namespace harness
