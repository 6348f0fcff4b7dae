// Injector parameters from hostile scenario files: a wrong TOML type, a number
// that would wrap, a failpoint that does not exist, a size that means "no
// limit" - each is a scenario error naming the file and the key's line (exit 2
// in the CLI), never an abort or a fault that silently does nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <tuple>

#include "injector.h"
#include "run.h"
#include "scenario.h"
#include "shmcoord/failpoint.h"
#include "supervisor_internal.h"

namespace harness {
namespace {

namespace fs = std::filesystem;

constexpr const char* kJobs = R"(
[[job]]
count = 2
ranks = 2
dirs = ["/data/{job}"]
[job.workload]
rounds = 2
)";

// Writes a scenario whose single [[fault]] has `fault` as its body (line 9
// onwards) and validates it as the CLI does.
class FaultParams : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("shmstress-injector-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // "" if valid, else the error.
  std::string validate(const std::string& fault, const char* jobs = kJobs) {
    const std::string file = (dir_ / "s.toml").string();
    std::ofstream(file) << "description = \"x\"\n" << jobs << "\n[[fault]]\n" << fault << "\n";
    std::vector<Scenario> out;
    std::string err;
    if (load_and_validate({file}, &out, &err)) return "";
    return err.substr(err.find(".toml") + 5);  // ":line: message"
  }

  // Plans trial `trial` of a valid fault.
  TrialPlan plan(const std::string& fault, int trial = 0, const char* jobs = kJobs) {
    const std::string file = (dir_ / "p.toml").string();
    std::ofstream(file) << "description = \"x\"\n" << jobs << "\n[[fault]]\n" << fault << "\n";
    std::vector<Scenario> out;
    std::string err;
    EXPECT_TRUE(load_and_validate({file}, &out, &err)) << err;
    TrialPlan p = base_plan(out.at(0), 1, trial);
    Rng rng(p.seed);
    // As run() plans them: `sometimes` after every other fault.
    for (const bool last : {false, true}) {
      for (const auto& f : out[0].faults) {
        if ((f.kind == "sometimes") == last) {
          EXPECT_EQ(find_injector(f.kind)->plan(f, out[0], rng, p), std::nullopt);
        }
      }
    }
    return p;
  }

  fs::path dir_;
};

// The [[fault]] header is on line 10; its first parameter on line 11.
// A trigger that names nothing a worker logs would never fire: refused at load.
TEST_F(FaultParams, SignalOnEventAfterMustNameAnEventAndAnOpOrPointThatExist) {
  EXPECT_EQ(validate("kind = \"signal-on-event\"\nafter = \"ok:acquier\""),
            ":12: 'after' = \"ok:acquier\": 'acquier' is no operation of the worker protocol (acquire, release, "
            "barrier, barrier_attach, barrier_detach, clean, segment, witness, iterate; a pool subject's pool, mapped, "
            "folder, file, chmod, track, remove)");
  EXPECT_EQ(validate("kind = \"signal-on-event\"\nafter = \"okay:acquire\""),
            ":12: 'after' = \"okay:acquire\": 'okay' is no event a worker logs (invoke, ok, fail or point)");
  EXPECT_EQ(validate("kind = \"signal-on-event\"\nafter = \"point:crash/no/such/point\""),
            ":12: 'after': \"crash/no/such/point\" is not a shmcoord failpoint (docs/failpoints.md)");
  EXPECT_EQ(validate("kind = \"signal-on-event\"\nafter = \"invoke:barrier\""), "");
}

// Times past a trial's longest (10 min) would wrap int64 nanoseconds.
TEST_F(FaultParams, ATimeBeyondTenMinutesIsRefusedNotWrapped) {
  EXPECT_EQ(validate("kind = \"sigkill\"\nat = \"999999999m\""),
            ":12: 'at': \"999999999m\" is out of range (0..10m: no trial lasts longer)");
  EXPECT_EQ(validate("kind = \"sigkill\"\nat = \"10m\""), "");
}

// Faults are planned together, as every trial plans them: one that cannot
// share a rank, a job or a seeded file with an earlier one is refused, never
// silently dropped.
TEST_F(FaultParams, FaultsThatCannotShareATrialAreRefusedNamingTheSecond) {
  EXPECT_EQ(validate("kind = \"init-lock\"\n[[fault]]\nkind = \"init-lock\""),
            ":12: seeds the segment init.lock, which the fault at line 10 seeds too: one file, one seed (a second "
            "holder of a held lock would wait for the first forever)");
  EXPECT_EQ(validate("kind = \"stale-lock\"\nprefixes = [1, 1]\nholder = \"stopped\"")
                .rfind(":10: seeds the lock file 000001_barrier_filelock, which it seeds twice", 0),
            0u);
  EXPECT_EQ(validate("kind = \"containers\"\njobs = [0]\n[[fault]]\nkind = \"containers\"\njobs = [0]")
                .rfind(":13: 'jobs': job 0 is listed twice", 0),
            0u);
  EXPECT_EQ(validate("kind = \"replacement\"\njob = 0\nrank = 1\n[[fault]]\nkind = \"pause-at-point\"\n"
                     "point = \"crash/barrier/wait/before-sleep\"\njob = 0\nrank = 1")
                .rfind(":14: one stop-at-point fault per rank", 0),
            0u);
  EXPECT_EQ(validate("kind = \"pause-at-point\"\npoint = \"crash/barrier/wait/before-sleep\"\njob = 0\nrank = 0\n"
                     "[[fault]]\nkind = \"pause-at-point\"\npoint = \"crash/barrier/wait/before-sleep\"\njob = 1"),
            "");
  // A trial plans one `sometimes`: the second, valid on its own, is refused.
  EXPECT_EQ(validate("kind = \"sometimes\"\n[[fault]]\nkind = \"sigkill\"\n[[fault]]\nkind = \"sometimes\"\nprobability = 1.0"),
            ":14: a second fault of kind sometimes (the first is at line 10): a trial takes one; give its parameters "
            "to that one");
}

// The costly conflict check runs over every file at once, on two threads,
// after the cheap checks: the error named is still the one the files, read in
// order, meet first, and the scenarios before that file are the ones loaded.
TEST_F(FaultParams, AcrossFilesTheErrorNamedIsTheFirstInFileOrder) {
  const std::string conflict =
      "description = \"x\"\n" + std::string(kJobs) +
      "\n[[fault]]\nkind = \"init-lock\"\n[[fault]]\nkind = \"init-lock\"\n";
  auto write = [&](const char* name, const std::string& text) {
    const std::string f = (dir_ / name).string();
    std::ofstream(f) << text;
    return f;
  };
  const std::string ok = write("ok.toml", "description = \"x\"\n" + std::string(kJobs));
  const std::string clash = write("clash.toml", conflict);
  const std::string bogus = write("bogus.toml", "bogus = 1\n");
  // Same name as ok.toml (a check that comes after the conflict check in a file).
  const std::string twin = write("twin.toml", "name = \"ok\"\n" + conflict);
  auto validate_all = [&](const std::vector<std::string>& files, std::vector<Scenario>* out) {
    std::string err;
    EXPECT_FALSE(load_and_validate(files, out, &err));
    for (std::size_t at; (at = err.find(dir_.string() + "/")) != std::string::npos;) {
      err.erase(at, dir_.string().size() + 1);
    }
    return err;
  };
  std::vector<Scenario> out;
  EXPECT_EQ(
      validate_all({ok, clash, bogus}, &out).rfind("clash.toml:12: seeds the segment init.lock", 0),
      0u);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].name, "ok");
  out.clear();
  EXPECT_EQ(validate_all({ok, bogus, clash}, &out).rfind("bogus.toml:1: unknown key 'bogus'", 0),
            0u);
  EXPECT_EQ(out.size(), 1u);
  out.clear();
  EXPECT_EQ(validate_all({ok, twin}, &out).rfind("twin.toml:13: seeds the segment init.lock", 0),
            0u);
  EXPECT_EQ(out.size(), 1u);
  out.clear();
  // Two conflicts, judged by either thread: the first file's is named.
  const std::string clash2 = write("clash2.toml", conflict);
  EXPECT_EQ(validate_all({clash, clash2}, &out).rfind("clash.toml:12:", 0), 0u);
  EXPECT_EQ(out.size(), 0u);
  EXPECT_EQ(validate_all({clash, ok, clash2}, &out).rfind("clash.toml:12:", 0), 0u);
  EXPECT_EQ(out.size(), 0u);
  EXPECT_EQ(validate_all({ok, clash2, clash}, &out).rfind("clash2.toml:12:", 0), 0u);
  EXPECT_EQ(out.size(), 1u);
  out.clear();
  EXPECT_EQ(
      validate_all({ok, write("twin2.toml",
                              "name = \"ok\"\n" + std::string("description = \"x\"\n") + kJobs)},
                   &out)
          .rfind("twin2.toml: scenario name 'ok' is also ok.toml's", 0),
      0u);
  out.clear();
  // Many files, one conflict near the end: found whichever thread judges it.
  std::vector<std::string> many;
  for (int i = 0; i < 9; ++i) {
    many.push_back(write(("m" + std::to_string(i) + ".toml").c_str(),
                         "description = \"x\"\n" + std::string(kJobs)));
  }
  many.push_back(clash);
  many.push_back(bogus);
  EXPECT_EQ(validate_all(many, &out).rfind("clash.toml:12:", 0), 0u);
  EXPECT_EQ(out.size(), 9u);
}

