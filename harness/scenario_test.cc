// Tests for scenario parsing: what a valid file turns into, and that every
// mistake is reported with the file, the line of the offending key or value,
// and what was expected.
#include "scenario.h"

#include <gtest/gtest.h>

#include <map>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#ifndef SHMSTRESS_SOURCE_DIR
#error "SHMSTRESS_SOURCE_DIR must name the source tree (set in harness/CMakeLists.txt)"
#endif

namespace harness {
namespace {

using std::chrono::milliseconds;

// Parses text expected to be invalid and returns the error.
ScenarioError parse_error(const std::string& text) {
  ScenarioError err;
  auto sc = parse_scenario(text, "t.toml", &err);
  EXPECT_FALSE(sc.has_value()) << "expected an error for:\n" << text;
  return err;
}

Scenario parse_ok(const std::string& text) {
  ScenarioError err;
  auto sc = parse_scenario(text, "dir/t.toml", &err);
  EXPECT_TRUE(sc.has_value()) << err.to_string();
  return sc.value_or(Scenario{});
}

constexpr const char* kMinimal = "[[job]]\nranks = 2\n";

TEST(ScenarioParse, FullExampleParsesToExpectedStruct) {
  const std::string text = R"(name = "two-jobs-race"
description = "two jobs race"
expect_violation = ["prefix.unique", "prefix.agreement"]
expect_evidence = ["error:acquire:file-exists"]
expect_reached = ["killed-holding-prefix"]
trials = 20
timeout = "20s"
final_cleanup = false
[deadlines]
acquire = "5s"
barrier = "1.5s"
liveness = "250ms"
[excuse]
"cleanup.no-leak" = "no cleanup step here"
[[job]]
count = 2
ranks = 3
dirs = ["/data/{job}", "/cache/{job}"]
remote = true
start_jitter = "0-20ms"
local_world_size = "set"
[job.workload]
acquire = true
rounds = 3
round_jitter = "0-2ms"
hold = "5ms"
release = false
segments = ["shard_states", "epoch_data"]
clean_before = true
clean_after = true
[[job]]
ranks = 1
local_world_size = 7
[[fault]]
kind = "sigkill"
at = "10-200ms"
job = 1
)";
  const Scenario sc = parse_ok(text);
  EXPECT_EQ(sc.file, "dir/t.toml");
  EXPECT_EQ(sc.name, "two-jobs-race");
  EXPECT_EQ(sc.description, "two jobs race");
  EXPECT_EQ(sc.expect_violation,
            (std::vector<std::string>{"prefix.unique", "prefix.agreement"}));
  EXPECT_EQ(sc.expect_evidence, (std::vector<std::string>{"error:acquire:file-exists"}));
  EXPECT_EQ(sc.expect_reached, (std::vector<std::string>{"killed-holding-prefix"}));
  EXPECT_EQ(sc.excuses,
            (std::map<std::string, std::string>{{"cleanup.no-leak", "no cleanup step here"}}));
  EXPECT_EQ(sc.liveness, milliseconds(250));
  EXPECT_TRUE(sc.warnings.empty());
  EXPECT_EQ(sc.default_trials, 20);
  EXPECT_EQ(sc.trial_timeout, milliseconds(20000));
  EXPECT_FALSE(sc.final_cleanup);
  EXPECT_EQ(sc.acquire_deadline, milliseconds(5000));
  EXPECT_EQ(sc.barrier_deadline, milliseconds(1500));
  EXPECT_EQ(sc.raw_toml, text);

  ASSERT_EQ(sc.jobs.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    const JobSpec& j = sc.jobs[i];
    EXPECT_EQ(j.line, 15);
    EXPECT_EQ(j.ranks, 3);
    EXPECT_EQ(j.dirs, (std::vector<std::string>{"/data/{job}", "/cache/{job}"}));
    EXPECT_TRUE(j.remote);
    EXPECT_EQ(j.start_jitter.min, milliseconds(0));
    EXPECT_EQ(j.start_jitter.max, milliseconds(20));
    EXPECT_EQ(j.lws_mode, LwsMode::kSet);
    EXPECT_TRUE(j.workload.acquire);
    EXPECT_EQ(j.workload.rounds, 3);
    EXPECT_EQ(j.workload.round_jitter.min, milliseconds(0));
    EXPECT_EQ(j.workload.round_jitter.max, milliseconds(2));
    EXPECT_EQ(j.workload.hold.min, milliseconds(5));
    EXPECT_EQ(j.workload.hold.max, milliseconds(5));
    EXPECT_FALSE(j.workload.release);
    EXPECT_EQ(j.workload.segments, (std::vector<std::string>{"shard_states", "epoch_data"}));
    EXPECT_TRUE(j.workload.clean_before);
    EXPECT_TRUE(j.workload.clean_after);
  }
  const JobSpec& j2 = sc.jobs[2];
  EXPECT_EQ(j2.line, 31);
  EXPECT_EQ(j2.ranks, 1);
  EXPECT_TRUE(j2.dirs.empty());
  EXPECT_FALSE(j2.remote);
  EXPECT_EQ(j2.lws_mode, LwsMode::kWrong);
  EXPECT_EQ(j2.lws_wrong, 7);
  EXPECT_EQ(j2.workload.rounds, 0);  // workload defaults

