// The run aggregate (results.h): what it counts, what it lists, that its
// memory stays flat however many trials a soak adds, that its quantiles are
// exact up to QuantileSketch::kExact values and within kRelativeError after,
// and the run's exit code (DESIGN.md §8), interrupted runs included.
#include "results.h"

#include <gtest/gtest.h>

#include "triage.h"
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace harness {
namespace {

CheckResult Check(const std::string& inv, Verdict v, std::vector<std::string> problems = {}) {
  CheckResult c;
  c.invariant = inv;
  c.verdict = v;
  c.problems = std::move(problems);
  return c;
}

// A trial as the run loop produces it, varied by `rng`: one of 5 scenarios, 4
// invariants each (mostly valid, some invalid or unknown), faults and reached
// states from a fixed set, latencies over six decades, now and then a
// harness error or an unavailable subject.
TrialResult Synthetic(int n, std::mt19937_64& rng) {
  static const char* kScenarios[] = {"basic", "kill-holder", "pause-subset", "stale-locks", "race"};
  static const char* kInvariants[] = {"prefix.unique", "barrier.safety", "cleanup.safety",
                                      "worker.exits"};
  static const char* kFaults[] = {"sigkill", "sigstop", "crash-point"};
  static const char* kStates[] = {"killed-while-holding", "paused-in-barrier", "fault:sigkill",
                                  "error:acquire:timeout"};
  std::uniform_int_distribution<int> pick(0, 999);
  std::lognormal_distribution<double> latency(0.0, 2.5);  // ms: ~1e-3 .. ~1e3
  TrialResult t;
  t.scenario = kScenarios[n % 5];
  t.scenario_file = "scenarios/" + t.scenario + ".toml";
  t.trial = n;
  t.run_seed = 7;
  t.seed = rng();
  t.seconds = 0.05 + pick(rng) / 1000.0;
  for (const char* inv : kInvariants) {
    int x = pick(rng);
    Verdict v = x < 20 ? Verdict::kInvalid : x < 50 ? Verdict::kUnknown : Verdict::kValid;
    t.checks.push_back(Check(
        inv, v,
        v == Verdict::kValid ? std::vector<std::string>{}
                             : std::vector<std::string>{"problem of trial " + std::to_string(n)}));
    t.verdict = compose(t.verdict, v);
  }
  if (pick(rng) < 5) {
    t.harness_error = true;
    t.harness_error_text = "supervisor exited abnormally";
    t.verdict = compose(t.verdict, Verdict::kUnknown);
  }
  if (pick(rng) < 5) {
    t.unavailable = "needs root";
    t.checks.clear();
    t.verdict = Verdict::kUnknown;
  }
  t.faults[kFaults[pick(rng) % 3]] = 1 + pick(rng) % 3;
  t.reached.insert(kStates[pick(rng) % 4]);
  auto ms = [&](double scale) { return latency(rng) * scale; };
  for (int i = 0; i < 8; ++i) t.acquire_ms.push_back(ms(1));
  for (int i = 0; i < 12; ++i) t.barrier_ms.push_back(ms(10));
  if (pick(rng) < 300) t.recovery_ms.push_back(ms(100));
  if (t.failing()) {
    t.kept = true;
    t.dir = "/runs/r/" + t.scenario + "/trial-" + std::to_string(n);
    t.reproduce = "shmstress run " + t.scenario_file + " --seed 7 --trial " + std::to_string(n);
  }
  return t;
}

std::size_t AllocatedBytes() { return mallinfo2().uordblks; }

// The aggregate's memory does not grow with the number of trials: after a
// warm-up (every scenario, invariant, fault, state and latency range seen, the
// sketches past their exact phase, the failing list at its cap) 10,000 more
// trials leave its containers the same size and the heap where it was.
TEST(RunResult, MemoryIsFlatInTheNumberOfTrials) {
  std::mt19937_64 rng(42);
  RunResult r;
  r.max_listed = 100;
  int n = 0;
  for (; n < 5000; ++n) r.add(Synthetic(n, rng));
  ASSERT_EQ(r.listed.size(), 100u);
  ASSERT_FALSE(r.tally.acquire_ms().exact());
  ASSERT_FALSE(r.tally.barrier_ms().exact());
  ASSERT_FALSE(r.tally.recovery_ms().exact());
  const std::size_t footprint = r.tally.footprint();
  const std::size_t heap = AllocatedBytes();
  const std::size_t listed_capacity = r.listed.capacity();
  std::size_t max_footprint = footprint;
  for (; n < 15000; ++n) {
    r.add(Synthetic(n, rng));
    max_footprint = std::max(max_footprint, r.tally.footprint());
  }
  EXPECT_EQ(r.tally.trials(), 15000u);
  EXPECT_EQ(r.listed.size(), 100u);
  EXPECT_EQ(r.listed.capacity(), listed_capacity);
  EXPECT_EQ(r.tally.scenarios().size(), 5u);
  EXPECT_EQ(max_footprint, footprint)
      << "footprint grew from " << footprint << " to " << max_footprint;
  const std::size_t heap_after = AllocatedBytes();
  EXPECT_LE(heap_after, heap + 4 * 1024)
      << "the heap grew by " << (heap_after - heap) << " bytes over 10,000 trials";
  // What was counted is still all there.
  std::uint64_t by_scenario = 0;
  for (const auto& [name, s] : r.tally.scenarios()) by_scenario += s.trials;
  EXPECT_EQ(by_scenario, 15000u);
  EXPECT_EQ(r.unlisted(), r.tally.failing() - 100);
  EXPECT_EQ(r.tally.acquire_ms().count(), 15000u * 8);
}

// The old way (a vector of every TrialResult) grows by kilobytes per trial:
// the measure above would see it.
TEST(RunResult, TheHeapMeasureSeesPerTrialGrowth) {
  std::mt19937_64 rng(1);
  std::vector<TrialResult> kept;
  kept.reserve(2000);
  const std::size_t heap = AllocatedBytes();
  for (int n = 0; n < 2000; ++n) kept.push_back(Synthetic(n, rng));
  EXPECT_GT(AllocatedBytes(), heap + 2000 * 200);
}

TEST(RunResult, CountsPerScenarioAndInvariant) {
  RunResult r;
  TrialResult a;
  a.scenario = "s";
  a.scenario_file = "s.toml";
  a.checks = {Check("x", Verdict::kInvalid), Check("y", Verdict::kValid)};
  a.verdict = Verdict::kInvalid;
  a.faults = {{"sigkill", 2}};
  a.reached = {"state-a"};
  a.seconds = 0.5;
  TrialResult b;
  b.scenario = "s";
  b.scenario_file = "other.toml";
  b.checks = {Check("x", Verdict::kUnknown), Check("y", Verdict::kValid)};
  b.verdict = Verdict::kUnknown;
  b.faults = {{"sigkill", 1}, {"sigstop", 1}};
  b.seconds = 0.25;
  TrialResult c;
  c.scenario = "s";
  c.checks = {Check("x", Verdict::kValid), Check("y", Verdict::kValid)};
  r.add(a), r.add(b), r.add(c);
  const ScenarioTally& s = r.tally.scenarios().at("s");
  EXPECT_EQ(s.file, "s.toml");
  EXPECT_EQ(s.trials, 3u);
  EXPECT_EQ(s.violating, 1u);
  EXPECT_EQ(s.seconds, 0.75);
  EXPECT_EQ(s.invariants.at("x").invalid, 1u);
  EXPECT_EQ(s.invariants.at("x").unknown, 1u);
  EXPECT_EQ(s.invariants.at("x").worst, Verdict::kInvalid);
  EXPECT_EQ(s.invariants.at("y").not_valid(), 0u);
  EXPECT_EQ(r.tally.faults(),
            (std::map<std::string, std::uint64_t>{{"sigkill", 3}, {"sigstop", 1}}));
  EXPECT_EQ(r.tally.reached(), (std::map<std::string, std::uint64_t>{{"state-a", 1}}));
  EXPECT_EQ(r.tally.not_valid_checks(), 2u);
  // Only failing trials are listed, in order.
  ASSERT_EQ(r.listed.size(), 2u);
  EXPECT_EQ(r.listed[0].checks[0].verdict, Verdict::kInvalid);
  EXPECT_EQ(r.listed[1].checks[0].verdict, Verdict::kUnknown);
  EXPECT_EQ(r.verdict(), Verdict::kInvalid);
}

TEST(RunResult, ListsTheFirstFailingTrialsUpToTheCap) {
  RunResult r;
  r.max_listed = 2;
  for (int n = 0; n < 5; ++n) {
    TrialResult t;
    t.scenario = "s";
    t.trial = n;
    t.checks = {Check("x", n == 1 ? Verdict::kValid : Verdict::kInvalid)};
    t.verdict = t.checks[0].verdict;
    r.add(t);
  }
  ASSERT_EQ(r.listed.size(), 2u);
  EXPECT_EQ(r.listed[0].trial, 0);
  EXPECT_EQ(r.listed[1].trial, 2);
  EXPECT_EQ(r.unlisted(), 2u);
  EXPECT_EQ(r.tally.scenarios().at("s").invariants.at("x").invalid, 4u);
}

TEST(RunResult, MissingReachedNamesStatesNoTrialReached) {
  RunResult r;
  r.expect_reached["s"] = {"a", "b"};
  r.expect_reached["never-ran"] = {"c"};
  TrialResult t;
  t.scenario = "s";
  t.reached = {"a"};
  r.add(t);
  EXPECT_EQ(r.missing_reached(), (std::vector<std::string>{"never-ran: c", "s: b"}));
  EXPECT_EQ(r.exit_code(), 4);
}

TEST(RunResult, MissingReachedTakesEitherAlternative) {
  RunResult r;
  r.expect_reached["s"] = {"a|b", "c|d"};
  TrialResult t;
  t.scenario = "s";
  t.reached = {"b"};
  r.add(t);
  EXPECT_EQ(r.missing_reached(), (std::vector<std::string>{"s: c|d"}));
}

TEST(RunResult, ExitCodes) {
  auto run_of = [](Verdict v, bool harness_error, bool interrupted) {
    RunResult r;
    TrialResult t;
    t.scenario = "s";
    t.checks = {Check("x", v)};
    t.verdict = v;
    t.harness_error = harness_error;
    r.add(t);
    r.interrupted = interrupted;
    return r.exit_code();
  };
  EXPECT_EQ(run_of(Verdict::kValid, false, false), 0);
  EXPECT_EQ(run_of(Verdict::kInvalid, false, false), 1);
  EXPECT_EQ(run_of(Verdict::kValid, true, false), 3);
  EXPECT_EQ(run_of(Verdict::kUnknown, false, false), 4);
  // Interrupted (a CI timeout's SIGTERM): never green. A violation found
  // before the interrupt is still a violation; a harness failure still one.
  EXPECT_EQ(run_of(Verdict::kValid, false, true), 4);
  EXPECT_EQ(run_of(Verdict::kInvalid, false, true), 1);
  EXPECT_EQ(run_of(Verdict::kValid, true, true), 3);
  RunResult nothing;
  nothing.interrupted = true;
  EXPECT_EQ(nothing.exit_code(), 4);
}

// n spelled in letters: a problem shape of its own for every n.
std::string Letters(int n) {
  std::string s;
  do {
    s += static_cast<char>('a' + n % 26);
    n /= 26;
  } while (n > 0);
  return s;
}

TrialResult Violating(const std::string& scenario, int n, const std::string& problem, const std::string& inv = "x") {
  TrialResult t;
  t.scenario = scenario;
  t.trial = n;
  t.checks = {Check(inv, Verdict::kInvalid, {problem})};
  t.verdict = Verdict::kInvalid;
  return t;
}

std::shared_ptr<Baseline> Knowing(std::vector<std::string> fingerprints) {
  auto b = std::make_shared<Baseline>();
  for (auto& fp : fingerprints) b->known[fp].fingerprint = fp;
  return b;
}

std::string FingerprintOf(const std::string& scenario, const std::string& problem, const std::string& inv = "x") {
  return make_fingerprint(inv, scenario, problem_shape(problem)).id;
}

// A soak finding ever new shapes (a subject that prints random words) opens at
// most kMaxBuckets buckets; the rest are counted, and memory stays flat.
TEST(Buckets, AreCappedSoMemoryStaysFlat) {
  RunResult r;
  r.max_listed = 10;
  int n = 0;
  for (; n < 2000; ++n) r.add(Violating("s", n, "flaw " + Letters(n)));
  ASSERT_EQ(r.tally.buckets().buckets().size(), BucketTally::kMaxBuckets);
  const std::size_t footprint = r.tally.footprint();
  const std::size_t heap = AllocatedBytes();
  for (; n < 12000; ++n) r.add(Violating("s", n, "flaw " + Letters(n)));
  EXPECT_EQ(r.tally.footprint(), footprint);
  EXPECT_LE(AllocatedBytes(), heap + 4 * 1024);
  EXPECT_EQ(r.tally.buckets().overflow(), 12000u - BucketTally::kMaxBuckets);
  EXPECT_EQ(r.tally.new_violating(), 12000u);  // past the cap still classified
  EXPECT_EQ(r.exit_code(), 1);
}

TEST(Buckets, CountTrialRangeAndExample) {
  RunResult r;
  for (int n : {9, 4, 13}) {
    auto t = Violating("s", n, "job 0 rank " + std::to_string(n) + " (pid " + std::to_string(100 + n) + ") broke");
    t.dir = "/r/s/trial-" + std::to_string(n);
    t.reproduce = "repro " + std::to_string(n);
    r.add(t);
  }
  ASSERT_EQ(r.tally.buckets().buckets().size(), 1u);
  const Bucket& b = r.tally.buckets().buckets().begin()->second;
  EXPECT_EQ(b.trials, 3u);
  EXPECT_EQ(b.first_trial, 4);
  EXPECT_EQ(b.last_trial, 13);
  EXPECT_EQ(b.example_trial, 9);  // the first to finish
  EXPECT_EQ(b.example_problem, "job 0 rank 9 (pid 109) broke");
  EXPECT_EQ(b.example_dir, "/r/s/trial-9");
  EXPECT_EQ(b.reproduce, "repro 9");
  EXPECT_EQ(b.shape, "job <n> rank <n> (pid <n>) broke");
  EXPECT_FALSE(b.known);
}

// Only known failures: exit 0. Any new bucket: 1. Known failures do not hide
// an inconclusive (4) or a harness failure (3).
TEST(Buckets, ExitCodesWithABaseline) {
  const std::string known = "cleanup removed /a while job 0 held it", fresh = "job 1 rank 0 died of SIGSEGV";
  auto base = Knowing({FingerprintOf("s", known)});
  auto run = [&](std::vector<TrialResult> trials, bool interrupted = false) {
    RunResult r;
    r.tally.buckets().set_baseline(base);
    for (auto& t : trials) r.add(t);
    r.interrupted = interrupted;
    return r;
  };
  RunResult only_known = run({Violating("s", 0, known), Violating("s", 1, known)});
  EXPECT_EQ(only_known.verdict(), Verdict::kInvalid);  // the truth, in every report
  EXPECT_EQ(only_known.exit_code(), 0);
  EXPECT_EQ(only_known.tally.new_violating(), 0u);
  EXPECT_EQ(only_known.tally.buckets().count(true), 1u);
  EXPECT_EQ(only_known.tally.scenarios().at("s").invariants.at("x").invalid_known, 2u);
  EXPECT_EQ(run({Violating("s", 0, known), Violating("s", 1, fresh)}).exit_code(), 1);
  // The same text in another scenario is another bucket: new.
  EXPECT_EQ(run({Violating("t", 0, known)}).exit_code(), 1);
  // A trial with a known and a new problem is new.
  auto both = Violating("s", 0, known);
  both.checks[0].problems.push_back(fresh);
  EXPECT_EQ(run({both}).exit_code(), 1);
  auto unknown = Violating("s", 1, known);
  unknown.checks.push_back(Check("y", Verdict::kUnknown, {"cut off"}));
  EXPECT_EQ(run({Violating("s", 0, known), unknown}).exit_code(), 4);
  auto harness = Violating("s", 1, known);
  harness.harness_error = true;
  EXPECT_EQ(run({harness}).exit_code(), 3);
  EXPECT_EQ(run({Violating("s", 0, known)}, true).exit_code(), 4);
  // Without a baseline every bucket is new.
  RunResult plain;
  plain.add(Violating("s", 0, known));
  EXPECT_EQ(plain.exit_code(), 1);
}

TEST(Buckets, KnownThatDidNotRecurAreNamedForScenariosThatRan) {
  const std::string a = "flaw one", b = "flaw two";
  auto base = Knowing({FingerprintOf("s", a), FingerprintOf("s", b), FingerprintOf("other", a)});
  RunResult r;
  r.tally.buckets().set_baseline(base);
  r.add(Violating("s", 0, a));
  const auto gone = r.known_not_recurred();
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0]->fingerprint, FingerprintOf("s", b));
}