TEST_F(FaultParams, WrongTypesAreErrorsAtTheirLine) {
  EXPECT_EQ(validate("kind = \"emfile\"\nlimit = \"6\""), ":12: 'limit' must be an integer in [3, 4096], not a string");
  EXPECT_EQ(validate("kind = \"fiu-errno\"\npoint = \"mutex/lock\"\nprobability = \"half\""),
            ":13: 'probability' must be a number in (0.0, 1.0], not a string");
  EXPECT_NE(validate("kind = \"fiu-errno\"\npoint = \"mutex/lock\"\nerrno = true").find(":13: 'errno' must be an errno name"),
            std::string::npos);
  EXPECT_EQ(validate("kind = \"misconfig\"\nwhat = 5"),
            ":12: 'what' must be one of process-count, late-joiner, lock-dir, lock-dir-shm, barrier-name, not an integer");
  EXPECT_EQ(validate("kind = \"signal-on-event\"\nafter = 3"), ":12: 'after' must be a non-empty string, not an integer");
  EXPECT_EQ(validate("kind = \"sigkill\"\ncount = \"2\""), ":12: 'count' must be an integer in [1, 256], not a string");
  EXPECT_EQ(validate("kind = \"stale-segment\"\ncontent = 1"),
            ":12: 'content' must be one of valid, zero-length, truncated, garbage, not an integer");
  EXPECT_EQ(validate("kind = \"stale-segment\"\nuid = \"nobody\""),
            ":12: 'uid' must be an integer in [0, 2147483647], not a string");
  EXPECT_EQ(validate("kind = \"unprivileged\"\nuid = \"nobody\""),
            ":12: 'uid' must be an integer in [1, 2147483647], not a string");
  EXPECT_EQ(validate("kind = \"sigkill\"\ntree = \"yes\""), ":12: 'tree' must be true or false, not a string");
}

