// summary.json from the run aggregate is what it was when every trial was
// kept: checked against a reference that computes it the old way, from the
// full list of trials. Past the --max-kept cap the lists stop and `unlisted`
// counts the rest; past QuantileSketch::kExact samples the quantiles are
// within the sketch's relative error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <random>

#include "harness/summary.h"
#include "harness/triage.h"
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
      if (c.verdict == Verdict::kInvalid) {  // no baseline: every bucket is new
        v["fingerprints"] = nlohmann::json::array();
        for (const auto& f : harness::violation_fingerprints(t.scenario, c)) v["fingerprints"].push_back(f.id);
        v["status"] = "new";
      }
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

// summary.json without what triage, the adaptive concurrency and `merge` added.
nlohmann::json Core(nlohmann::json j) {
  for (const char* k : {"buckets", "new_buckets", "known_buckets", "buckets_overflow", "baseline", "out_dir",
                        "max_kept", "planned", "duration_s", "expect_reached", "concurrency", "tally"})
    j.erase(k);
  return j;
}

TEST(SummaryJson, SameAsFromEveryTrial) {
  auto trials = Trials(300, 3, 1);  // 900 latencies each: the sketches are still exact
  RunResult r = MakeRun(trials, 0);
  ASSERT_TRUE(r.tally.acquire_ms().exact());
  nlohmann::json got = Core(summary_json(r)), want = Reference(r, trials);
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
  nlohmann::json got = Core(summary_json(r));
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

// Buckets: one per (scenario, invariant, problem shape), with the count of
// violations that showed it, the trial range and the first one as example.
TEST(SummaryJson, BucketsGroupViolationsByFingerprint) {
  RunResult r;
  auto trial = [](int n, const std::string& problem) {
    TrialResult t;
    t.scenario = "kill-holder";
    t.trial = n;
    t.seed = 100 + n;
    t.dir = "/runs/r/kill-holder/trial-" + std::to_string(n);
    t.reproduce = "shmstress run k.toml --seed 5 --trial " + std::to_string(n);
    CheckResult c;
    c.invariant = "cleanup.safety";
    c.verdict = Verdict::kInvalid;
    c.problems = {problem};
    t.checks = {c};
    t.verdict = Verdict::kInvalid;
    return t;
  };
  // The same flaw, other pids, times and names; then another flaw.
  r.add(trial(7, "cleanup by job 1 rank 0 (pid 4242) (+1.5ms to +2.0ms) removed /shm.t7.000001_barrier while job 0 rank 1 (pid 4240) held prefix 1"));
  r.add(trial(3, "cleanup by job 2 rank 1 (pid 977) (+10.25ms to +11.0ms) removed /shm.t3.000000_locals while job 1 rank 0 (pid 975) held prefix 0"));
  r.add(trial(12, "cleanup by job 0 rank 0 (pid 12) (+3.0ms to +3.5ms) removed /x, which belongs to another user"));
  nlohmann::json j = summary_json(r);
  ASSERT_EQ(j["buckets"].size(), 2u) << j["buckets"].dump(1);
  EXPECT_EQ(j["new_buckets"], 2);
  EXPECT_EQ(j["known_buckets"], 0);
  const auto& b = j["buckets"][0];
  EXPECT_EQ(b["trials"], 2);
  EXPECT_EQ(b["first_trial"], 3);
  EXPECT_EQ(b["last_trial"], 7);
  EXPECT_EQ(b["example_trial"], 7);  // the first to finish
  EXPECT_EQ(b["status"], "new");
  EXPECT_EQ(b["shape"],
            "cleanup by job <n> rank <n> (pid <n>) (<t> to <t>) removed <path> while job <n> rank <n> (pid <n>) "
            "held prefix <n>");
  EXPECT_EQ(b["reproduce"], "shmstress run k.toml --seed 5 --trial 7");
  EXPECT_EQ(b["trial_dir"], "/runs/r/kill-holder/trial-7");
  EXPECT_TRUE(harness::parse_fingerprint(b["fingerprint"].get<std::string>()));
  EXPECT_TRUE(b["fingerprint"].get<std::string>().starts_with("cleanup.safety/kill-holder/"));
  EXPECT_EQ(j["buckets"][1]["trials"], 1);
  EXPECT_EQ(j["violations"][0]["fingerprints"][0], b["fingerprint"]);
}

// What `merge` reads back (harness/summary.h: the one decoder, then
// run_result_of) is the run that was written: summary_json of it is the same
// (up to the order of the listed trials).
std::optional<RunResult> ReadBack(const nlohmann::json& j, std::string* err) {
  harness::StoredError e;
  auto s = harness::parse_summary(j.dump(2), "summary.json", &e);
  std::optional<RunResult> r;
  if (s) r = harness::run_result_of(*s, &e);
  if (!r) *err = e.to_string();
  return r;
}

TEST(SummaryRead, RoundTripsTheRun) {
  auto trials = Trials(3000, 2, 4);  // past kExact: the sketches are bucketed
  RunResult r = MakeRun(trials, 30);
  r.out_dir = "/runs/r";
  r.planned = 3000;
  r.concurrency.adaptive = true;
  r.concurrency.now = 12;
  auto base = std::make_shared<harness::Baseline>();
  base->file = "known.txt";
  const std::string fp = r.tally.buckets().buckets().begin()->first;
  base->known[fp] = harness::KnownFailure{fp, "known since the dawn of time", harness::parse_day("2030-01-02"), 3};
  RunResult rb = MakeRun({}, 30);
  rb.tally.buckets().set_baseline(base);
  for (const auto& t : trials) rb.add(t);
  rb.out_dir = r.out_dir;
  for (const RunResult* run : {&r, &rb}) {
    const nlohmann::json want = summary_json(*run);
    std::string err;
    auto back = ReadBack(want, &err);
    ASSERT_TRUE(back) << err;
    nlohmann::json got = summary_json(*back);
    for (auto* j : {&got, const_cast<nlohmann::json*>(&want)}) {
      for (const char* k : {"violations", "unknown", "skipped", "harness_errors"}) {
        if (!j->contains(k)) continue;
        auto& a = (*j)[k];
        std::sort(a.begin(), a.end(), [](const auto& x, const auto& y) { return x.dump() < y.dump(); });
      }
    }
    EXPECT_EQ(got, want) << "got:\n" << got.dump(1).substr(0, 4000);
    EXPECT_EQ(back->exit_code(), run->exit_code());
  }
}

TEST(SummaryRead, NamesTheFileAndTheKeyThatIsWrong) {
  RunResult r = MakeRun(Trials(20, 1, 5), 0);
  nlohmann::json j = summary_json(r);
  j["tally"]["scenarios"]["basic"]["trials"] = "many";
  std::string err;
  ASSERT_FALSE(ReadBack(j, &err));
  EXPECT_EQ(err,
            "summary.json: /tally/scenarios/basic/trials: must be a count (an integer in 0..2^40), got the "
            "string \"many\"");
  j = summary_json(r);
  j.erase("tally");
  EXPECT_FALSE(ReadBack(j, &err));
  EXPECT_EQ(err, "summary.json: no \"tally\": written by a shmstress from before `merge` (run the shard again)");
  j = summary_json(r);
  j["shard"] = "3/2";
  EXPECT_FALSE(ReadBack(j, &err));
  EXPECT_EQ(err, "summary.json: /shard: \"3/2\" is not i/n (0 <= i < n)");
  j = summary_json(r);
  j.erase("seed");
  EXPECT_FALSE(ReadBack(j, &err));
  EXPECT_EQ(err, "summary.json: /seed: is missing");
}

// What merge adds up must fit: a shard count, a count or a trial index past
// what any run reaches is refused with its key, never allocated, summed past
// 2^64 or wrapped to another index.
TEST(SummaryRead, RefusesCountsAndIndicesThatWouldOverflowAMerge) {
  RunResult r = MakeRun(Trials(20, 1, 5), 0);
  std::string err;
  nlohmann::json j = summary_json(r);
  j["shard"] = "0/2000000000";
  EXPECT_FALSE(ReadBack(j, &err));
  EXPECT_EQ(err, "summary.json: /shard: \"0/2000000000\": more than 100000 shards");
  j = summary_json(r);
  j["tally"]["totals"]["trials"] = std::numeric_limits<std::uint64_t>::max();
  EXPECT_FALSE(ReadBack(j, &err));
  EXPECT_EQ(err,
            "summary.json: /tally/totals/trials: 18446744073709551615 is past any run's count (at most 2^40)");
  j = summary_json(r);
  ASSERT_FALSE(j["violations"].empty());
  j["violations"][0]["trial"] = std::uint64_t{1} << 32;
  EXPECT_FALSE(ReadBack(j, &err));
  EXPECT_EQ(err, "summary.json: /violations/0/trial: must be an integer in 0..2147483647, got 4294967296");
  j = summary_json(r);
  j["violations"][0]["seed"] = std::numeric_limits<std::uint64_t>::max();  // a seed is any 64-bit value
  EXPECT_TRUE(ReadBack(j, &err)) << err;
}

// What `report` reads back from summary.json (harness/summary.h) decodes what
// this writes: run id, subject, elapsed time, each listed trial's dir and
// reproduce command.
TEST(SummaryJson, TheStoredDecoderReadsBackWhatItWrites) {
  auto trials = Trials(200, 1, 4);
  RunResult r = MakeRun(trials, 10);
  r.run_id = "20261123-050355-9199";
  r.elapsed = 12.5;
  harness::StoredError err;
  auto back = harness::parse_summary(summary_json(r).dump(2), "summary.json", &err);
  ASSERT_TRUE(back) << err.to_string();
  EXPECT_EQ(back->run_id, r.run_id);
  EXPECT_EQ(back->subject, r.subject);
  EXPECT_EQ(back->elapsed_s, 12.5);
  ASSERT_FALSE(back->reproduce_by_dir().empty());
  for (const auto& [dir, reproduce] : back->reproduce_by_dir()) {
    EXPECT_EQ(dir.rfind("/runs/r/", 0), 0u) << dir;
    EXPECT_EQ(reproduce.rfind("shmstress run s.toml --seed 5 --trial ", 0), 0u) << reproduce;
  }
}

// A soak's summary.json is written after its first trial (a watcher sees the
// run at once), then not again within kLiveRewriteEvery.
TEST(LiveSummary, WritesAfterTheFirstTrialThenAtMostOnceAnInterval) {
  char tmpl[] = "/tmp/shmstress-live-summary-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, file = dir + "/summary.json";
  harness::RunResult r;
  r.out_dir = dir;
  auto live = live_summary();
  live->trial_finished(harness::TrialResult{}, r);
  const bool first = std::filesystem::exists(file);
  std::filesystem::remove(file);
  live->trial_finished(harness::TrialResult{}, r);
  const bool second = std::filesystem::exists(file);
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(first);
  EXPECT_FALSE(second);
}

}  // namespace
}  // namespace reports
