// Prometheus text exposition format (0.0.4) for node_exporter's textfile
// collector, and the model (metrics_families) that the live /metrics endpoint
// and the Pushgateway push (live.cc) render too. Labels are only scenario,
// invariant, fault, state, status (new / known / not_recurred) and subject:
// bounded by the catalog, never by seeds, trials, pids or fingerprints, so a
// nightly soak does not grow the TSDB.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "harness/files.h"
#include "reports/reports.h"
#include "reports/throttle.h"

namespace reports {
namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

// The shortest text that parses back to the same double, spelled as Go's
// strconv.FormatFloat(v, 'g', -1, 64) spells it (what Prometheus' own clients
// write, so le="0.0001" matches theirs): exponent form below 1e-4 and from
// 1e6 on. +Inf/-Inf/NaN as the text format names them.
std::string num(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == 0) return "0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  int exp = std::atoi(sci.c_str() + sci.find('e') + 1);
  if (exp < -4 || exp >= 6) return sci;
  res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  return std::string(buf, res.ptr);
}

std::string label_value(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string labels_text(const Labels& l) {
  if (l.empty()) return "";
  std::string s = "{";
  for (std::size_t i = 0; i < l.size(); ++i) {
    if (i) s += ",";
    s += l[i].first + "=\"" + label_value(l[i].second) + "\"";
  }
  return s + "}";
}

// The latency histograms' bucket bounds as `le` values.
const std::vector<std::string>& bucket_labels() {
  static const std::vector<std::string> le = [] {
    std::vector<std::string> v;
    for (double b : latency_buckets_s()) v.push_back(num(b));
    return v;
  }();
  return le;
}

}  // namespace

const std::vector<double>& latency_buckets_s() { return harness::latency_bounds_s(); }