TEST_F(FaultParams, NumbersThatWouldWrapAreOutOfRange) {
  EXPECT_EQ(validate("kind = \"crash-point\"\nenumerate = 4294967297"),
            ":12: 'enumerate' = 4294967297 is out of range [1, 100000]");
  EXPECT_NE(validate("kind = \"fiu-errno\"\npoint = \"mutex/lock\"\nerrno = 99999999999").find(":13: 'errno'"),
            std::string::npos);
  EXPECT_NE(validate("kind = \"fiu-errno\"\npoint = \"mutex/lock\"\nerrno = \"99999999999\"").find(":13: 'errno'"),
            std::string::npos);
  EXPECT_EQ(validate("kind = \"unprivileged\"\nuid = 4294967297"), ":12: 'uid' = 4294967297 is out of range [1, 2147483647]");
  EXPECT_EQ(validate("kind = \"sigkill\"\njob = 4294967296"), ":12: 'job' = 4294967296 is out of range [0, 1]");
}

TEST_F(FaultParams, FailpointsMustExist) {
  EXPECT_EQ(validate("kind = \"crash-point\"\npoint = \"crash/registry/after-clam\""),
            ":12: 'point': \"crash/registry/after-clam\" is not a shmcoord failpoint (docs/failpoints.md)");
  EXPECT_NE(validate("kind = \"fiu-errno\"\npoint = [\"shm/registry/open\", \"shm/registry/opne\"]").find(":12: 'point'"),
            std::string::npos);
  EXPECT_NE(validate("kind = \"pause-at-point\"\npoint = \"nowhere\"").find(":12: 'point'"), std::string::npos);
  EXPECT_EQ(validate("kind = \"crash-point\"\npoint = \"crash/registry/claim-half-written\""), "");
}

TEST_F(FaultParams, SizesAndNamesThatWouldDoNothingOrEscape) {
  EXPECT_NE(validate("kind = \"enospc\"\nsize = \"0\"").find(":12: 'size' must be a tmpfs size"), std::string::npos);
  EXPECT_NE(validate("kind = \"enospc\"\nsize = \"0k\"").find(":12: 'size'"), std::string::npos);
  EXPECT_EQ(validate("kind = \"enospc\"\nsize = \"512k\""), "");
  EXPECT_EQ(validate("kind = \"stale-segment\"\nkinds = [\"locals\", \"../etc\"]"),
            ":12: 'kinds': \"../etc\" is not a segment kind (1-64 of [A-Za-z0-9._-])");
  EXPECT_NE(validate("kind = \"stale-lock\"\nsuffix = \"a/b\"").find(":12: 'suffix'"), std::string::npos);
  EXPECT_EQ(validate("kind = \"stale-lock\"\nholder = \"dead\"\nprefixes = [1]\nsuffix = \"x_filelock\""), "");
}

