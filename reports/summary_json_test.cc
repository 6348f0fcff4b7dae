// summary.json from the run aggregate is what it was when every trial was
// kept: checked against a reference that computes it the old way, from the
// full list of trials. Past the --max-kept cap the lists stop and `unlisted`
// counts the rest; past QuantileSketch::kExact samples the quantiles are
// within the sketch's relative error.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "reports/reports.h"

namespace reports {
namespace {

using harness::CheckResult;
using harness::RunResult;
using harness::TrialResult;
using harness::Verdict;

std::vector<TrialResult> Trials(int count, int latencies_per_trial, std::uint64_t seed) {
  static const char* kScenarios[] = {"basic", "kill-holder", "pause-subset"};
  static const char* kInvariants[] = {"prefix.unique", "barrier.safety", "cleanup.safety"};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> pick(0, 99);
  std::lognormal_distribution<double> latency(0.0, 2.0);
  std::vector<TrialResult> out;
  for (int n = 0; n < count; ++n) {
    TrialResult t;
    t.scenario = kScenarios[n % 3];
    t.trial = n;
    t.run_seed = 5;
    t.seed = rng();
    for (const char* inv : kInvariants) {
      CheckResult c;
      c.invariant = inv;
      int x = pick(rng);
      c.verdict = x < 4 ? Verdict::kInvalid : x < 8 ? Verdict::kUnknown : Verdict::kValid;
      if (c.verdict != Verdict::kValid) c.problems = {"problem in trial " + std::to_string(n)};
      t.verdict = harness::compose(t.verdict, c.verdict);
      t.checks.push_back(c);
    }
    if (pick(rng) < 2) {
      t.harness_error = true;
      t.harness_error_text = "supervisor exited abnormally";
    }
    if (pick(rng) < 2) {
      t.unavailable = "needs root";
      t.checks.clear();
      t.verdict = Verdict::kUnknown;
    }
    t.faults["sigkill"] = pick(rng) % 3;
    if (pick(rng) < 50) t.reached.insert("killed-while-holding");
    for (int i = 0; i < latencies_per_trial; ++i) {
      t.acquire_ms.push_back(latency(rng));
      t.barrier_ms.push_back(latency(rng) * 3);
    }
    if (pick(rng) < 30) t.recovery_ms.push_back(latency(rng) * 50);
    if (t.failing()) {
      t.kept = true;
      t.dir = "/runs/r/" + t.scenario + "/trial-" + std::to_string(n);
      t.reproduce = "shmstress run s.toml --seed 5 --trial " + std::to_string(n);
    }
    out.push_back(std::move(t));
  }
  return out;
}

// summary_json as it was computed when RunResult kept every trial.
nlohmann::json Reference(const RunResult& r, const std::vector<TrialResult>& trials) {
  auto quantiles = [](std::vector<double> v) -> nlohmann::json {
    if (v.empty()) return nullptr;
    std::sort(v.begin(), v.end());
    auto q = [&](double p) {
      return v[std::min(v.size() - 1, static_cast<std::size_t>(p * (v.size() - 1) + 0.5))];
    };
    return {
        {"count", v.size()}, {"p50", q(0.5)}, {"p90", q(0.9)}, {"p99", q(0.99)}, {"max", v.back()}};
  };
  nlohmann::json j;
  Verdict verdict = Verdict::kValid;
  for (const auto& t : trials) verdict = harness::compose(verdict, t.verdict);
  j["run_id"] = r.run_id;
  j["seed"] = r.seed;
  j["subject"] = r.subject;
  j["verdict"] = harness::verdict_name(verdict);
  j["exit_code"] = r.exit_code();
  j["interrupted"] = r.interrupted;
  j["elapsed_s"] = r.elapsed;
  j["trials"] = trials.size();
  j["shard"] = std::to_string(r.shard_index) + "/" + std::to_string(r.shard_count);
  j["violations"] = nlohmann::json::array();
  j["unknown"] = nlohmann::json::array();
  std::map<std::string, int> faults, reached;
  std::map<std::string, std::map<std::string, std::string>> by_scenario;
  std::map<std::string, int> trials_by_scenario;
  std::vector<double> acq, bar, rec;
  for (const auto& t : trials) {
    ++trials_by_scenario[t.scenario];
    for (const auto& [k, n] : t.faults) faults[k] += n;
    for (const auto& s : t.reached) ++reached[s];
    acq.insert(acq.end(), t.acquire_ms.begin(), t.acquire_ms.end());
    bar.insert(bar.end(), t.barrier_ms.begin(), t.barrier_ms.end());
    rec.insert(rec.end(), t.recovery_ms.begin(), t.recovery_ms.end());
    for (const auto& c : t.checks) {
      auto& cell = by_scenario[t.scenario][c.invariant];
      if (cell.empty() || harness::compose(Verdict::kValid, c.verdict) > Verdict::kValid) {
        if (cell != "invalid") cell = harness::verdict_name(c.verdict);
      }
      if (c.verdict == Verdict::kValid) continue;
      nlohmann::json v = {{"invariant", c.invariant}, {"scenario", t.scenario},
                          {"trial", t.trial},         {"seed", t.seed},
                          {"run_seed", t.run_seed},   {"trial_dir", t.dir},
                          {"reproduce", t.reproduce}, {"problems", c.problems}};
      j[c.verdict == Verdict::kInvalid ? "violations" : "unknown"].push_back(std::move(v));
    }
    if (!t.unavailable.empty())
      j["skipped"].push_back(
          {{"scenario", t.scenario}, {"trial", t.trial}, {"reason", t.unavailable}});
    if (t.harness_error) {
      j["harness_errors"].push_back({{"scenario", t.scenario},
                                     {"trial", t.trial},
                                     {"message", t.harness_error_text},
                                     {"trial_dir", t.dir}});
    }
  }
  j["faults"] = faults;
  j["reached"] = reached;
  j["missing_reached"] = r.missing_reached();
  j["scenarios"] = nlohmann::json::object();
  for (const auto& [s, inv] : by_scenario)
    j["scenarios"][s] = {{"trials", trials_by_scenario[s]}, {"invariants", inv}};
  j["latency_ms"] = {
      {"acquire", quantiles(acq)}, {"barrier", quantiles(bar)}, {"recovery", quantiles(rec)}};
  return j;
}

RunResult MakeRun(const std::vector<TrialResult>& trials, std::size_t cap) {
  RunResult r;
  r.run_id = "r";
  r.seed = 5;
  r.elapsed = 3.25;
  r.max_listed = cap;
  r.expect_reached["basic"] = {"killed-while-holding", "never-there"};
  for (const auto& t : trials) r.add(t);
  return r;
}

TEST(SummaryJson, SameAsFromEveryTrial) {
  auto trials = Trials(300, 3, 1);  // 900 latencies each: the sketches are still exact
  RunResult r = MakeRun(trials, 0);
  ASSERT_TRUE(r.tally.acquire_ms().exact());
  nlohmann::json got = summary_json(r), want = Reference(r, trials);
  EXPECT_EQ(got, want) << "got:\n" << got.dump(1) << "\nwant:\n" << want.dump(1);
  EXPECT_FALSE(got.contains("unlisted"));
  EXPECT_GT(got["violations"].size(), 10u) << "the sample should violate";
  EXPECT_TRUE(got.contains("skipped"));
  EXPECT_TRUE(got.contains("harness_errors"));
}

// Past the cap: the first failing trials are listed as before, the others counted.
TEST(SummaryJson, ListsUpToTheCapAndCountsTheRest) {
  auto trials = Trials(300, 3, 2);
  RunResult r = MakeRun(trials, 10);
  nlohmann::json got = summary_json(r);
  std::vector<TrialResult> first_failing;
  for (const auto& t : trials) {
    if (t.failing() && first_failing.size() < 10) first_failing.push_back(t);
  }
  nlohmann::json listed_only = Reference(r, first_failing);
  for (const char* key : {"violations", "unknown", "skipped", "harness_errors"}) {
    EXPECT_EQ(got.value(key, nlohmann::json()), listed_only.value(key, nlohmann::json())) << key;
  }
  nlohmann::json all = Reference(r, trials);
  for (const char* key :
       {"trials", "verdict", "faults", "reached", "scenarios", "latency_ms", "missing_reached"}) {
    EXPECT_EQ(got[key], all[key]) << key;
  }
  ASSERT_TRUE(got.contains("unlisted"));
  const auto& u = got["unlisted"];
  EXPECT_EQ(u["max_kept"], 10);
  EXPECT_EQ(u["trials"].get<std::uint64_t>() + 10,
            static_cast<std::uint64_t>(std::count_if(
                trials.begin(), trials.end(), [](const TrialResult& t) { return t.failing(); })));
  EXPECT_EQ(u["violations"].get<std::size_t>() + got["violations"].size(),
            all["violations"].size());
  EXPECT_EQ(u["unknown"].get<std::size_t>() + got["unknown"].size(), all["unknown"].size());
  EXPECT_EQ(u["skipped"].get<std::size_t>() + got.value("skipped", nlohmann::json::array()).size(),
            all.value("skipped", nlohmann::json::array()).size());
  EXPECT_EQ(u["harness_errors"].get<std::size_t>() +
                got.value("harness_errors", nlohmann::json::array()).size(),
            all.value("harness_errors", nlohmann::json::array()).size());
}

// Past kExact samples: count and max exact, quantiles within the stated error.
TEST(SummaryJson, QuantilesWithinTheSketchErrorPastItsExactPhase) {
  auto trials = Trials(3000, 5, 3);
  RunResult r = MakeRun(trials, 100);
  ASSERT_FALSE(r.tally.acquire_ms().exact());
  nlohmann::json got = summary_json(r)["latency_ms"], want = Reference(r, trials)["latency_ms"];
  for (const char* op : {"acquire", "barrier", "recovery"}) {
    EXPECT_EQ(got[op]["count"], want[op]["count"]) << op;
    EXPECT_EQ(got[op]["max"], want[op]["max"]) << op;
    for (const char* p : {"p50", "p90", "p99"}) {
      const double exact = want[op][p].get<double>();
      EXPECT_NEAR(got[op][p].get<double>(), exact, exact * harness::QuantileSketch::kRelativeError)
          << op << " " << p;
    }
  }
}

}  // namespace
}  // namespace reports