// The shards of one nightly (trial indices i mod 3) add up to the whole run:
// every counter, and the buckets with their counts, ranges and examples.
TEST(Buckets, ShardsMergeIntoTheWholeRun) {
  std::mt19937_64 rng(9);
  std::vector<TrialResult> trials;
  for (int n = 0; n < 600; ++n) {
    TrialResult t = Synthetic(n, rng);
    // Shapes that recur: a handful per invariant.
    for (auto& c : t.checks) {
      for (auto& p : c.problems) p = "flaw " + Letters(n % 4) + " at +" + std::to_string(n) + ".5ms";
    }
    trials.push_back(t);
  }
  RunResult whole;
  RunResult shards[3];
  for (const auto& t : trials) {
    whole.add(t);
    shards[t.trial % 3].add(t);
  }
  RunTally merged;
  for (const auto& s : shards) merged.merge(s.tally);
  EXPECT_EQ(merged.trials(), whole.tally.trials());
  EXPECT_EQ(merged.failing(), whole.tally.failing());
  EXPECT_EQ(merged.not_valid_checks(), whole.tally.not_valid_checks());
  EXPECT_EQ(merged.new_violating(), whole.tally.new_violating());
  EXPECT_EQ(merged.verdict(), whole.tally.verdict());
  EXPECT_EQ(merged.triaged_verdict(), whole.tally.triaged_verdict());
  EXPECT_EQ(merged.faults(), whole.tally.faults());
  EXPECT_EQ(merged.reached(), whole.tally.reached());
  EXPECT_EQ(merged.acquire_ms().count(), whole.tally.acquire_ms().count());
  EXPECT_EQ(merged.acquire_ms().max(), whole.tally.acquire_ms().max());
  EXPECT_NEAR(merged.acquire_ms().quantile(0.9), whole.tally.acquire_ms().quantile(0.9),
              whole.tally.acquire_ms().quantile(0.9) * QuantileSketch::kRelativeError * 2);
  for (const auto& [name, s] : whole.tally.scenarios()) {
    const auto& m = merged.scenarios().at(name);
    EXPECT_EQ(m.trials, s.trials);
    EXPECT_EQ(m.violating, s.violating);
    EXPECT_EQ(m.acquire.counts, s.acquire.counts);
    for (const auto& [inv, c] : s.invariants) {
      EXPECT_EQ(m.invariants.at(inv).invalid, c.invalid);
      EXPECT_EQ(m.invariants.at(inv).invalid_new, c.invalid_new);
      EXPECT_EQ(m.invariants.at(inv).unknown, c.unknown);
    }
  }
  ASSERT_EQ(merged.buckets().buckets().size(), whole.tally.buckets().buckets().size());
  for (const auto& [fp, b] : whole.tally.buckets().buckets()) {
    const Bucket& m = merged.buckets().buckets().at(fp);
    EXPECT_EQ(m.trials, b.trials) << fp;
    EXPECT_EQ(m.first_trial, b.first_trial) << fp;
    EXPECT_EQ(m.last_trial, b.last_trial) << fp;
    EXPECT_EQ(m.example_trial, b.example_trial) << fp;
  }
}