TEST_F(FaultParams, WholeJobKillTargetsEveryRankAtOneInstant) {
  TrialPlan p = plan("kind = \"sigkill\"\njob = 1\ncount = 2\ntree = true\ntogether = true\nat = \"10-90ms\"");
  ASSERT_EQ(p.actions.size(), 2u);
  EXPECT_TRUE(p.actions[0].tree && p.actions[1].tree);
  EXPECT_EQ(p.actions[0].at_ns, p.actions[1].at_ns);
  EXPECT_NE(p.actions[0].rank, p.actions[1].rank);
}

// Ctrl-C reaches the job's whole foreground group at once. Without a launcher
// each rank leads its own group, so every rank's group is signalled at one
// instant; the other job is not touched.
TEST_F(FaultParams, InterruptSignalsEveryRankGroupOfTheJobAtOneInstant) {
  TrialPlan p = plan("kind = \"interrupt\"\njob = 1\nat = \"10-90ms\"");
  ASSERT_EQ(p.actions.size(), 2u);
  std::set<int> ranks;
  for (const Action& a : p.actions) {
    EXPECT_EQ(a.fault, "interrupt");
    EXPECT_EQ(a.signal, SIGINT);
    EXPECT_EQ(a.job, 1);
    EXPECT_TRUE(a.tree);
    EXPECT_FALSE(a.launcher);
    EXPECT_EQ(a.worker, -1);
    EXPECT_EQ(a.at_ns, p.actions[0].at_ns);
    EXPECT_GE(a.at_ns, 10'000'000);
    EXPECT_LE(a.at_ns, 90'000'000);
    ranks.insert(a.rank);
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1}));
  // job defaults to 0.
  EXPECT_EQ(plan("kind = \"interrupt\"").actions.at(0).job, 0);
}

// With a launcher the job's foreground group is the launcher's: its ranks,
// their loader workers and trackers stay in it. One signal to that group.
TEST_F(FaultParams, InterruptOfALaunchedJobSignalsTheLaunchersGroupOnce) {
  constexpr const char* kLaunched = R"(
[[job]]
ranks = 2
dirs = ["/data/a"]
[job.workload]
rounds = 2
[job.launcher]
kind = "torchrun"
)";
  TrialPlan p = plan("kind = \"interrupt\"\nat = \"300ms\"", 0, kLaunched);
  ASSERT_EQ(p.actions.size(), 1u);
  const Action& a = p.actions[0];
  EXPECT_TRUE(a.launcher);
  EXPECT_TRUE(a.tree);
  EXPECT_EQ(a.signal, SIGINT);
  EXPECT_EQ(a.job, 0);
  EXPECT_EQ(a.rank, -1);
  EXPECT_EQ(a.at_ns, 300'000'000);
  EXPECT_EQ(a.detail.value("group", ""), "launcher");
}

// It aims at a whole job: a rank, a loader worker or a target are refused,
// as are a job that does not exist and a time that is none.
TEST_F(FaultParams, InterruptTakesAJobAndATimeOnly) {
  EXPECT_EQ(validate("kind = \"interrupt\"\nrank = 1"),
            ":12: unknown key 'rank' in [[fault]] of kind 'interrupt' (known: job, at)");
  EXPECT_EQ(validate("kind = \"interrupt\"\nworker = 0"),
            ":12: unknown key 'worker' in [[fault]] of kind 'interrupt' (known: job, at)");
  EXPECT_EQ(validate("kind = \"interrupt\"\njob = 2"), ":12: 'job' = 2 is out of range [0, 1]");
  EXPECT_EQ(validate("kind = \"interrupt\"\njob = \"0\""), ":12: 'job' must be an integer in [0, 1], not a string");
  EXPECT_NE(validate("kind = \"interrupt\"\nat = \"soon\"").find(":12: 'at'"), std::string::npos);
  EXPECT_EQ(validate("kind = \"interrupt\"\njob = 1\nat = \"1-2s\""), "");
}

TEST_F(FaultParams, SignalOnEventKillsTheWholeTreeOnlyWhenAskedAndOnlyForKill) {
  TrialPlan p = plan("kind = \"signal-on-event\"\nafter = \"ok:barrier\"\njob = 0\nrank = 1\ntree = true");
  ASSERT_EQ(p.actions.size(), 1u);
  EXPECT_TRUE(p.actions[0].tree);
  EXPECT_EQ(p.actions[0].signal, SIGKILL);
  EXPECT_EQ(p.actions[0].detail.value("tree", false), true);
  EXPECT_FALSE(plan("kind = \"signal-on-event\"\nafter = \"ok:barrier\"").actions.at(0).tree);
  EXPECT_EQ(validate("kind = \"signal-on-event\"\nafter = \"ok:barrier\"\nsignal = \"stop\"\ntree = true"),
            ":14: 'tree' applies to signal = \"kill\" only");
}