  ASSERT_EQ(sc.faults.size(), 1u);
  EXPECT_EQ(sc.faults[0].kind, "sigkill");
  EXPECT_EQ(sc.faults[0].line, 34);
  EXPECT_EQ(sc.faults[0].params, (nlohmann::json{{"at", "10-200ms"}, {"job", 1}}));
}

TEST(ScenarioParse, OmittedKeysTakeDefaultsAndNameIsFileStem) {
  const Scenario sc = parse_ok(kMinimal);
  EXPECT_EQ(sc.name, "t");
  EXPECT_TRUE(sc.excuses.empty());  // every invariant counts
  EXPECT_TRUE(sc.expect_violation.empty());
  EXPECT_TRUE(sc.expect_reached.empty());
  EXPECT_EQ(sc.liveness, milliseconds(1000));
  EXPECT_EQ(sc.default_trials, 10);
  EXPECT_EQ(sc.trial_timeout, milliseconds(20000));
  EXPECT_EQ(sc.acquire_deadline, milliseconds(5000));
  EXPECT_EQ(sc.barrier_deadline, milliseconds(3000));
  EXPECT_TRUE(sc.final_cleanup);
  EXPECT_TRUE(sc.sometimes);  // the run's sometimes-on pauses are on unless a scenario says otherwise
  ASSERT_EQ(sc.jobs.size(), 1u);
  EXPECT_EQ(sc.jobs[0].line, 1);
  EXPECT_TRUE(sc.jobs[0].workload.acquire);
  EXPECT_TRUE(sc.jobs[0].workload.release);
  EXPECT_EQ(sc.jobs[0].workload.rounds, 0);
  EXPECT_EQ(sc.jobs[0].workload.datasets, 1);
  EXPECT_TRUE(sc.faults.empty());
}

TEST(ScenarioParse, UnknownTopLevelKeyReportsLineAndKnownKeys) {
  const auto err = parse_error("name = \"x\"\n\ntrails = 3\n[[job]]\n");
  EXPECT_EQ(err.line, 3);
  EXPECT_NE(err.message.find("unknown key 'trails' at top level"), std::string::npos)
      << err.message;
  EXPECT_NE(err.message.find("known: name, description, excuse, expect_reached"), std::string::npos)
      << err.message;
  EXPECT_EQ(err.to_string().rfind("t.toml:3: unknown key 'trails'", 0), 0u) << err.to_string();
}

TEST(ScenarioParse, UnknownJobKeyReportsLineAndKey) {
  const auto err = parse_error("[[job]]\nranks = 2\n[[job]]\nranks = 2\nrankz = 3\n");
  EXPECT_EQ(err.line, 5);
  EXPECT_NE(err.message.find("unknown key 'rankz' in [job] (known: count, ranks, dirs,"),
            std::string::npos)
      << err.message;
}

TEST(ScenarioParse, UnknownWorkloadKeyReportsLineAndKey) {
  const auto err =
      parse_error("[[job]]\nranks = 2\n[job.workload]\nrounds = 2\nclean_befor = true\n");
  EXPECT_EQ(err.line, 5);
  EXPECT_NE(err.message.find("unknown key 'clean_befor' in [job.workload]"), std::string::npos)
      << err.message;
  EXPECT_NE(err.message.find("clean_before"), std::string::npos) << err.message;
}

TEST(ScenarioParse, UnknownDeadlinesKeyReportsLineAndKey) {
  const auto err = parse_error("[deadlines]\nacquire = \"1s\"\nreleased = \"1s\"\n[[job]]\n");
  EXPECT_EQ(err.line, 3);
  EXPECT_NE(err.message.find("unknown key 'released' in [deadlines] (known: acquire, barrier, "
                             "liveness, release, start, cleanup, spin)"),
            std::string::npos)
      << err.message;
}

TEST(ScenarioParse, SpinBudgetIsReadDefaultsTo40msAndIsBounded) {
  EXPECT_EQ(parse_ok(kMinimal).spin, milliseconds(40));
  EXPECT_EQ(parse_ok("[deadlines]\nspin = \"150ms\"\n[[job]]\n").spin, milliseconds(150));
  const auto err = parse_error("[deadlines]\nacquire = \"1s\"\nspin = \"1ms\"\n[[job]]\n");
  EXPECT_EQ(err.line, 3);
  EXPECT_NE(err.message.find("'deadlines.spin' = \"1ms\" is out of range (10ms..5m"),
            std::string::npos)
      << err.message;
}

TEST(ScenarioParse, ReleaseBoundAndBarrierLivenessIntervalAreReadAndOffByDefault) {
  const Scenario none = parse_ok(kMinimal);
  EXPECT_EQ(none.release, milliseconds(0));
  EXPECT_EQ(none.jobs.at(0).workload.barrier_liveness, milliseconds(0));
  const Scenario sc = parse_ok(
      "[deadlines]\nliveness = \"1500ms\"\nrelease = \"500ms\"\n[[job]]\nranks = 2\n"
      "[job.workload]\nrounds = 3\nbarrier_liveness = \"1.5s\"\n");
  EXPECT_EQ(sc.release, milliseconds(500));
  EXPECT_EQ(sc.jobs.at(0).workload.barrier_liveness, milliseconds(1500));
}

TEST(ScenarioParse, ABarrierLivenessIntervalAboveTheLivenessDeadlineIsRefusedAtItsJob) {
  const auto err = parse_error(
      "[deadlines]\nliveness = \"1s\"\n[[job]]\nranks = 2\n[job.workload]\nrounds = 3\n"
      "barrier_liveness = \"2s\"\n");
  EXPECT_EQ(err.line, 3);
  EXPECT_NE(err.message.find("'barrier_liveness' = 2s exceeds deadlines.liveness = 1s"),
            std::string::npos)
      << err.message;
}

TEST(ScenarioParse, RepeatForIsReadIntoTheWorkerOpsOfAOneRankJob) {
  const Scenario sc = parse_ok("[[job]]\nranks = 1\n[job.workload]\nclean_after = true\nrepeat_for = \"1500ms\"\n");
  EXPECT_EQ(sc.jobs.at(0).workload.repeat_for, milliseconds(1500));
  EXPECT_EQ(parse_ok(kMinimal).jobs.at(0).workload.repeat_for, milliseconds(0));
}

TEST(ScenarioParse, RepeatForIsRefusedAtItsJobForWhatAPassCannotRepeatAlone) {
  auto err = parse_error("[[job]]\nranks = 2\n[job.workload]\nrepeat_for = \"1s\"\n");
  EXPECT_EQ(err.line, 1);
  EXPECT_NE(err.message.find("'repeat_for' needs a job of one rank"), std::string::npos) << err.message;
  EXPECT_NE(err.message.find("this job has ranks = 2"), std::string::npos) << err.message;
  err = parse_error("[[job]]\nranks = 1\n[job.workload]\nrounds = 2\nrepeat_for = \"1s\"\n");
  EXPECT_NE(err.message.find("this job has rounds = 2"), std::string::npos) << err.message;
  err = parse_error("timeout = \"2s\"\n[[job]]\nranks = 1\n[job.workload]\nrepeat_for = \"2s\"\n");
  EXPECT_EQ(err.line, 2);
  EXPECT_NE(err.message.find("'repeat_for' = 2s is not shorter than the trial's timeout (2s)"), std::string::npos)
      << err.message;
}

TEST(ScenarioParse, OutOfRangeRanksReportsValueLineAndBounds) {
  auto err = parse_error("[[job]]\ncount = 1\nranks = 65\n");
  EXPECT_EQ(err.line, 3);
  EXPECT_NE(err.message.find("'ranks' = 65 is out of range (1..64)"), std::string::npos)
      << err.message;
  err = parse_error("[[job]]\nranks = 0\n");
  EXPECT_EQ(err.line, 2);
  err = parse_error("[[job]]\nranks = -3\n");
  EXPECT_EQ(err.line, 2);
}

TEST(ScenarioParse, OtherOutOfRangeValuesReportTheirLine) {
  EXPECT_EQ(parse_error("trials = 0\n[[job]]\n").line, 1);
  EXPECT_EQ(parse_error("trials = 100001\n[[job]]\n").line, 1);
  EXPECT_EQ(parse_error("[[job]]\ncount = 65\n").line, 2);
  EXPECT_EQ(parse_error("[[job]]\n[job.workload]\nrounds = 10001\n").line, 3);
  const auto timeout = parse_error("\ntimeout = \"50ms\"\n[[job]]\n");
  EXPECT_EQ(timeout.line, 2);
  EXPECT_NE(timeout.message.find("'timeout' = \"50ms\" is out of range (100ms..10m)"),
            std::string::npos)
      << timeout.message;
  EXPECT_EQ(parse_error("timeout = \"11m\"\n[[job]]\n").line, 1);
  EXPECT_EQ(parse_error("[deadlines]\nbarrier = \"9ms\"\n[[job]]\n").line, 2);
  EXPECT_EQ(parse_error("[deadlines]\nacquire = \"6m\"\n[[job]]\n").line, 2);
  const auto datasets = parse_error("[[job]]\n[job.workload]\ndatasets = 9\n");
  EXPECT_EQ(datasets.line, 3);
  EXPECT_NE(datasets.message.find("'datasets' = 9 is out of range (1..8)"), std::string::npos)
      << datasets.message;
  EXPECT_EQ(parse_error("[[job]]\n[job.workload]\ndatasets = 0\n").line, 3);
  EXPECT_EQ(parse_ok("[[job]]\n[job.workload]\ndatasets = 2\n").jobs[0].workload.datasets, 2);
}

TEST(ScenarioParse, CleanBetweenIsOffByDefaultAndReadWithSeveralDatasets) {
  EXPECT_FALSE(parse_ok(kMinimal).jobs[0].workload.clean_between);
  const Workload w = parse_ok("[[job]]\n[job.workload]\ndatasets = 2\nclean_between = true\n").jobs[0].workload;
  EXPECT_TRUE(w.clean_between);
  EXPECT_EQ(w.datasets, 2);
}

TEST(ScenarioParse, CleanBetweenWithoutASecondDatasetIsRefusedAtItsLine) {
  auto err = parse_error("[[job]]\n[job.workload]\nrounds = 1\nclean_between = true\n");
  EXPECT_EQ(err.line, 4);
  EXPECT_NE(err.message.find("'clean_between' = true needs datasets >= 2"), std::string::npos) << err.message;
  EXPECT_NE(err.message.find("got datasets = 1"), std::string::npos) << err.message;
  EXPECT_EQ(err.file, "t.toml");
  // Turned off, it needs nothing.
  EXPECT_FALSE(parse_ok("[[job]]\n[job.workload]\nclean_between = false\n").jobs[0].workload.clean_between);
}

TEST(ScenarioParse, CleanBetweenWithoutAcquiringIsRefusedAtItsLine) {
  auto err = parse_error("[[job]]\n[job.workload]\ndatasets = 2\nacquire = false\n\nclean_between = true\n");
  EXPECT_EQ(err.line, 6);
  EXPECT_NE(err.message.find("'clean_between' = true with acquire = false"), std::string::npos) << err.message;
}

TEST(ScenarioParse, CleanBetweenMustBeABoolean) {
  auto err = parse_error("[[job]]\n[job.workload]\ndatasets = 2\nclean_between = \"yes\"\n");
  EXPECT_EQ(err.line, 4);
  EXPECT_NE(err.message.find("'clean_between' must be true or false, got a string"), std::string::npos) << err.message;
}

TEST(ScenarioParse, SometimesOptsAScenarioOutOfTheRunsPausesAndMustBeABoolean) {
  EXPECT_FALSE(parse_ok("sometimes = false\n[[job]]\nranks = 2\n").sometimes);
  auto err = parse_error("sometimes = \"no\"\n[[job]]\n");
  EXPECT_EQ(err.line, 1);
  EXPECT_NE(err.message.find("'sometimes' must be true or false, got a string"), std::string::npos) << err.message;
}

TEST(ScenarioParse, WrongTypesReportTheValueLine) {
  auto err = parse_error("[[job]]\nranks = \"two\"\n");
  EXPECT_EQ(err.line, 2);
  EXPECT_NE(err.message.find("'ranks' must be an integer, got a string"), std::string::npos)
      << err.message;
  EXPECT_EQ(parse_error("final_cleanup = 1\n[[job]]\n").line, 1);
  EXPECT_EQ(parse_error("[[job]]\n\nremote = \"yes\"\n").line, 3);
  EXPECT_EQ(parse_error("[[job]]\ndirs = [\"/a\",\n  3]\n").line, 3);
  EXPECT_EQ(parse_error("expect_violation = \"prefix.unique\"\n[[job]]\n").line, 1);
  EXPECT_EQ(parse_error("job = 3\n").line, 1);
  EXPECT_EQ(parse_error("[job]\nranks = 2\n").line, 1);  // a table, not an array of tables
  EXPECT_EQ(parse_error("deadlines = 5\n[[job]]\n").line, 1);
  EXPECT_EQ(parse_error("[[job]]\nworkload = 3\n").line, 2);
  EXPECT_EQ(parse_error("[[job]]\n[job.workload]\nhold = 2.5\n").line, 3);
}

TEST(ScenarioParse, BadDurationReportsItsLine) {
  const auto err = parse_error("name = \"x\"\n[deadlines]\n\nacquire = \"5 parsecs\"\n[[job]]\n");
  EXPECT_EQ(err.line, 4);
  EXPECT_NE(err.message.find("'deadlines.acquire' = \"5 parsecs\""), std::string::npos)
      << err.message;
  EXPECT_NE(err.message.find("unknown unit"), std::string::npos) << err.message;
}

TEST(ScenarioParse, DurationsAcceptUnitsFractionsAndIntegerMilliseconds) {
  struct Case {
    const char* value;
    int ms;
  };
  for (const Case& c : std::vector<Case>{{"\"250ms\"", 250},
                                         {"\"5s\"", 5000},
                                         {"\"1.5s\"", 1500},
                                         {"\"2m\"", 120000},
                                         {"\"0.25s\"", 250},
                                         {"1500", 1500}}) {
    const Scenario sc = parse_ok(std::string("timeout = ") + c.value + "\n[[job]]\n");
    EXPECT_EQ(sc.trial_timeout, milliseconds(c.ms)) << c.value;
  }
}

TEST(ScenarioParse, RangesAcceptBorrowedUnitsMixedUnitsAndSingleValues) {
  struct Case {
    const char* value;
    int lo, hi;
  };
  for (const Case& c : std::vector<Case>{{"\"0-20ms\"", 0, 20},
                                         {"\"10ms-2s\"", 10, 2000},
                                         {"\"1-1.5s\"", 1000, 1500},
                                         {"\"5ms - 7ms\"", 5, 7},
                                         {"\"3ms\"", 3, 3},
                                         {"40", 40, 40}}) {
    const Scenario sc = parse_ok(std::string("[[job]]\nstart_jitter = ") + c.value + "\n");
    EXPECT_EQ(sc.jobs[0].start_jitter.min, milliseconds(c.lo)) << c.value;
    EXPECT_EQ(sc.jobs[0].start_jitter.max, milliseconds(c.hi)) << c.value;
  }
}

TEST(ScenarioParse, MalformedDurationsAndRangesAreRejected) {
  for (const char* v : {"\"20\"", "\"ms\"", "\"1.5ms\"", "\"5-2ms\"", "\"1-2-3ms\"", "\"1.s\"",
                        "\"-5ms\"", "\"5h\"", "\"\"", "-1", "true", "\"11m\""}) {
    const auto err = parse_error(std::string("[[job]]\n\nstart_jitter = ") + v + "\n");
    EXPECT_EQ(err.line, 3) << v << ": " << err.message;
  }
  // Deadlines and timeout take one duration, not a range.
  const auto err = parse_error("[deadlines]\nbarrier = \"1-2s\"\n[[job]]\n");
  EXPECT_EQ(err.line, 2);
  EXPECT_NE(err.message.find("not a range"), std::string::npos) << err.message;
}

TEST(ScenarioParse, SyntaxErrorReportsTomlLine) {
  ScenarioError err;
  auto sc = parse_scenario("name = \"x\"\n[[job]]\nranks = = 2\n", "bad.toml", &err);
  ASSERT_FALSE(sc.has_value());
  EXPECT_EQ(err.file, "bad.toml");
  EXPECT_EQ(err.line, 3);
  EXPECT_NE(err.message.find("syntax error"), std::string::npos) << err.message;
  EXPECT_EQ(err.to_string().rfind("bad.toml:3: ", 0), 0u) << err.to_string();
}

TEST(ScenarioParse, CountExpandsJobsInOrder) {
  const Scenario sc = parse_ok(
      "[[job]]\ncount = 3\nranks = 2\ndirs = [\"/d/{job}\"]\n"
      "[[job]]\nranks = 4\n");
  ASSERT_EQ(sc.jobs.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(sc.jobs[i].ranks, 2);
    EXPECT_EQ(sc.jobs[i].dirs, std::vector<std::string>{"/d/{job}"});  // "{job}" stays literal
    EXPECT_EQ(sc.jobs[i].line, 1);
  }
  EXPECT_EQ(sc.jobs[3].ranks, 4);
  EXPECT_EQ(sc.jobs[3].line, 5);
}

TEST(ScenarioParse, JobAndRankLimitsApplyAfterExpansion) {
  auto err = parse_error("[[job]]\ncount = 60\n[[job]]\ncount = 5\n");
  EXPECT_EQ(err.line, 3);
  EXPECT_NE(err.message.find("too many jobs: 65"), std::string::npos) << err.message;
  err = parse_error("[[job]]\ncount = 4\nranks = 64\n[[job]]\nranks = 1\n");
  EXPECT_EQ(err.line, 4);
  EXPECT_NE(err.message.find("too many ranks: 257"), std::string::npos) << err.message;
  EXPECT_EQ(parse_ok("[[job]]\ncount = 4\nranks = 64\n").jobs.size(), 4u);
}

TEST(ScenarioParse, FaultParamsCarriedAsJsonWithLines) {
  const Scenario sc = parse_ok(R"([[job]]
ranks = 2
[[fault]]
kind = "crash-point"
point = "crash/registry/after-claim"
job = 0
enumerate = 40
weight = 0.5
enabled = true
ranks = [0, 1]
at = "10-200ms"
[fault.extra]
nested = "yes"
[[fault]]
kind = "sigstop"
)");
  ASSERT_EQ(sc.faults.size(), 2u);
  const FaultSpec& f = sc.faults[0];
  EXPECT_EQ(f.kind, "crash-point");
  EXPECT_EQ(f.line, 3);
  const nlohmann::json want = {{"point", "crash/registry/after-claim"},
                               {"job", 0},
                               {"enumerate", 40},
                               {"weight", 0.5},
                               {"enabled", true},
                               {"ranks", {0, 1}},
                               {"at", "10-200ms"},
                               {"extra", {{"nested", "yes"}}}};
  EXPECT_EQ(f.params, want) << f.params.dump();
  EXPECT_TRUE(f.params["job"].is_number_integer());
  EXPECT_FALSE(f.params.contains("kind"));
  EXPECT_EQ(f.param_lines.at("point"), 5);
  EXPECT_EQ(f.param_lines.at("at"), 11);
  EXPECT_EQ(sc.faults[1].kind, "sigstop");
  EXPECT_EQ(sc.faults[1].line, 14);
  EXPECT_TRUE(sc.faults[1].params.is_object());
  EXPECT_TRUE(sc.faults[1].params.empty());
}

TEST(ScenarioParse, FaultWithoutKindOrWithDateIsRejected) {
  EXPECT_EQ(parse_error("[[job]]\n[[fault]]\nat = \"1ms\"\n").line, 2);
  EXPECT_EQ(parse_error("[[job]]\n[[fault]]\nkind = 3\n").line, 3);
  EXPECT_EQ(parse_error("[[job]]\n[[fault]]\nkind = \"x\"\nwhen = 1979-05-27\n").line, 4);
}

TEST(ScenarioParse, LocalWorldSizeModes) {
  EXPECT_EQ(parse_ok("[[job]]\nranks = 3\nlocal_world_size = \"missing\"\n").jobs[0].lws_mode,
            LwsMode::kMissing);
  const Scenario wrong = parse_ok("[[job]]\nranks = 3\nlocal_world_size = 2\n");
  EXPECT_EQ(wrong.jobs[0].lws_mode, LwsMode::kWrong);
  EXPECT_EQ(wrong.jobs[0].lws_wrong, 2);
  EXPECT_EQ(parse_error("[[job]]\nranks = 3\nlocal_world_size = \"unset\"\n").line, 3);
  // A "wrong" value equal to ranks would quietly test the correct setup.
  EXPECT_EQ(parse_error("[[job]]\nranks = 3\nlocal_world_size = 3\n").line, 3);
}

TEST(ScenarioParse, NamesListsAndJobsAreValidated) {
  EXPECT_EQ(parse_error("name = \"a/b\"\n[[job]]\n").line, 1);
  EXPECT_EQ(parse_error("expect_violation = []\n[[job]]\n").line, 1);
  EXPECT_EQ(parse_error("expect_violation = [\"prefix.unique\",\n\"prefix.unique\"]\n[[job]]\n").line, 2);
  EXPECT_EQ(parse_error("[[job]]\ndirs = [\"\"]\n").line, 2);
  const auto none = parse_error("name = \"x\"\n");
  EXPECT_EQ(none.line, 0);
  EXPECT_NE(none.message.find("no [[job]]"), std::string::npos);
}

TEST(ScenarioExcuse, AnExcuseNeedsAKnownInvariantAndAReason) {
  auto unknown = parse_error("[[job]]\n[excuse]\n\"cleanup.no-leek\" = \"typo\"\n");
  EXPECT_EQ(unknown.line, 3);
  EXPECT_NE(unknown.message.find("[excuse] names unknown invariant \"cleanup.no-leek\" (known: "),
            std::string::npos)
      << unknown.message;
  auto empty = parse_error("[[job]]\n[excuse]\n\"cleanup.no-leak\" = \"  \"\n");
  EXPECT_EQ(empty.line, 3);
  EXPECT_NE(empty.message.find("[excuse] \"cleanup.no-leak\" needs a reason"), std::string::npos)
      << empty.message;
  EXPECT_EQ(parse_error("[[job]]\n[excuse]\n\"cleanup.no-leak\" = 3\n").line, 3);
  EXPECT_EQ(parse_error("excuse = [\"cleanup.no-leak\"]\n[[job]]\n").line, 1);
}

TEST(ScenarioExpect, ExpectViolationNamesKnownInvariantsOnly) {
  auto err = parse_error("expect_violation = [\"prefix.unique\",\n \"barrier.hang\"]\n[[job]]\n");
  EXPECT_EQ(err.line, 2);
  EXPECT_NE(err.message.find("'expect_violation' names unknown invariant \"barrier.hang\""),
            std::string::npos)
      << err.message;
}

TEST(ScenarioExpect, EvidenceMayNameAlternatives) {
  const Scenario sc = parse_ok(
      "expect_violation = [\"prefix.agreement\"]\nexpect_evidence = "
      "[\"error:acquire:registered-mismatch|error:acquire:not-registered-by-leader\"]\n[[job]]\n");
  EXPECT_EQ(sc.expect_evidence.size(), 1u);
  auto err = parse_error(
      "expect_violation = [\"prefix.agreement\"]\nexpect_evidence = [\"error:acquire:x|nonsense\"]\n"
      "[[job]]\n");
  EXPECT_NE(err.message.find("names \"nonsense\", which no trial can reach"), std::string::npos)
      << err.message;
}

TEST(ScenarioExpect, EvidenceWithoutAnExpectedViolationIsRefused) {
  auto err = parse_error("expect_evidence = [\"error:acquire:exists\"]\n[[job]]\n");
  EXPECT_NE(err.message.find("'expect_evidence' needs 'expect_violation'"), std::string::npos)
      << err.message;
}

TEST(ScenarioExpect, AnExcusedInvariantCannotAlsoBeExpected) {
  auto err = parse_error(
      "expect_violation = [\"cleanup.no-leak\"]\n[excuse]\n\"cleanup.no-leak\" = \"x\"\n[[job]]\n");
  EXPECT_NE(err.message.find("both excused and expected to be violated"), std::string::npos)
      << err.message;
}

TEST(ScenarioExpect, StatesNoTrialCanReachAreRefusedWithTheirLine) {
  auto err = parse_error("expect_reached = [\"killed-holding-prefix\",\n \"killed-holding-prefx\"]\n[[job]]\n");
  EXPECT_EQ(err.line, 2);
  EXPECT_NE(err.message.find("names \"killed-holding-prefx\", which no trial can reach"),
            std::string::npos)
      << err.message;
  EXPECT_EQ(parse_error("expect_reached = [\"error:acquire\"]\n[[job]]\n").line, 1);
  EXPECT_EQ(parse_error("expect_reached = [\"fault:\"]\n[[job]]\n").line, 1);
  const Scenario ok = parse_ok(
      "expect_reached = [\"fault:sigkill\", \"error:acquire:file-exists\", "
      "\"subject-unavailable\"]\n[[job]]\n");
  EXPECT_EQ(ok.expect_reached.size(), 3u);
}

TEST(ScenarioDeprecated, InvariantsIsReadAsExpectViolationWithAWarning) {
  const Scenario sc = parse_ok("\ninvariants = [\"barrier.liveness\"]\n[[job]]\n");
  EXPECT_EQ(sc.expect_violation, (std::vector<std::string>{"barrier.liveness"}));
  ASSERT_EQ(sc.warnings.size(), 1u);
  EXPECT_NE(sc.warnings[0].find("t.toml:2: 'invariants' is deprecated and read as "
                                "'expect_violation': every invariant is checked on every trial"),
            std::string::npos)
      << sc.warnings[0];
  auto both = parse_error(
      "invariants = [\"barrier.liveness\"]\nexpect_violation = [\"barrier.liveness\"]\n[[job]]\n");
  EXPECT_EQ(both.line, 1);
  EXPECT_NE(both.message.find("keep only expect_violation"), std::string::npos) << both.message;
}

TEST(ScenarioParse, TooManyDirsIsRejected) {
  std::string dirs;
  for (int i = 0; i < 17; ++i)
    dirs += (i ? ", " : "") + std::string("\"/d") + std::to_string(i) + "\"";
  const auto err = parse_error("[[job]]\n\ndirs = [" + dirs + "]\n");
  EXPECT_EQ(err.line, 3);
  EXPECT_NE(err.message.find("at most 16"), std::string::npos) << err.message;
}

TEST(ScenarioErrorText, ToStringOmitsLineZero) {
  EXPECT_EQ((ScenarioError{"a.toml", 7, "boom"}).to_string(), "a.toml:7: boom");
  EXPECT_EQ((ScenarioError{"a.toml", 0, "boom"}).to_string(), "a.toml: boom");
}

TEST(ScenarioLoad, UnreadableFileNamesTheFile) {
  ScenarioError err;
  EXPECT_FALSE(load_scenario("/nonexistent/dir/x.toml", &err).has_value());
  EXPECT_EQ(err.file, "/nonexistent/dir/x.toml");
  EXPECT_EQ(err.line, 0);
  EXPECT_EQ(err.to_string(),
            "/nonexistent/dir/x.toml: cannot read scenario file: No such file or directory");
  EXPECT_FALSE(load_scenario(SHMSTRESS_SOURCE_DIR "/scenarios", &err).has_value());
  EXPECT_EQ(err.to_string(), SHMSTRESS_SOURCE_DIR
            "/scenarios: cannot read scenario file: is a directory, not a regular file");
}

TEST(ScenarioLoad, AFifoIsRefusedInsteadOfBlockingForever) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("scenario_fifo_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / "fifo.toml").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  ScenarioError err;
  const bool loaded = load_scenario(path, &err).has_value();
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(loaded);
  EXPECT_EQ(err.to_string(), path + ": cannot read scenario file: is a FIFO, not a regular file");
}

TEST(ScenarioLoad, DevZeroIsRefusedInsteadOfFillingMemory) {
  ScenarioError err;
  EXPECT_FALSE(load_scenario("/dev/zero", &err).has_value());
  EXPECT_EQ(err.to_string(),
            "/dev/zero: cannot read scenario file: is a character device, not a regular file");
}

TEST(ScenarioParse, AFileStemThatCannotNameTheRunDirNeedsAName) {
  ScenarioError err;
  EXPECT_FALSE(parse_scenario(kMinimal, "dir/...toml", &err).has_value());
  EXPECT_EQ(err.to_string(), "dir/...toml: the file name's stem \"..\" must not be \".\" or "
                             "\"..\" (it names the run directory); set 'name'");
  EXPECT_FALSE(parse_scenario(kMinimal, "dir/a b.toml", &err).has_value());
  EXPECT_TRUE(parse_scenario(std::string("name = \"ab\"\n") + kMinimal, "dir/a b.toml", &err))
      << err.to_string();
}

TEST(ScenarioErrorText, ControlBytesAreEscapedSoTheMessageIsWholeAndHarmless) {
  ScenarioError err;
  EXPECT_FALSE(parse_scenario(std::string("name = \"a\\u0000b\\u001b[2J\"\n") + kMinimal, "t.toml",
                              &err));
  EXPECT_EQ(err.to_string(),
            "t.toml:1: 'name' = \"a\\x00b\\x1b[2J\" may only contain letters, digits, '-', '_' and "
            "'.' (it names the run directory)");
  EXPECT_EQ(printable_text("caf\xc3\xa9\ttab"), "caf\xc3\xa9\\x09tab");
}

TEST(ScenarioParse, NulBytesAndHugeStringsAreErrorsWithALine) {
  ScenarioError err;
  EXPECT_FALSE(parse_scenario(std::string("name = \"a\0b\"\n") + kMinimal, "t.toml", &err));
  EXPECT_EQ(err.line, 1) << err.to_string();
  const std::string huge = "description = \"" + std::string(1 << 20, 'x') + "\"\nname = 5\n";
  EXPECT_FALSE(parse_scenario(huge + kMinimal, "t.toml", &err));
  EXPECT_EQ(err.line, 2) << err.to_string();
}

TEST(ScenarioLoad, ReadsFileKeepsRawTextAndDefaultsNameToStem) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("scenario_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / "my-case.toml";
  const std::string text = "# comment kept\n[[job]]\nranks = 2\n";
  std::ofstream(path) << text;
  ScenarioError err;
  const auto sc = load_scenario(path.string(), &err);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(sc.has_value()) << err.to_string();
  EXPECT_EQ(sc->name, "my-case");
  EXPECT_EQ(sc->file, path.string());
  EXPECT_EQ(sc->raw_toml, text);
}

TEST(ScenarioCatalog, EveryShippedScenarioParses) {
  const std::filesystem::path dir = std::filesystem::path(SHMSTRESS_SOURCE_DIR) / "scenarios";
  // Every catalog file has its row in docs/scenarios.md's catalog table.
  std::ifstream docs_file(std::filesystem::path(SHMSTRESS_SOURCE_DIR) / "docs" / "scenarios.md");
  const std::string docs((std::istreambuf_iterator<char>(docs_file)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(docs.empty()) << "docs/scenarios.md not found";
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".toml") continue;
    ++n;
    EXPECT_NE(docs.find("`" + entry.path().filename().string() + "`"), std::string::npos)
        << entry.path() << " has no row in docs/scenarios.md's catalog";
    ScenarioError err;
    const auto sc = load_scenario(entry.path().string(), &err);
    EXPECT_TRUE(sc.has_value()) << err.to_string();
    if (sc) {
      EXPECT_FALSE(sc->description.empty()) << entry.path() << " needs a description";
      EXPECT_EQ(sc->name, entry.path().stem().string()) << entry.path();
      // The stock catalog checks every invariant against shmcoord, expects no
      // violation, and says which dangerous state it exists to reach.
      EXPECT_TRUE(sc->warnings.empty()) << entry.path() << ": " << sc->warnings.front();
      EXPECT_TRUE(sc->expect_violation.empty()) << entry.path();
      EXPECT_FALSE(sc->expect_reached.empty())
          << entry.path() << " needs expect_reached: the dangerous state it exists to reach";
      EXPECT_TRUE(sc->excuses.empty()) << entry.path() << " excuses "
                                       << sc->excuses.begin()->first;
    }
  }
  EXPECT_GT(n, 0) << "no scenarios found in " << dir;
}

}  // namespace
}  // namespace harness