std::vector<MetricFamily> metrics_families(const MetricsTally& tally, const std::string& subject,
                                           double elapsed_s, const MetricsOptions& o) {
  std::vector<MetricFamily> out;
  auto family = [&](const char* name, const char* type, const char* help) -> MetricFamily& {
    out.push_back(MetricFamily{std::string("shmstress_") + name, type, help, {}});
    return out.back();
  };
  auto value = [](MetricFamily& f, Labels l, double v) {
    MetricSample s;
    s.labels = std::move(l);
    s.value = v;
    f.samples.push_back(std::move(s));
  };
  // One sample per scenario (or per scenario and key) of what `of` reads from
  // its tally. Every checked invariant has a series, 0 included, so "no
  // violations" is a value a dashboard can show, not a missing series; every
  // scenario has its histograms, empty ones included.
  const auto& scenarios = tally.scenarios();
  auto by_scenario = [&](MetricFamily& f, auto of) {
    for (const auto& [name, s] : scenarios) value(f, {{"scenario", name}, {"subject", subject}}, static_cast<double>(of(s)));
  };
  auto by_key = [&](MetricFamily& f, const char* label, auto entries) {
    for (const auto& [name, s] : scenarios) {
      for (const auto& [key, n] : entries(s))
        value(f, {{"scenario", name}, {label, key}, {"subject", subject}}, static_cast<double>(n));
    }
  };
  auto invariants = [&](MetricFamily& f, bool invalid) {
    for (const auto& [name, s] : scenarios) {
      for (const auto& [inv, cell] : s.invariants)  // an excused invariant's verdicts count for nothing
        value(f, {{"scenario", name}, {"invariant", inv}, {"subject", subject}},
              cell.excused.empty() ? static_cast<double>(invalid ? cell.invalid : cell.unknown) : 0.0);
    }
  };
  auto histograms = [&](MetricFamily& f, auto of) {
    const std::size_t bounds = latency_buckets_s().size();
    for (const auto& [name, st] : scenarios) {
      const harness::LatencyClasses& h = of(st);
      MetricSample s;
      s.labels = {{"scenario", name}, {"subject", subject}};
      s.buckets.assign(bounds, 0);
      std::uint64_t cumulative = 0;
      for (std::size_t i = 0; i < bounds && !h.counts.empty(); ++i) s.buckets[i] = cumulative += h.counts[i];
      s.count = h.count;
      s.sum = h.sum_s;
      f.samples.push_back(std::move(s));
    }
  };
  using S = harness::ScenarioTally;

  by_scenario(family("trials_total", "counter", "Trials finished in the last run, by scenario."),
              [](const S& s) { return s.trials; });
  by_scenario(family("violating_trials_total", "counter",
                     "Trials of the last run in which some invariant was violated."),
              [](const S& s) { return s.violating; });
  by_scenario(family("unavailable_total", "counter",
                     "Trials of the last run the subject could not run at all (nothing was checked)."),
              [](const S& s) { return s.unavailable; });
  by_scenario(family("history_error_trials_total", "counter",
                     "Trials of the last run with events that do not fit the worker protocol (each at best inconclusive)."),
              [](const S& s) { return s.history_error_trials; });
  invariants(family("violations_total", "counter",
                    "Trials of the last run in which the invariant was violated."),
             true);
  invariants(family("inconclusive_total", "counter",
                    "Trials of the last run in which the invariant could not be decided."),
             false);
  // Triage: violations by whether their bucket is new or known to the
  // baseline (only (scenario, invariant) pairs that were violated), and
  // buckets by status (always both; not_recurred only with a baseline).
  {
    MetricFamily& f = family("triaged_violations_total", "counter",
                             "Trials of the last run in which the invariant was violated, by whether the "
                             "violation's bucket is new or known to the baseline.");
    for (const auto& [name, s] : scenarios) {
      for (const auto& [inv, cell] : s.invariants) {
        if (cell.invalid == 0) continue;
        for (const auto& [status, n] : {std::pair{"new", cell.invalid_new}, std::pair{"known", cell.invalid_known}})
          value(f, {{"scenario", name}, {"invariant", inv}, {"status", status}, {"subject", subject}},
                static_cast<double>(n));
      }
    }
    MetricFamily& b = family("buckets", "gauge",
                             "Distinct failure buckets (fingerprints) of the last run, by status: new, known to "
                             "the baseline, or known but not seen this run (not_recurred).");
    value(b, {{"status", "new"}, {"subject", subject}}, static_cast<double>(tally.buckets().count(false)));
    value(b, {{"status", "known"}, {"subject", subject}}, static_cast<double>(tally.buckets().count(true)));
    if (o.not_recurred)
      value(b, {{"status", "not_recurred"}, {"subject", subject}}, static_cast<double>(*o.not_recurred));
  }
  by_key(family("faults_total", "counter", "Faults injected in the last run, by kind."), "fault",
         [](const S& s) -> const auto& { return s.faults; });
  by_key(family("reached_total", "counter",
                "Trials of the last run that reached the interleaving state."),
         "state", [](const S& s) -> const auto& { return s.reached; });
  histograms(family("acquire_latency_seconds", "histogram",
                    "Latency of successful prefix acquires in the last run."),
             [](const S& s) -> const auto& { return s.acquire; });
  histograms(family("barrier_latency_seconds", "histogram",
                    "Latency of successful barrier rounds in the last run."),
             [](const S& s) -> const auto& { return s.barrier; });
  histograms(family("recovery_seconds", "histogram",
                    "Time from the end of a fault window to the next successful barrier round, "
                    "in the last run."),
             [](const S& s) -> const auto& { return s.recovery; });
  value(family("run_duration_seconds", "gauge",
               "Wall-clock duration of the last run (so far, while in progress)."),
        {{"subject", subject}}, elapsed_s);
  value(family("run_in_progress", "gauge",
               "1 while a run is still going (a live soak), 0 once it finished."),
        {{"subject", subject}}, o.in_progress ? 1 : 0);
  if (o.progress) {
    value(family("run_progress_ratio", "gauge",
                 "How far the run is: trials done of those planned, or time elapsed of a soak's "
                 "duration (0 to 1)."),
          {{"subject", subject}}, *o.progress);
  }
  if (o.concurrency > 0) {
    value(family("concurrency", "gauge",
                 "Trials the run keeps going at once: the adaptive target, or --parallel."),
          {{"subject", subject}}, o.concurrency);
  }
  if (!o.in_progress) {
    value(family("run_exit_code", "gauge",
                 "Exit code of the last run (0 ok, 1 violation, 3 harness failure, 4 inconclusive)."),
          {{"subject", subject}}, o.exit_code);
  }
  // Runs that have not finished, or not succeeded, repeat what the file said.
  std::optional<double> finished = o.in_progress ? o.previous_run : std::optional<double>(o.now_s);
  if (finished) {
    value(family("last_run_timestamp_seconds", "gauge", "Unix time the last run finished."),
          {{"subject", subject}}, *finished);
  }
  std::optional<double> success =
      !o.in_progress && o.exit_code == 0 ? std::optional<double>(o.now_s) : o.previous_success;
  if (success) {
    value(family("last_success_timestamp_seconds", "gauge",
                 "Unix time a run last finished with exit code 0."),
          {{"subject", subject}}, *success);
  }
  return out;
}