// F6: "kill whichever rank created the barrier" is one fault per rank, each firing only on an
// event whose value says created = true; a value that is no table of scalars is refused at its line.
TEST_F(FaultParams, SignalOnEventValueFiltersTheTriggerAndIsRefusedWhenNotATableOfScalars) {
  TrialPlan p = plan("kind = \"signal-on-event\"\nafter = \"ok:barrier_attach\"\nrank = 1\nvalue = { created = true }");
  ASSERT_EQ(p.actions.size(), 1u);
  EXPECT_EQ(p.actions[0].on_value, nlohmann::json({{"created", true}}));
  EXPECT_EQ(p.actions[0].rank, 1);
  EXPECT_TRUE(plan("kind = \"signal-on-event\"\nafter = \"ok:barrier\"").actions.at(0).on_value.is_null());
  const std::string why =
      "'value' must be a non-empty table of booleans, integers or strings (the trigger event's value fields to "
      "match), e.g. { created = true }";
  EXPECT_EQ(validate("kind = \"signal-on-event\"\nafter = \"ok:barrier\"\nvalue = true"), ":13: " + why);
  EXPECT_EQ(validate("kind = \"signal-on-event\"\nafter = \"ok:barrier\"\nvalue = {}"), ":13: " + why);
  EXPECT_EQ(validate("kind = \"signal-on-event\"\nafter = \"ok:barrier\"\nvalue = { x = [1] }"), ":13: " + why);
}

TEST(TriggerValue, MatchesOnlyAnEventWhoseValueHoldsEveryKey) {
  using nlohmann::json;
  const json want = {{"created", true}};
  EXPECT_TRUE(supervision::value_matches(json{{"value", {{"created", true}, {"ino", 3}}}}, want));
  EXPECT_FALSE(supervision::value_matches(json{{"value", {{"created", false}}}}, want));
  EXPECT_FALSE(supervision::value_matches(json{{"value", {{"ino", 3}}}}, want));
  EXPECT_FALSE(supervision::value_matches(json{{"value", "created"}}, want));
  EXPECT_FALSE(supervision::value_matches(json{{"op", "barrier_attach"}}, want));
  EXPECT_TRUE(supervision::value_matches(json{{"op", "barrier_attach"}}, json()));
}

TEST_F(FaultParams, PauseAtPointEnumeratesEveryPointTimesEveryCount) {
  std::set<std::string> seen;
  for (int trial = 0; trial < 6; ++trial) {
    TrialPlan p = plan(
        "kind = \"pause-at-point\"\njob = 0\nrank = 1\nenumerate = 3\n"
        "point = [\"crash/registry/after-claim\", \"crash/barrier/wait/before-sleep\"]",
        trial);
    for (const auto& w : p.workers) {
      if (w.job == 0 && w.rank == 1) {
        ASSERT_TRUE(w.on_stop.has_value());
        seen.insert(w.env.at("SHMCOORD_PAUSE_AT"));
      } else {
        EXPECT_FALSE(w.env.contains("SHMCOORD_PAUSE_AT"));
      }
    }
  }
  EXPECT_EQ(seen, (std::set<std::string>{"crash/registry/after-claim:1", "crash/registry/after-claim:2",
                                         "crash/registry/after-claim:3", "crash/barrier/wait/before-sleep:1",
                                         "crash/barrier/wait/before-sleep:2", "crash/barrier/wait/before-sleep:3"}));
}

TEST_F(FaultParams, PauseAtPointFirstArmsEveryRankForOneFault) {
  TrialPlan p = plan("kind = \"pause-at-point\"\npoint = \"crash/registry/after-claim\"\ntarget = \"first\"");
  ASSERT_EQ(p.workers.size(), 4u);
  for (const auto& w : p.workers) {
    ASSERT_TRUE(w.on_stop.has_value());
    EXPECT_TRUE(w.on_stop->first_of_trial);
    EXPECT_EQ(w.env.at("SHMCOORD_PAUSE_AT"), "crash/registry/after-claim:1");
  }
  EXPECT_NE(validate("kind = \"pause-at-point\"\npoint = \"crash/registry/after-claim\"\ntarget = \"first\"\njob = 0"),
            "");
}

