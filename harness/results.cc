#include "results.h"

#include <algorithm>
#include <cmath>

namespace harness {
namespace {

// Bucket i of a QuantileSketch holds (gamma^(i-1), gamma^i]; its
// representative value 2 gamma^i / (gamma + 1) is within kRelativeError of
// every value in it.
constexpr double kGamma =
    (1 + QuantileSketch::kRelativeError) / (1 - QuantileSketch::kRelativeError);
const double kLogGamma = std::log(kGamma);
// Below this a value counts as 0; above it as this (the range a latency in ms
// can take, so the buckets stay bounded whatever a subject reports).
constexpr double kSmallest = 1e-9, kLargest = 1e12;

int index_of(double v) {
  return static_cast<int>(std::ceil(std::log(std::min(v, kLargest)) / kLogGamma));
}
double value_of(int index) { return 2 * std::pow(kGamma, index) / (kGamma + 1); }

std::size_t nearest_rank(double p, std::uint64_t n) {
  return std::min<std::size_t>(n - 1,
                               static_cast<std::size_t>(p * static_cast<double>(n - 1) + 0.5));
}

}  // namespace

const std::vector<double>& latency_bounds_s() {
  static const std::vector<double> b = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                        0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  return b;
}

void LatencyClasses::add_ms(double ms) {
  const double seconds = ms / 1000;
  const auto& bounds = latency_bounds_s();
  if (counts.empty()) counts.assign(bounds.size(), 0);
  // The first bound that holds it; past the last one only `count` does.
  auto it = std::lower_bound(bounds.begin(), bounds.end(), seconds);
  if (it != bounds.end()) ++counts[static_cast<std::size_t>(it - bounds.begin())];
  ++count;
  sum_s += seconds;
}

void QuantileSketch::add(double v) {
  if (std::isnan(v)) return;
  min_ = count_ == 0 ? v : std::min(min_, v);
  max_ = count_ == 0 ? v : std::max(max_, v);
  ++count_;
  if (exact()) {
    if (exact_.size() < kExact) {
      exact_.push_back(v);
      return;
    }
    for (double x : exact_) bucket(x, 1);
    std::vector<double>().swap(exact_);  // give the memory back
  }
  bucket(v, 1);
}

void QuantileSketch::bucket(double v, std::uint64_t n) {
  if (v <= kSmallest) {
    zeros_ += n;
    return;
  }
  // Every bucket of the range at once: a fixed size from the first bucketed
  // value on, whatever values come later.
  static const int first = index_of(kSmallest * (1 + kRelativeError)), last = index_of(kLargest);
  if (buckets_.empty()) {
    first_index_ = first;
    buckets_.assign(static_cast<std::size_t>(last - first + 1), 0);
  }
  buckets_[static_cast<std::size_t>(std::clamp(index_of(v), first, last) - first)] += n;
}

double QuantileSketch::quantile(double p) const {
  if (count_ == 0) return 0;
  const std::size_t k = nearest_rank(p, count_);
  if (exact()) {
    std::vector<double> v = exact_;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return v[k];
  }
  double at = max_;
  std::uint64_t seen = 0;
  for_each([&](double value, std::uint64_t n) {
    if (seen <= k && k < seen + n) at = value;
    seen += n;
  });
  return std::clamp(at, min_, max_);
}

void QuantileSketch::for_each(const std::function<void(double value, std::uint64_t n)>& fn) const {
  if (exact()) {
    std::vector<double> v = exact_;
    std::sort(v.begin(), v.end());
    for (double x : v) fn(x, 1);
    return;
  }
  if (zeros_ > 0) fn(std::clamp(0.0, min_, max_), zeros_);  // values <= kSmallest
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    if (buckets_[i] > 0)
      fn(std::clamp(value_of(first_index_ + static_cast<int>(i)), min_, max_), buckets_[i]);
  }
}

const char* expectation_name(Expectation e) {
  switch (e) {
    case Expectation::kNone:
      return "none";
    case Expectation::kMet:
      return "met";
    case Expectation::kNoEvidence:
      return "no-evidence";
    case Expectation::kOther:
      return "other";
    case Expectation::kClean:
      return "clean";
  }
  return "none";
}

