// Prometheus text exposition format (0.0.4) for node_exporter's textfile
// collector. Labels are only scenario, invariant, fault, state and subject:
// bounded by the catalog, never by seeds, trials or pids, so a nightly soak
// does not grow the TSDB.
#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "reports/reports.h"

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

class Writer {
 public:
  void family(const std::string& name, const char* type, const char* help) {
    out_ += fmt::format("# HELP shmstress_{} {}\n# TYPE shmstress_{} {}\n", name, help, name, type);
  }
  void sample(const std::string& name, const Labels& l, double v) {
    out_ += "shmstress_" + name + labels_text(l) + " " + num(v) + "\n";
  }
  void histogram(const std::string& name, Labels l, const std::vector<double>& seconds) {
    const auto& bounds = latency_buckets_s();
    std::vector<std::uint64_t> counts(bounds.size(), 0);
    double sum = 0;
    for (double s : seconds) {
      sum += s;
      for (std::size_t i = 0; i < bounds.size(); ++i) counts[i] += s <= bounds[i] ? 1 : 0;
    }
    for (std::size_t i = 0; i <= bounds.size(); ++i) {
      Labels b = l;
      b.emplace_back("le", i < bounds.size() ? num(bounds[i]) : "+Inf");
      sample(name + "_bucket", b,
             static_cast<double>(i < bounds.size() ? counts[i] : seconds.size()));
    }
    sample(name + "_sum", l, sum);
    sample(name + "_count", l, static_cast<double>(seconds.size()));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace

const std::vector<double>& latency_buckets_s() {
  // 100 us (an uncontended acquire) to 10 s (past every deadline the catalog sets).
  static const std::vector<double> b = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                        0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  return b;
}

std::string metrics_text(const harness::RunResult& r, const MetricsOptions& o) {
  using harness::Verdict;
  const std::string& subject = r.subject;
  std::map<std::string, int> trials, unavailable;
  std::map<std::pair<std::string, std::string>, int> violations, inconclusive, reached, faults;
  std::map<std::string, std::vector<double>> acquire, barrier;
  for (const auto& t : r.trials) {
    ++trials[t.scenario];
    unavailable[t.scenario] += t.unavailable.empty() ? 0 : 1;
    for (const auto& c : t.checks) {
      // Every checked invariant gets a series, 0 included, so "no violations"
      // is a value a dashboard can show, not a missing series.
      violations[{t.scenario, c.invariant}] += c.verdict == Verdict::kInvalid;
      inconclusive[{t.scenario, c.invariant}] += c.verdict == Verdict::kUnknown;
    }
    for (const auto& [kind, n] : t.faults) faults[{t.scenario, kind}] += n;
    for (const auto& s : t.reached) ++reached[{t.scenario, s}];
    auto& a = acquire[t.scenario];
    for (double ms : t.acquire_ms) a.push_back(ms / 1000);
    auto& b = barrier[t.scenario];
    for (double ms : t.barrier_ms) b.push_back(ms / 1000);
  }

  Writer w;
  w.family("trials_total", "counter", "Trials finished in the last run, by scenario.");
  for (const auto& [s, n] : trials)
    w.sample("trials_total", {{"scenario", s}, {"subject", subject}}, n);
  w.family("unavailable_total", "counter",
           "Trials of the last run the subject could not run at all (nothing was checked).");
  for (const auto& [s, n] : unavailable)
    w.sample("unavailable_total", {{"scenario", s}, {"subject", subject}}, n);
  w.family("violations_total", "counter",
           "Trials of the last run in which the invariant was violated.");
  for (const auto& [k, n] : violations) {
    w.sample("violations_total",
             {{"scenario", k.first}, {"invariant", k.second}, {"subject", subject}}, n);
  }
  w.family("inconclusive_total", "counter",
           "Trials of the last run in which the invariant could not be decided.");
  for (const auto& [k, n] : inconclusive) {
    w.sample("inconclusive_total",
             {{"scenario", k.first}, {"invariant", k.second}, {"subject", subject}}, n);
  }
  w.family("faults_total", "counter", "Faults injected in the last run, by kind.");
  for (const auto& [k, n] : faults) {
    w.sample("faults_total", {{"scenario", k.first}, {"fault", k.second}, {"subject", subject}}, n);
  }
  w.family("reached_total", "counter",
           "Trials of the last run that reached the interleaving state.");
  for (const auto& [k, n] : reached) {
    w.sample("reached_total", {{"scenario", k.first}, {"state", k.second}, {"subject", subject}},
             n);
  }
  w.family("acquire_latency_seconds", "histogram",
           "Latency of successful prefix acquires in the last run.");
  for (const auto& [s, v] : acquire)
    w.histogram("acquire_latency_seconds", {{"scenario", s}, {"subject", subject}}, v);
  w.family("barrier_latency_seconds", "histogram",
           "Latency of successful barrier rounds in the last run.");
  for (const auto& [s, v] : barrier)
    w.histogram("barrier_latency_seconds", {{"scenario", s}, {"subject", subject}}, v);
  w.family("run_duration_seconds", "gauge",
           "Wall-clock duration of the last run (so far, while in progress).");
  w.sample("run_duration_seconds", {{"subject", subject}}, r.elapsed);
  w.family("run_in_progress", "gauge",
           "1 while a run is still going (a live soak), 0 once it finished.");
  w.sample("run_in_progress", {{"subject", subject}}, o.in_progress ? 1 : 0);
  if (!o.in_progress) {
    w.family("run_exit_code", "gauge",
             "Exit code of the last run (0 ok, 1 violation, 3 harness failure, 4 inconclusive).");
    w.sample("run_exit_code", {{"subject", subject}}, o.exit_code);
  }
  // Runs that have not finished, or not succeeded, repeat what the file said.
  std::optional<double> finished = o.in_progress ? o.previous_run : std::optional<double>(o.now_s);
  if (finished) {
    w.family("last_run_timestamp_seconds", "gauge", "Unix time the last run finished.");
    w.sample("last_run_timestamp_seconds", {{"subject", subject}}, *finished);
  }
  std::optional<double> success =
      !o.in_progress && o.exit_code == 0 ? std::optional<double>(o.now_s) : o.previous_success;
  if (success) {
    w.family("last_success_timestamp_seconds", "gauge",
             "Unix time a run last finished with exit code 0.");
    w.sample("last_success_timestamp_seconds", {{"subject", subject}}, *success);
  }
  return w.take();
}

std::optional<double> read_metric(const std::string& path, const std::string& name,
                                  const std::string& subject) {
  std::ifstream f(path);
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

bool write(const harness::RunResult& r, const std::string& path, MetricsOptions o,
           std::string* err) {
  o.now_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  o.previous_success = read_metric(path, "shmstress_last_success_timestamp_seconds", r.subject);
  o.previous_run = read_metric(path, "shmstress_last_run_timestamp_seconds", r.subject);
  return write_file_atomic(path, metrics_text(r, o), err);
}

}  // namespace

bool write_metrics(const harness::RunResult& r, const std::string& path, int exit_code,
                   std::string* err) {
  MetricsOptions o;
  o.exit_code = exit_code;
  return write(r, path, o, err);
}

bool write_metrics_live(const harness::RunResult& r, const std::string& path, std::string* err) {
  MetricsOptions o;
  o.in_progress = true;
  return write(r, path, o, err);
}

}  // namespace reports