TEST_F(FaultParams, PauseAtPointEachStopsEveryRankOfItsJobAsAFaultOfItsOwn) {
  TrialPlan p = plan(
      "kind = \"pause-at-point\"\npoint = \"crash/barrier/woken\"\ntarget = \"each\"\njob = 1\nnth "
      "= 2\n"
      "hold = \"2-20ms\"");
  int armed = 0;
  for (const auto& w : p.workers) {
    if (w.job != 1) {
      EXPECT_FALSE(w.on_stop.has_value());
      continue;
    }
    ++armed;
    ASSERT_TRUE(w.on_stop.has_value());
    EXPECT_FALSE(w.on_stop->first_of_trial);
    EXPECT_EQ(w.on_stop->stops, 1);
    EXPECT_EQ(w.env.at("SHMCOORD_PAUSE_AT"), "crash/barrier/woken:2");
    EXPECT_GE(w.on_stop->hold_ns, 2'000'000);
    EXPECT_LE(w.on_stop->hold_ns, 20'000'000);
    EXPECT_EQ(w.on_stop->detail.value("hold_ms", -1), w.on_stop->hold_ns / 1'000'000);
  }
  EXPECT_EQ(armed, 2);
  EXPECT_EQ(validate("kind = \"pause-at-point\"\npoint = \"crash/barrier/woken\"\ntarget = "
                     "\"each\"\nrank = 0"),
            ":13: 'target' = \"each\" stops every rank: give no 'rank'");
}

TEST_F(FaultParams, PauseAtPointWithAListOfPassesStopsTheRankAtEachOfThem) {
  TrialPlan p = plan(
      "kind = \"pause-at-point\"\npoint = \"crash/barrier/woken\"\njob = 0\nrank = 1\nnth = [9, 3, "
      "6, 3]");
  for (const auto& w : p.workers) {
    if (w.job != 0 || w.rank != 1) {
      EXPECT_FALSE(w.on_stop.has_value());
      continue;
    }
    ASSERT_TRUE(w.on_stop.has_value());
    EXPECT_EQ(w.on_stop->stops, 3);
    EXPECT_EQ(w.env.at("SHMCOORD_PAUSE_AT"),
              "crash/barrier/woken:3,crash/barrier/woken:6,crash/barrier/woken:9");
    EXPECT_EQ(w.on_stop->detail.at("nth"), (nlohmann::json{3, 6, 9}));
  }
  EXPECT_EQ(validate("kind = \"pause-at-point\"\npoint = \"crash/barrier/woken\"\nnth = [0]"),
            ":13: 'nth' must be a non-empty list of integers in [1, 1000000] (got 0)");
  EXPECT_NE(validate("kind = \"pause-at-point\"\npoint = \"crash/barrier/woken\"\nnth = [1, "
                     "2]\nthen = \"kill\""),
            "");
  EXPECT_NE(validate("kind = \"pause-at-point\"\npoint = \"crash/barrier/woken\"\nnth = [1, "
                     "2]\ntarget = \"first\""),
            "");
  EXPECT_NE(validate("kind = \"pause-at-point\"\npoint = \"crash/barrier/woken\"\nnth = [1, "
                     "2]\nenumerate = 2"),
            "");
}

TEST_F(FaultParams, CrashPointCycleMeetsEveryPointWithEveryRank) {
  std::set<std::tuple<std::string, int, int>> seen;
  for (int trial = 0; trial < 8; ++trial) {
    TrialPlan p = plan(
        "kind = \"crash-point\"\ntarget = \"cycle\"\n"
        "point = [\"crash/registry/after-claim\", \"crash/barrier/wait/after-enter\"]",
        trial);
    for (const auto& w : p.workers) {
      if (w.env.contains("SHMSTRESS_FIU_ENABLE")) seen.insert({w.env.at("SHMSTRESS_FIU_ENABLE"), w.job, w.rank});
    }
  }
  EXPECT_EQ(seen.size(), 8u);  // 2 points x 4 ranks, each once
  EXPECT_EQ(validate("kind = \"crash-point\"\ntarget = \"cycle\"\npoint = \"crash/registry/after-claim\"\nrank = 0"),
            ":12: 'target' = \"cycle\" chooses the rank: give no 'job' or 'rank'");
}

TEST_F(FaultParams, PauseAtPointThenKillEndsTheFirstStopInADeathThere) {
  TrialPlan p = plan("kind = \"pause-at-point\"\npoint = \"crash/registry/after-claim\"\ntarget = \"first\"\n"
                     "hold = \"0ms\"\nthen = \"kill\"");
  for (const auto& w : p.workers) {
    ASSERT_TRUE(w.on_stop.has_value());
    EXPECT_EQ(w.on_stop->then, "kill");
    EXPECT_EQ(w.on_stop->detail.value("then", ""), "kill");
  }
  EXPECT_EQ(plan("kind = \"pause-at-point\"\npoint = \"crash/registry/after-claim\"\ntarget = \"first\"")
                .workers.at(0).on_stop->then,
            "continue");
  EXPECT_NE(validate("kind = \"pause-at-point\"\npoint = \"crash/registry/after-claim\"\nthen = \"replace\""), "");
}