void RunTally::add(const TrialResult& t) {
  ++trials_;
  failing_ += t.failing() ? 1 : 0;
  harness_errors_ += t.harness_error ? 1 : 0;
  verdict_ = compose(verdict_, t.verdict);
  ScenarioTally& s = scenarios_[t.scenario];
  if (s.trials++ == 0) s.file = t.scenario_file;
  s.violating += t.verdict == Verdict::kInvalid ? 1 : 0;
  if (!t.unavailable.empty()) {
    if (s.unavailable++ == 0) s.first_unavailable = t.unavailable;
    s.last_unavailable = t.unavailable;
  }
  if (t.harness_error && s.harness_errors++ == 0) s.first_harness_error = t.harness_error_text;
  s.seconds += t.seconds;
  for (const auto& c : t.checks) {
    InvariantTally& cell = s.invariants[c.invariant];
    cell.invalid += c.verdict == Verdict::kInvalid ? 1 : 0;
    cell.unknown += c.verdict == Verdict::kUnknown ? 1 : 0;
    cell.worst = compose(cell.worst, c.verdict);
    if (!c.excused.empty()) cell.excused = c.excused;
    not_valid_checks_ += c.verdict != Verdict::kValid && c.excused.empty() ? 1 : 0;
  }
  if (t.history_error_count > 0 && s.history_error_trials++ == 0 && !t.history_errors.empty()) {
    s.first_history_error = t.history_errors.front();
  }
  if (t.expectation != Expectation::kNone) {
    if (s.expected.empty()) s.expected = t.expected;
    s.expect_met += t.expectation == Expectation::kMet ? 1 : 0;
    s.expect_no_evidence += t.expectation == Expectation::kNoEvidence ? 1 : 0;
    s.expect_other += t.expectation == Expectation::kOther ? 1 : 0;
  }
  for (const auto& [kind, n] : t.faults) s.faults[kind] += static_cast<std::uint64_t>(n);
  for (const auto& state : t.reached) ++s.reached[state];
  for (double ms : t.acquire_ms) s.acquire.add_ms(ms), acquire_.add(ms);
  for (double ms : t.barrier_ms) s.barrier.add_ms(ms), barrier_.add(ms);
  for (double ms : t.recovery_ms) s.recovery.add_ms(ms), recovery_.add(ms);
}

std::map<std::string, std::uint64_t> RunTally::faults() const {
  std::map<std::string, std::uint64_t> out;
  for (const auto& [name, s] : scenarios_) {
    for (const auto& [k, n] : s.faults) out[k] += n;
  }
  return out;
}

std::map<std::string, std::uint64_t> RunTally::reached() const {
  std::map<std::string, std::uint64_t> out;
  for (const auto& [name, s] : scenarios_) {
    for (const auto& [k, n] : s.reached) out[k] += n;
  }
  return out;
}

std::size_t RunTally::footprint() const {
  std::size_t n = acquire_.footprint() + barrier_.footprint() + recovery_.footprint();
  for (const auto& [name, s] : scenarios_) {
    n += 1 + s.invariants.size() + s.faults.size() + s.reached.size() + s.acquire.counts.size() +
         s.barrier.counts.size() + s.recovery.counts.size();
  }
  return n;
}

void RunResult::add(TrialResult t) {
  tally.add(t);
  if (!t.failing() || (max_listed > 0 && listed.size() >= max_listed)) return;
  // The samples are in the tally; a listed trial keeps what reports print.
  std::vector<double>().swap(t.acquire_ms);
  std::vector<double>().swap(t.barrier_ms);
  std::vector<double>().swap(t.recovery_ms);
  listed.push_back(std::move(t));
}

std::vector<std::string> RunResult::missing_reached() const {
  std::vector<std::string> out;
  for (const auto& [scenario, states] : expect_reached) {
    auto it = tally.scenarios().find(scenario);
    for (const auto& s : states) {
      if (it == tally.scenarios().end() || !it->second.reached.contains(s))
        out.push_back(scenario + ": " + s);
    }
  }
  return out;
}

int RunResult::exit_code() const {
  Verdict v = verdict();
  if (v == Verdict::kInvalid) return 1;
  if (harness_failed()) return 3;
  if (v == Verdict::kUnknown || !missing_reached().empty() || interrupted) return 4;
  return 0;
}

}  // namespace harness