std::vector<MetricFamily> metrics_families(const harness::RunResult& r, const MetricsOptions& o) {
  MetricsOptions with = o;
  if (!with.progress) with.progress = r.progress(!o.in_progress);
  if (with.concurrency == 0) with.concurrency = r.concurrency.now;
  if (!with.not_recurred && r.tally.buckets().baseline()) with.not_recurred = r.known_not_recurred().size();
  return metrics_families(r.tally, r.subject, r.elapsed, with);
}

std::string metrics_text(const std::vector<MetricFamily>& families) {
  std::string out;
  auto sample = [&](const std::string& name, const Labels& l, const std::string& v) {
    out += name + labels_text(l) + " " + v + "\n";
  };
  for (const auto& f : families) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", f.name, f.help, f.name, f.type);
    for (const auto& s : f.samples) {
      if (f.type != "histogram") {
        sample(f.name, s.labels, num(s.value));
        continue;
      }
      const auto& le = bucket_labels();
      for (std::size_t i = 0; i <= le.size(); ++i) {
        Labels b = s.labels;
        b.emplace_back("le", i < le.size() ? le[i] : "+Inf");
        sample(f.name + "_bucket", b, std::to_string(i < le.size() ? s.buckets[i] : s.count));
      }
      sample(f.name + "_sum", s.labels, num(s.sum));
      sample(f.name + "_count", s.labels, std::to_string(s.count));
    }
  }
  return out;
}

std::string metrics_text(const harness::RunResult& r, const MetricsOptions& o) {
  return metrics_text(metrics_families(r, o));
}

std::optional<double> read_metric(const std::string& path, const std::string& name,
                                  const std::string& subject) {
  // The previous run's textfile, or anything a user put there.
  const auto text = harness::read_regular_file(path, harness::kMaxUserFileBytes, nullptr);
  if (!text) return std::nullopt;
  std::istringstream f(*text);
  const std::string prefix = name + "{subject=\"" + label_value(subject) + "\"} ";
  for (std::string line; std::getline(f, line);) {
    if (!line.starts_with(prefix)) continue;
    std::string v = line.substr(prefix.size());
    double d = 0;
    auto res = std::from_chars(v.data(), v.data() + v.size(), d);
    if (res.ec == std::errc() && std::isfinite(d)) return d;
  }
  return std::nullopt;
}

namespace {

std::optional<harness::OutputError> write(const harness::RunResult& r, const std::string& path,
                                          MetricsOptions o) {
  o.now_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  o.previous_success = read_metric(path, "shmstress_last_success_timestamp_seconds", r.subject);
  o.previous_run = read_metric(path, "shmstress_last_run_timestamp_seconds", r.subject);
  return harness::write_output(path, metrics_text(r, o), harness::OutputOrigin::kUser);
}

}  // namespace

std::optional<harness::OutputError> write_metrics(const harness::RunResult& r, const std::string& path,
                                                  int exit_code) {
  MetricsOptions o;
  o.exit_code = exit_code;
  return write(r, path, o);
}

std::optional<harness::OutputError> write_metrics_live(const harness::RunResult& r, const std::string& path) {
  MetricsOptions o;
  o.in_progress = true;
  return write(r, path, o);
}

namespace {

class LiveMetricsFile : public harness::RunSubscriber {
 public:
  explicit LiveMetricsFile(std::string path) : path_(std::move(path)) {}
  void trial_finished(const harness::TrialResult&, const harness::RunResult& so_far) override {
    if (!throttle_.due(std::chrono::steady_clock::now())) return;
    (void)write_metrics_live(so_far, path_);  // the final write (by the caller) reports failures
  }

 private:
  std::string path_;
  Throttle throttle_{kLiveRewriteEvery};
};

}  // namespace

std::shared_ptr<harness::RunSubscriber> live_metrics_file(const std::string& path) {
  return std::make_shared<LiveMetricsFile>(path);
}

}  // namespace reports