// merge --baseline over shards that ran without one: bucket statuses exact,
// the exit code follows them.
TEST(Buckets, ReclassifiedAgainstAnotherBaseline) {
  RunResult r;
  r.add(Violating("s", 0, "flaw a", "x"));
  r.add(Violating("s", 1, "flaw b", "y"));
  EXPECT_EQ(r.exit_code(), 1);
  r.tally.reclassify(Knowing({FingerprintOf("s", "flaw a", "x"), FingerprintOf("s", "flaw b", "y")}));
  EXPECT_EQ(r.tally.buckets().count(true), 2u);
  EXPECT_EQ(r.tally.new_violating(), 0u);
  EXPECT_EQ(r.exit_code(), 0);
  r.tally.reclassify(Knowing({FingerprintOf("s", "flaw a", "x")}));
  EXPECT_EQ(r.tally.buckets().count(false), 1u);
  EXPECT_EQ(r.tally.scenarios().at("s").invariants.at("y").invalid_new, 1u);
  EXPECT_EQ(r.tally.scenarios().at("s").invariants.at("x").invalid_known, 1u);
  EXPECT_EQ(r.exit_code(), 1);
}

TEST(QuantileSketch, StateRoundTripsAndMerges) {
  QuantileSketch a, b, all;
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> v(0.0, 2.0);
  for (int i = 0; i < 700; ++i) {
    double x = v(rng);
    (i % 2 ? a : b).add(x);
    all.add(x);
  }
  auto back = QuantileSketch::from_state(a.state());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->quantile(0.5), a.quantile(0.5));
  QuantileSketch m = a;
  m.merge(b);
  EXPECT_TRUE(m.exact());  // 700 values: still exact, so the merge is exact
  for (double p : {0.1, 0.5, 0.9, 0.99}) EXPECT_EQ(m.quantile(p), all.quantile(p));
  m.merge(all);            // 1400: bucketed from now on
  EXPECT_FALSE(m.exact());
  EXPECT_EQ(m.count(), 1400u);
  EXPECT_NEAR(m.quantile(0.5), all.quantile(0.5), all.quantile(0.5) * QuantileSketch::kRelativeError);
  auto again = QuantileSketch::from_state(m.state());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->quantile(0.9), m.quantile(0.9));
  QuantileSketch::State bad = m.state();
  bad.count += 1;  // the buckets no longer add up
  EXPECT_FALSE(QuantileSketch::from_state(bad));
}