TEST_F(FaultParams, SometimesArmsOnlyRanksNoOtherFaultStopsAndDrawsFromTheTrialSeed) {
  // Listed first, as a user may: the run still plans it after every other fault.
  const std::string fault =
      "kind = \"sometimes\"\nprobability = 1.0\nprocesses = 3\n"
      "[[fault]]\nkind = \"pause-at-point\"\npoint = \"crash/registry/after-claim\"\njob = 0\nrank = 0";
  EXPECT_EQ(validate(fault), "");
  int most = 0;
  for (int trial = 0; trial < 20; ++trial) {
    TrialPlan p = plan(fault, trial);
    int armed = 0;
    for (const auto& w : p.workers) {
      ASSERT_TRUE(w.job != 0 || w.rank != 0 || (w.on_stop && w.on_stop->fault == "pause-at-point"));
      if (!w.on_stop || w.on_stop->fault != "sometimes") continue;
      ++armed;
      EXPECT_EQ(w.on_stop->then, "continue");
      const std::string at = w.env.at("SHMCOORD_PAUSE_AT");
      const std::string point = at.substr(0, at.rfind(':'));
      EXPECT_TRUE(shmcoord::failpoint::known(point)) << at;
      EXPECT_EQ(w.on_stop->detail.value("point", ""), point);
      EXPECT_GE(w.on_stop->hold_ns, 1'000'000);
      EXPECT_LE(w.on_stop->hold_ns, 20'000'000);
    }
    EXPECT_GE(armed, 1);  // probability 1, three ranks free of other stops
    most = std::max(most, armed);
    // The same trial plans the same pauses: a replay stops where the run did.
    TrialPlan again = plan(fault, trial);
    for (std::size_t i = 0; i < p.workers.size(); ++i) EXPECT_EQ(p.workers[i].env, again.workers[i].env);
  }
  EXPECT_EQ(most, 3);
}

// What a trial pauses does not depend on the knob's share (its draw comes
// after every pause draw), and a trial packs the leases of all its workers,
// the ghosts reused-pid runs among them, or of none.
TEST_F(FaultParams, SometimesPacksEveryLeaseOfAShareOfTrialsWhateverItPauses) {
  const std::string base = "kind = \"sometimes\"\nprobability = 1.0\nfirst_fit = ";
  const std::string ghost = "kind = \"reused-pid\"\n[[fault]]\n";
  const TrialPlan with_ghost = plan(ghost + base + "1.0");
  ASSERT_EQ(with_ghost.ghosts.size(), 1u);
  EXPECT_EQ(with_ghost.ghosts[0].worker.env.at("SHMCOORD_LEASE_FIRST_FIT"), "1");
  EXPECT_FALSE(
      plan(ghost + base + "0.0").ghosts.at(0).worker.env.contains("SHMCOORD_LEASE_FIRST_FIT"));
  int packed = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const TrialPlan never = plan(base + "0.0", trial), always = plan(base + "1.0", trial),
                    some = plan("kind = \"sometimes\"\nprobability = 1.0", trial);
    ASSERT_EQ(never.workers.size(), always.workers.size());
    const bool on = some.workers.at(0).env.contains("SHMCOORD_LEASE_FIRST_FIT");
    packed += on;
    for (std::size_t i = 0; i < never.workers.size(); ++i) {
      EXPECT_FALSE(never.workers[i].env.contains("SHMCOORD_LEASE_FIRST_FIT"));
      EXPECT_EQ(always.workers[i].env.at("SHMCOORD_LEASE_FIRST_FIT"), "1");
      EXPECT_EQ(some.workers[i].env.contains("SHMCOORD_LEASE_FIRST_FIT"), on)
          << "a trial packs all or none";
      for (const TrialPlan* q : {&always, &some}) {
        EXPECT_EQ(q->workers[i].env.contains("SHMCOORD_PAUSE_AT"),
                  never.workers[i].env.contains("SHMCOORD_PAUSE_AT"));
        if (never.workers[i].env.contains("SHMCOORD_PAUSE_AT")) {
          EXPECT_EQ(q->workers[i].env.at("SHMCOORD_PAUSE_AT"),
                    never.workers[i].env.at("SHMCOORD_PAUSE_AT"));
        }
      }
    }
  }
  EXPECT_GT(packed, 5) << "the default share is a half";
  EXPECT_LT(packed, 35) << "the default share is a half";
  EXPECT_EQ(validate(base + "1.5"), ":13: 'first_fit' = 1.5 is out of range [0.0, 1.0]");
  EXPECT_EQ(validate(base + "\"yes\""),
            ":13: 'first_fit' must be a number in [0.0, 1.0], not a string");
}

