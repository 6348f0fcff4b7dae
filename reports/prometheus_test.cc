#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "reports/reports.h"

namespace reports {
namespace {

namespace fs = std::filesystem;
using harness::CheckResult;
using harness::RunResult;
using harness::TrialResult;
using harness::Verdict;

// A parsed exposition: every sample, and the TYPE of every family, checked
// against the text format's rules as it goes.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};
struct Exposition {
  std::vector<Sample> samples;
  std::map<std::string, std::string> types;
  std::set<std::string> helps;
  std::vector<std::string> errors;

  // The value of the one sample with this name and these labels (a subset).
  std::optional<double> get(const std::string& name,
                            const std::map<std::string, std::string>& labels) const {
    std::optional<double> v;
    for (const auto& s : samples) {
      if (s.name != name) continue;
      bool match = true;
      for (const auto& [k, want] : labels) match &= s.labels.contains(k) && s.labels.at(k) == want;
      if (!match) continue;
      if (v) return std::nullopt;  // ambiguous
      v = s.value;
    }
    return v;
  }
};

Exposition Parse(const std::string& text) {
  Exposition e;
  std::istringstream in(text);
  std::string family;  // of the last TYPE line
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("# HELP ")) {
      std::string rest = line.substr(7);
      e.helps.insert(rest.substr(0, rest.find(' ')));
      continue;
    }
    if (line.starts_with("# TYPE ")) {
      std::istringstream t(line.substr(7));
      std::string name, type;
      t >> name >> type;
      if (e.types.contains(name)) e.errors.push_back("second TYPE for " + name);
      e.types[name] = type;
      family = name;
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    std::size_t i = 0;
    while (i < line.size() &&
           (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_' || line[i] == ':'))
      ++i;
    s.name = line.substr(0, i);
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        std::size_t eq = line.find('=', i);
        std::string key = line.substr(i, eq - i);
        i = eq + 2;  // past ="
        std::string value;
        for (; i < line.size() && line[i] != '"'; ++i) {
          if (line[i] == '\\') {
            ++i;
            value += line[i] == 'n' ? '\n' : line[i];
          } else {
            value += line[i];
          }
        }
        ++i;  // closing quote
        s.labels[key] = value;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;  // }
    }
    if (i >= line.size() || line[i] != ' ') {
      e.errors.push_back("no value: " + line);
      continue;
    }
    std::string v = line.substr(i + 1);
    if (v == "+Inf") {
      s.value = INFINITY;
    } else if (std::from_chars(v.data(), v.data() + v.size(), s.value).ec != std::errc()) {
      e.errors.push_back("bad value: " + line);
    }
    // A sample belongs to the family declared right before it.
    std::string base = s.name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      if (e.types[family] == "histogram" && base == family + suffix) base = family;
    }
    if (base != family) e.errors.push_back("sample outside its family: " + line);
    e.samples.push_back(std::move(s));
  }
  return e;
}

CheckResult Check(const std::string& inv, Verdict v) {
  CheckResult c;
  c.invariant = inv;
  c.verdict = v;
  return c;
}

std::vector<TrialResult> Sample2Trials() {
  TrialResult a;
  a.scenario = "kill-holder";
  a.seed = 1234567;
  a.checks = {Check("prefix.unique", Verdict::kInvalid), Check("cleanup.safety", Verdict::kValid)};
  a.faults = {{"sigkill", 2}};
  a.reached = {"killed-while-holding"};
  a.acquire_ms = {0.05, 0.3, 2.0};  // 50 us, 300 us, 2 ms
  a.barrier_ms = {20000};           // 20 s: past the last bucket
  a.recovery_ms = {150, 40};
  a.verdict = Verdict::kInvalid;
  TrialResult b = a;
  b.seed = 7654321;
  b.checks = {Check("prefix.unique", Verdict::kUnknown), Check("cleanup.safety", Verdict::kValid)};
  b.faults = {{"sigkill", 1}, {"sigstop", 1}};
  b.reached = {};
  b.acquire_ms = {1.0};
  b.barrier_ms = {};
  b.recovery_ms = {};
  b.verdict = Verdict::kUnknown;
  TrialResult c;
  c.scenario = "basic \"quoted\"\\path";
  c.checks = {Check("prefix.unique", Verdict::kValid)};
  return {a, b, c};
}

RunResult Sample2() {
  RunResult r;
  r.seed = 99;
  r.subject = "native";
  r.elapsed = 12.5;
  for (const auto& t : Sample2Trials()) r.add(t);
  return r;
}

TEST(Metrics, WellFormedWithHelpAndType) {
  MetricsOptions o;
  o.now_s = 1700000000.5;
  auto e = Parse(metrics_text(Sample2(), o));
  EXPECT_TRUE(e.errors.empty()) << e.errors.front();
  for (const auto& [name, type] : e.types) {
    EXPECT_TRUE(e.helps.contains(name)) << name;
    EXPECT_TRUE(name.starts_with("shmstress_")) << name;
    if (type == "counter") {
      EXPECT_TRUE(name.ends_with("_total")) << name;
    }
  }
  EXPECT_EQ(e.types["shmstress_trials_total"], "counter");
  EXPECT_EQ(e.types["shmstress_acquire_latency_seconds"], "histogram");
  EXPECT_EQ(e.types["shmstress_last_run_timestamp_seconds"], "gauge");
}

TEST(Metrics, CountsByScenarioInvariantFaultState) {
  MetricsOptions o;
  auto e = Parse(metrics_text(Sample2(), o));
  const std::string s = "kill-holder";
  EXPECT_EQ(e.get("shmstress_trials_total", {{"scenario", s}, {"subject", "native"}}), 2);
  EXPECT_EQ(e.get("shmstress_violations_total", {{"scenario", s}, {"invariant", "prefix.unique"}}),
            1);
  EXPECT_EQ(e.get("shmstress_violations_total", {{"scenario", s}, {"invariant", "cleanup.safety"}}),
            0);
  EXPECT_EQ(
      e.get("shmstress_inconclusive_total", {{"scenario", s}, {"invariant", "prefix.unique"}}), 1);
  EXPECT_EQ(e.get("shmstress_faults_total", {{"scenario", s}, {"fault", "sigkill"}}), 3);
  EXPECT_EQ(e.get("shmstress_faults_total", {{"scenario", s}, {"fault", "sigstop"}}), 1);
  EXPECT_EQ(e.get("shmstress_reached_total", {{"scenario", s}, {"state", "killed-while-holding"}}),
            1);
  EXPECT_EQ(e.get("shmstress_run_duration_seconds", {{"subject", "native"}}), 12.5);
  EXPECT_EQ(e.get("shmstress_unavailable_total", {{"scenario", s}}), 0);
  // Label values are escaped and come back intact.
  EXPECT_EQ(e.get("shmstress_trials_total", {{"scenario", "basic \"quoted\"\\path"}}), 1);
}

TEST(Metrics, LatencyHistogramsAreCumulativeInSeconds) {
  MetricsOptions o;
  auto e = Parse(metrics_text(Sample2(), o));
  const std::map<std::string, std::string> l = {{"scenario", "kill-holder"}};
  auto bucket = [&](const char* name, const char* le) {
    auto m = l;
    m["le"] = le;
    return e.get(std::string("shmstress_") + name + "_bucket", m);
  };
  EXPECT_EQ(bucket("acquire_latency_seconds", "0.0001"), 1);  // 50 us
  EXPECT_EQ(bucket("acquire_latency_seconds", "0.0005"), 2);  // + 300 us
  EXPECT_EQ(bucket("acquire_latency_seconds", "0.001"), 3);   // + 1 ms
  EXPECT_EQ(bucket("acquire_latency_seconds", "0.0025"), 4);  // + 2 ms
  EXPECT_EQ(bucket("acquire_latency_seconds", "+Inf"), 4);
  EXPECT_EQ(e.get("shmstress_acquire_latency_seconds_count", l), 4);
  EXPECT_NEAR(*e.get("shmstress_acquire_latency_seconds_sum", l), 0.00335, 1e-12);
  EXPECT_EQ(bucket("barrier_latency_seconds", "10"), 0);
  EXPECT_EQ(bucket("barrier_latency_seconds", "+Inf"), 1);
  // Every bucket of every histogram: non-decreasing in le, +Inf == _count.
  std::map<std::string, std::vector<std::pair<double, double>>> series;
  for (const auto& s : e.samples) {
    if (!s.name.ends_with("_bucket")) continue;
    auto labels = s.labels;
    double le = labels["le"] == "+Inf" ? INFINITY : std::stod(labels["le"]);
    labels.erase("le");
    std::string key = s.name;
    for (const auto& [k, v] : labels) key += "," + k + "=" + v;
    series[key].push_back({le, s.value});
  }
  EXPECT_EQ(series.size(), 6u);  // 2 scenarios x 3 histograms
  for (auto& [key, b] : series) {
    EXPECT_EQ(b.size(), latency_buckets_s().size() + 1) << key;
    for (std::size_t i = 1; i < b.size(); ++i) {
      EXPECT_LT(b[i - 1].first, b[i].first) << key;
      EXPECT_LE(b[i - 1].second, b[i].second) << key;
    }
  }
}

TEST(Metrics, RecoveryHistogramAndViolatingTrials) {
  MetricsOptions o;
  auto e = Parse(metrics_text(Sample2(), o));
  EXPECT_EQ(e.types["shmstress_recovery_seconds"], "histogram");
  const std::map<std::string, std::string> l = {{"scenario", "kill-holder"}};
  auto bucket = [&](const char* le) {
    auto m = l;
    m["le"] = le;
    return e.get("shmstress_recovery_seconds_bucket", m);
  };
  EXPECT_EQ(bucket("0.025"), 0);
  EXPECT_EQ(bucket("0.05"), 1);   // 40 ms
  EXPECT_EQ(bucket("0.25"), 2);   // + 150 ms
  EXPECT_EQ(bucket("+Inf"), 2);
  EXPECT_NEAR(*e.get("shmstress_recovery_seconds_sum", l), 0.19, 1e-12);
  // A scenario without recoveries still has its (empty) histogram.
  EXPECT_EQ(e.get("shmstress_recovery_seconds_count", {{"scenario", "basic \"quoted\"\\path"}}), 0);
  // Trials with some violation: a failure rate is violating_trials / trials.
  EXPECT_EQ(e.get("shmstress_violating_trials_total", l), 1);
  EXPECT_EQ(e.get("shmstress_violating_trials_total", {{"scenario", "basic \"quoted\"\\path"}}), 0);
}

// Adding trials one at a time (the live endpoint) gives what the whole run gives.
TEST(Metrics, TallyIsIncremental) {
  RunResult r = Sample2();
  MetricsOptions o;
  o.now_s = 1700000000;
  // What only the RunResult knows, given alike to both.
  o.progress = 1;
  o.concurrency = 4;
  MetricsTally tally;
  for (const auto& t : Sample2Trials()) tally.add(t);
  EXPECT_EQ(tally.trials(), 3u);
  EXPECT_EQ(metrics_text(metrics_families(tally, r.subject, r.elapsed, o)), metrics_text(r, o));
}

TEST(Metrics, LowCardinalityLabelsOnly) {
  MetricsOptions o;
  auto e = Parse(metrics_text(Sample2(), o));
  const std::set<std::string> allowed = {"scenario", "invariant", "fault", "state",
                                         "status",   "subject",   "le"};
  for (const auto& s : e.samples) {
    for (const auto& [k, v] : s.labels) {
      EXPECT_TRUE(allowed.contains(k)) << s.name << " has label " << k;
      EXPECT_EQ(v.find("1234567"), std::string::npos) << "a seed leaked into " << s.name;
    }
  }
}

// Violations by new / known and buckets by status: labels from a closed set,
// never a fingerprint; known-not-recurred only with a baseline.
TEST(Metrics, ViolationsAndBucketsByNewOrKnown) {
  RunResult plain = Sample2();
  auto e = Parse(metrics_text(plain, MetricsOptions{}));
  using Labels = std::map<std::string, std::string>;
  const Labels l = {{"scenario", "kill-holder"}, {"invariant", "prefix.unique"}, {"subject", "native"}};
  auto with = [](Labels x, const char* status) {
    x["status"] = status;
    return x;
  };
  // No baseline: every violation is new.
  EXPECT_EQ(e.get("shmstress_triaged_violations_total", with(l, "new")), 1);
  EXPECT_EQ(e.get("shmstress_triaged_violations_total", with(l, "known")), 0);
  EXPECT_EQ(e.get("shmstress_buckets", {{"status", "new"}, {"subject", "native"}}), 1);
  EXPECT_EQ(e.get("shmstress_buckets", {{"status", "known"}, {"subject", "native"}}), 0);
  EXPECT_FALSE(e.get("shmstress_buckets", {{"status", "not_recurred"}, {"subject", "native"}}));
  // A baseline that knows it, and one more of kill-holder that did not recur.
  auto base = std::make_shared<harness::Baseline>();
  for (const auto& b : plain.tally.buckets().buckets()) base->known[b.first].fingerprint = b.first;
  base->known["cleanup.safety/kill-holder/0123456789ab"].fingerprint = "cleanup.safety/kill-holder/0123456789ab";
  base->known["cleanup.safety/other/0123456789ab"].fingerprint = "cleanup.safety/other/0123456789ab";
  RunResult r;
  r.subject = "native";
  r.tally.buckets().set_baseline(base);
  for (const auto& t : Sample2Trials()) r.add(t);
  e = Parse(metrics_text(r, MetricsOptions{}));
  EXPECT_EQ(e.get("shmstress_triaged_violations_total", with(l, "new")), 0);
  EXPECT_EQ(e.get("shmstress_triaged_violations_total", with(l, "known")), 1);
  EXPECT_EQ(e.get("shmstress_buckets", {{"status", "known"}, {"subject", "native"}}), 1);
  // Only the one of a scenario this run ran.
  EXPECT_EQ(e.get("shmstress_buckets", {{"status", "not_recurred"}, {"subject", "native"}}), 1);
}

TEST(Metrics, LastSuccessOnlyWhenTheRunSucceeded) {
  MetricsOptions o;
  o.now_s = 1700000000;
  o.exit_code = 0;
  auto ok = Parse(metrics_text(Sample2(), o));
  EXPECT_EQ(ok.get("shmstress_last_success_timestamp_seconds", {{"subject", "native"}}),
            1700000000);
  EXPECT_EQ(ok.get("shmstress_last_run_timestamp_seconds", {{"subject", "native"}}), 1700000000);

  o.exit_code = 1;
  auto bad = Parse(metrics_text(Sample2(), o));
  EXPECT_FALSE(bad.types.contains("shmstress_last_success_timestamp_seconds"));
  EXPECT_EQ(bad.get("shmstress_run_exit_code", {}), 1);

  o.previous_success = 1600000000;  // what the replaced file said
  auto carried = Parse(metrics_text(Sample2(), o));
  EXPECT_EQ(carried.get("shmstress_last_success_timestamp_seconds", {}), 1600000000);
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/shmstress-metrics-test.XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string path() const { return path_; }

 private:
  std::string path_;
};

TEST(Metrics, WriteKeepsTimestampsAcrossLiveAndFailingWrites) {
  TempDir dir;
  const std::string file = dir.path() + "/shmstress.prom";
  RunResult r = Sample2();
  ASSERT_FALSE(write_metrics(r, file, 0));
  const std::string kSuccess = "shmstress_last_success_timestamp_seconds";
  const std::string kRun = "shmstress_last_run_timestamp_seconds";
  auto first = read_metric(file, kSuccess, "native");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(read_metric(file, kRun, "native"), first);
  ASSERT_FALSE(write_metrics_live(r, file));  // a soak going on
  EXPECT_EQ(read_metric(file, kSuccess, "native"), first);
  EXPECT_EQ(read_metric(file, kRun, "native"), first);
  EXPECT_EQ(read_metric(file, "shmstress_run_in_progress", "native"), 1);
  EXPECT_FALSE(read_metric(file, "shmstress_run_exit_code", "native").has_value());
  ASSERT_FALSE(write_metrics(r, file, 1));  // ... that found a violation
  EXPECT_EQ(read_metric(file, kSuccess, "native"), first);
  EXPECT_GE(*read_metric(file, kRun, "native"), *first);
  EXPECT_EQ(read_metric(file, "shmstress_run_in_progress", "native"), 0);
  EXPECT_EQ(read_metric(file, "shmstress_run_exit_code", "native"), 1);
  EXPECT_FALSE(read_metric(file, kSuccess, "other-subject").has_value());
  EXPECT_FALSE(read_metric(dir.path() + "/missing.prom", kSuccess, "native").has_value());
}

// The reference parser, when it is installed (Debian's `prometheus` package ships promtool).
TEST(Metrics, PromtoolAccepts) {
  const char* promtool = "/usr/bin/promtool";
  if (::access(promtool, X_OK) != 0) GTEST_SKIP() << "promtool not installed";
  TempDir dir;
  const std::string file = dir.path() + "/m.prom";
  MetricsOptions o;
  o.now_s = 1700000000;
  ASSERT_FALSE(harness::write_output(file, metrics_text(Sample2(), o), harness::OutputOrigin::kUser));
  std::string out;
  FILE* p = ::popen((std::string(promtool) + " check metrics < " + file + " 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  int st = ::pclose(p);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << out;
  EXPECT_EQ(out, "") << "promtool lint findings";
}

}  // namespace
}  // namespace reports