double NearestRank(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * (v.size() - 1) + 0.5))];
}

TEST(QuantileSketch, ExactUpToItsCapacity) {
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> d(0.0, 2.0);
  QuantileSketch q;
  std::vector<double> all;
  for (std::size_t i = 0; i < QuantileSketch::kExact; ++i) {
    all.push_back(d(rng));
    q.add(all.back());
  }
  ASSERT_TRUE(q.exact());
  for (double p : {0.0, 0.5, 0.9, 0.99, 1.0}) EXPECT_EQ(q.quantile(p), NearestRank(all, p)) << p;
  EXPECT_EQ(q.max(), *std::max_element(all.begin(), all.end()));
  std::uint64_t n = 0;
  double last = -1;
  q.for_each([&](double v, std::uint64_t k) {
    EXPECT_GE(v, last);
    last = v;
    n += k;
  });
  EXPECT_EQ(n, all.size());
}

TEST(QuantileSketch, WithinItsRelativeErrorPastIt) {
  std::mt19937_64 rng(4);
  std::lognormal_distribution<double> d(0.0, 3.0);  // ~1e-4 .. ~1e4
  QuantileSketch q;
  std::vector<double> all;
  for (int i = 0; i < 200000; ++i) {
    all.push_back(d(rng));
    q.add(all.back());
  }
  all.push_back(0);  // a zero-length op
  q.add(0);
  ASSERT_FALSE(q.exact());
  EXPECT_EQ(q.count(), all.size());
  EXPECT_EQ(q.min(), 0);
  EXPECT_EQ(q.max(), *std::max_element(all.begin(), all.end()));
  for (double p : {0.01, 0.1, 0.5, 0.9, 0.99, 0.999}) {
    const double exact = NearestRank(all, p);
    EXPECT_NEAR(q.quantile(p), exact, exact * QuantileSketch::kRelativeError) << "p" << p;
  }
  EXPECT_EQ(q.quantile(0), 0);
  EXPECT_LT(q.footprint(), 3000u) << "buckets over eight decades";
  std::uint64_t n = 0;
  q.for_each([&](double, std::uint64_t k) { n += k; });
  EXPECT_EQ(n, all.size());
}