TEST_F(FaultParams, RlimitFreeListGivesTrialIItsIModNthValueSoTheFirstTrialsVisitEach) {
  const std::string fault =
      "kind = \"rlimit\"\nwhen = \"acquire\"\njob = 0\nrank = 0\nfree = [1, 2, 3]";
  ASSERT_EQ(validate(fault), "");
  for (int trial = 0; trial < 7; ++trial) {
    TrialPlan p = plan(fault, trial);
    const auto w = std::find_if(p.workers.begin(), p.workers.end(),
                                [](const WorkerPlan& w) { return w.job == 0 && w.rank == 0; });
    ASSERT_NE(w, p.workers.end());
    EXPECT_EQ(nlohmann::json::parse(w->env.at("SHMSTRESS_LIMIT_AT")).at("free"), 1 + trial % 3)
        << trial;
  }
}

TEST_F(FaultParams, SometimesAimsAtTheNativeSubjectOnly) {
  const std::string file = (dir_ / "n.toml").string();
  std::ofstream(file) << "description = \"x\"\n"
                      << kJobs
                      << "\n[[fault]]\nkind = \"sometimes\"\nprobability = 1.0\nfirst_fit = 1.0\n";
  std::vector<Scenario> out;
  std::string err;
  ASSERT_TRUE(load_and_validate({file}, &out, &err)) << err;
  TrialPlan p = base_plan(out.at(0), 1, 0);
  p.subject = "streaming";
  Rng rng(p.seed);
  EXPECT_EQ(find_injector("sometimes")->plan(out[0].faults.at(0), out[0], rng, p), std::nullopt);
  for (const auto& w : p.workers) {
    EXPECT_FALSE(w.on_stop.has_value());
    EXPECT_FALSE(w.env.contains("SHMCOORD_PAUSE_AT"));
    EXPECT_FALSE(w.env.contains("SHMCOORD_LEASE_FIRST_FIT")) << "the knob is shmcoord's too";
  }
}

TEST_F(FaultParams, SometimesRefusesAProbabilityOutsideZeroToOneAndUnknownKeys) {
  EXPECT_NE(validate("kind = \"sometimes\"\nprobability = -0.1").find(":12: 'probability'"),
            std::string::npos);
  // 0: no pauses, the lease knob alone.
  EXPECT_EQ(validate("kind = \"sometimes\"\nprobability = 0.0\nfirst_fit = 1.0"), "");
  EXPECT_NE(validate("kind = \"sometimes\"\nprobability = 1.5").find(":12: 'probability'"), std::string::npos);
  EXPECT_NE(validate("kind = \"sometimes\"\npoint = \"crash/registry/after-claim\"").find("point"),
            std::string::npos);
  EXPECT_EQ(validate("kind = \"sometimes\"\nhold = \"5-10ms\"\nprocesses = 1"), "");
}

TEST_F(FaultParams, ContainersPutEachListedJobInItsOwn) {
  TrialPlan p = plan("kind = \"containers\"");
  for (const auto& w : p.workers) EXPECT_EQ(w.container, w.job);
  EXPECT_EQ(validate("kind = \"containers\"\njobs = [0, 0]"), ":12: 'jobs': job 0 is listed twice");
}

TEST_F(FaultParams, ReusedPidWithoutJobIsAGhostBeforeTheWorkers) {
  TrialPlan p = plan("kind = \"reused-pid\"");
  ASSERT_EQ(p.ghosts.size(), 1u);
  EXPECT_EQ(p.ghosts[0].worker.env.at("SHMCOORD_PAUSE_AT"), "crash/barrier/wait/before-sleep:1");
  EXPECT_EQ(p.ghosts[0].worker.on_stop->then, "reuse-pid");
  for (const auto& w : p.workers) EXPECT_FALSE(w.on_stop.has_value());
}

// pause-points.toml says its default trial count visits every (window point,
// k = 1, 2) pair twice: that holds only while its `trials` is 2 x 2 x the
// number of window points, which grows when shmcoord gains a window.
TEST(PausePointsScenario, DefaultTrialsVisitEveryWindowPointTwiceForBothK) {
  ScenarioError err;
  auto s = load_scenario(std::string(SHMSTRESS_SOURCE_DIR) + "/scenarios/pause-points.toml", &err);
  ASSERT_TRUE(s.has_value()) << err.to_string();
  EXPECT_EQ(s->default_trials, static_cast<int>(2 * 2 * window_points().size()));
}

}  // namespace
}  // namespace harness