// Whatever a subject reports, a sketch holds a bounded number of counters:
// values are clamped to 1e-9 .. 1e12 (ms) for bucketing (count, min and max
// stay exact).
TEST(QuantileSketch, BoundedWhateverTheValues) {
  QuantileSketch q;
  for (std::size_t i = 0; i <= QuantileSketch::kExact; ++i) q.add(1.0);
  for (double v = 1e-300; v < 1e300; v *= 1.001) q.add(v);
  q.add(-5);
  q.add(std::numeric_limits<double>::infinity());
  EXPECT_LT(q.footprint(), 2500u);
  EXPECT_EQ(q.min(), -5);
  EXPECT_EQ(q.max(), std::numeric_limits<double>::infinity());
  EXPECT_FALSE(std::isnan(q.quantile(0.5)));
}

TEST(LatencyClasses, CountsEachValueInTheFirstBoundThatHoldsIt) {
  LatencyClasses c;
  c.add_ms(0.05);   // 50 us: <= 0.0001 s
  c.add_ms(0.1);    // exactly the first bound
  c.add_ms(2.0);    // <= 0.0025 s
  c.add_ms(20000);  // past the last bound: only in count
  ASSERT_EQ(c.counts.size(), latency_bounds_s().size());
  EXPECT_EQ(c.counts[0], 2u);
  EXPECT_EQ(c.counts[4], 1u);
  EXPECT_EQ(c.count, 4u);
  EXPECT_NEAR(c.sum_s, 20.00215, 1e-9);
}

}  // namespace
}  // namespace harness
