#include "results.h"

#include <algorithm>
#include <cmath>

#include "triage.h"

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


QuantileSketch::State QuantileSketch::state() const {
  State s;
  s.count = count_;
  s.min = min_;
  s.max = max_;
  s.exact = exact_;
  s.zeros = zeros_;
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    if (buckets_[i] > 0) s.buckets.emplace_back(first_index_ + static_cast<int>(i), buckets_[i]);
  }
  return s;
}

std::optional<QuantileSketch> QuantileSketch::from_state(const State& s) {
  static const int first = index_of(kSmallest * (1 + kRelativeError)), last = index_of(kLargest);
  QuantileSketch q;
  std::uint64_t held = s.zeros;
  for (std::size_t i = 0; i < s.buckets.size(); ++i) {
    const auto [index, n] = s.buckets[i];
    if (index < first || index > last || n == 0) return std::nullopt;
    if (i > 0 && index <= s.buckets[i - 1].first) return std::nullopt;
    held += n;
  }
  const bool exact = s.buckets.empty() && s.zeros == 0;
  if (exact ? (s.exact.size() != s.count || s.count > kExact)
            : (!s.exact.empty() || held != s.count)) {
    return std::nullopt;
  }
  if (s.count > 0 && !(s.min <= s.max)) return std::nullopt;
  for (double v : s.exact) {
    if (std::isnan(v) || v < s.min || v > s.max) return std::nullopt;
  }
  q.count_ = s.count;
  q.min_ = s.min;
  q.max_ = s.max;
  q.exact_ = s.exact;
  q.zeros_ = s.zeros;
  for (const auto& [index, n] : s.buckets) {
    if (q.buckets_.empty()) {
      q.first_index_ = first;
      q.buckets_.assign(static_cast<std::size_t>(last - first + 1), 0);
    }
    q.buckets_[static_cast<std::size_t>(index - first)] += n;
  }
  return q;
}

void QuantileSketch::merge(const QuantileSketch& o) {
  if (o.count_ == 0) return;
  if (count_ == 0) {
    *this = o;
    return;
  }
  min_ = std::min(min_, o.min_);
  max_ = std::max(max_, o.max_);
  count_ += o.count_;
  if (exact() && o.exact() && exact_.size() + o.exact_.size() <= kExact) {
    exact_.insert(exact_.end(), o.exact_.begin(), o.exact_.end());
    return;
  }
  if (exact()) {
    std::vector<double> mine;
    mine.swap(exact_);
    for (double x : mine) bucket(x, 1);
  }
  for (double x : o.exact_) bucket(x, 1);
  if (o.zeros_ > 0) zeros_ += o.zeros_;
  for (std::size_t i = 0; i < o.buckets_.size(); ++i) {
    if (o.buckets_[i] == 0) continue;
    if (buckets_.empty()) {
      first_index_ = o.first_index_;
      buckets_.assign(o.buckets_.size(), 0);
    }
    buckets_[i] += o.buckets_[i];
  }
}

void BucketTally::classify(Bucket& b) const {
  const KnownFailure* k = baseline_ ? baseline_->find(b.fingerprint) : nullptr;
  b.known = k != nullptr;
  b.known_reason = k ? k->reason : "";
  b.known_expires = k ? k->expires : std::nullopt;
}

bool BucketTally::add(const TrialResult& t, const CheckResult& c) {
  bool any_new = false;
  const auto fps = violation_fingerprints(t.scenario, c);
  for (const auto& fp : fps) {
    const KnownFailure* k = baseline_ ? baseline_->find(fp.id) : nullptr;
    any_new |= k == nullptr;
    if (k) known_seen_.insert(fp.id);
    auto it = buckets_.find(fp.id);
    if (it == buckets_.end()) {
      if (buckets_.size() >= kMaxBuckets) {
        ++overflow_;
        continue;
      }
      Bucket b;
      b.fingerprint = fp.id;
      b.invariant = c.invariant;
      b.scenario = t.scenario;
      b.shape = fp.shape;
      b.first_trial = b.last_trial = b.example_trial = t.trial;
      b.example_seed = t.seed;
      for (const auto& p : c.problems) {
        if (problem_shape(p) == fp.shape) {
          b.example_problem = p;
          break;
        }
      }
      if (c.problems.empty()) b.example_problem = fp.shape;
      b.example_dir = t.dir;
      b.reproduce = t.reproduce;
      classify(b);
      it = buckets_.emplace(fp.id, std::move(b)).first;
    }
    Bucket& b = it->second;
    ++b.trials;
    b.first_trial = std::min(b.first_trial, t.trial);
    b.last_trial = std::max(b.last_trial, t.trial);
  }
  return any_new;
}

void BucketTally::merge(const Bucket& in, bool reclassify) {
  auto it = buckets_.find(in.fingerprint);
  if (it == buckets_.end()) {
    if (buckets_.size() >= kMaxBuckets) {
      overflow_ += in.trials;
      return;
    }
    Bucket b = in;
    if (reclassify) classify(b);
    if (b.known) known_seen_.insert(b.fingerprint);
    buckets_.emplace(b.fingerprint, std::move(b));
    return;
  }
  Bucket& b = it->second;
  b.trials += in.trials;
  b.first_trial = std::min(b.first_trial, in.first_trial);
  b.last_trial = std::max(b.last_trial, in.last_trial);
  if (in.example_trial < b.example_trial) {
    b.example_trial = in.example_trial;
    b.example_seed = in.example_seed;
    b.example_problem = in.example_problem;
    b.example_dir = in.example_dir;
    b.reproduce = in.reproduce;
  }
  if (b.shrunk.empty()) b.shrunk = in.shrunk;
}

void BucketTally::reclassify() {
  known_seen_.clear();
  for (auto& [fp, b] : buckets_) {
    classify(b);
    if (b.known) known_seen_.insert(fp);
  }
}

void RunTally::reclassify(std::shared_ptr<const Baseline> b) {
  buckets_.set_baseline(std::move(b));
  buckets_.reclassify();
  std::map<std::pair<std::string, std::string>, bool> any_new;  // (scenario, invariant)
  for (const auto& [fp, bk] : buckets_.buckets()) any_new[{bk.scenario, bk.invariant}] |= !bk.known;
  new_violating_ = 0;
  for (auto& [name, s] : scenarios_) {
    for (auto& [inv, cell] : s.invariants) {
      if (cell.invalid == 0 || !cell.excused.empty()) continue;
      auto it = any_new.find({name, inv});
      // Past the bucket cap a violation may have no bucket: count it as new.
      const bool is_new = it == any_new.end() || it->second;
      cell.invalid_new = is_new ? cell.invalid : 0;
      cell.invalid_known = is_new ? 0 : cell.invalid;
      new_violating_ += cell.invalid_new;
    }
  }
}

std::size_t BucketTally::count(bool known) const {
  std::size_t n = 0;
  for (const auto& [fp, b] : buckets_) n += b.known == known ? 1 : 0;
  return n;
}

void BucketTally::set_shrunk(const std::string& fingerprint, const std::string& file) {
  if (auto it = buckets_.find(fingerprint); it != buckets_.end()) it->second.shrunk = file;
}

RunTally::RunTally(const Totals& t, std::map<std::string, ScenarioTally> scenarios,
                   QuantileSketch acquire, QuantileSketch barrier, QuantileSketch recovery,
                   BucketTally buckets)
    : trials_(t.trials),
      failing_(t.failing),
      harness_errors_(t.harness_errors),
      not_valid_checks_(t.not_valid_checks),
      new_violating_(t.new_violating),
      verdict_(t.verdict),
      residual_(t.residual),
      buckets_(std::move(buckets)),
      scenarios_(std::move(scenarios)),
      acquire_(std::move(acquire)),
      barrier_(std::move(barrier)),
      recovery_(std::move(recovery)) {}

RunTally::Totals RunTally::totals() const {
  return Totals{trials_, failing_, harness_errors_, not_valid_checks_, new_violating_, verdict_, residual_};
}

void RunTally::merge(const RunTally& o) {
  trials_ += o.trials_;
  failing_ += o.failing_;
  harness_errors_ += o.harness_errors_;
  not_valid_checks_ += o.not_valid_checks_;
  new_violating_ += o.new_violating_;
  verdict_ = compose(verdict_, o.verdict_);
  residual_ = compose(residual_, o.residual_);
  for (const auto& [name, in] : o.scenarios_) {
    ScenarioTally& s = scenarios_[name];
    if (s.file.empty()) s.file = in.file;
    s.trials += in.trials;
    s.violating += in.violating;
    s.unavailable += in.unavailable;
    s.harness_errors += in.harness_errors;
    s.seconds += in.seconds;
    for (const auto& [inv, c] : in.invariants) {
      InvariantTally& cell = s.invariants[inv];
      cell.invalid += c.invalid;
      cell.unknown += c.unknown;
      cell.invalid_new += c.invalid_new;
      cell.invalid_known += c.invalid_known;
      cell.worst = compose(cell.worst, c.worst);
      if (cell.excused.empty()) cell.excused = c.excused;
    }
    if (s.history_error_trials == 0) s.first_history_error = in.first_history_error;
    s.history_error_trials += in.history_error_trials;
    if (s.expected.empty()) s.expected = in.expected;
    s.expect_met += in.expect_met;
    s.expect_no_evidence += in.expect_no_evidence;
    s.expect_other += in.expect_other;
    for (const auto& [k, n] : in.faults) s.faults[k] += n;
    for (const auto& [k, n] : in.reached) s.reached[k] += n;
    for (auto [mine, theirs] : {std::pair{&s.acquire, &in.acquire}, std::pair{&s.barrier, &in.barrier},
                                std::pair{&s.recovery, &in.recovery}}) {
      if (theirs->counts.empty()) continue;
      if (mine->counts.empty()) mine->counts.assign(theirs->counts.size(), 0);
      for (std::size_t i = 0; i < mine->counts.size() && i < theirs->counts.size(); ++i)
        mine->counts[i] += theirs->counts[i];
      mine->count += theirs->count;
      mine->sum_s += theirs->sum_s;
    }
    if (s.first_unavailable.empty()) s.first_unavailable = in.first_unavailable;
    if (!in.last_unavailable.empty()) s.last_unavailable = in.last_unavailable;
    if (s.first_harness_error.empty()) s.first_harness_error = in.first_harness_error;
  }
  acquire_.merge(o.acquire_);
  barrier_.merge(o.barrier_);
  recovery_.merge(o.recovery_);
  for (const auto& [fp, b] : o.buckets_.buckets()) buckets_.merge(b, false);
  buckets_.add_overflow(o.buckets_.overflow());
  for (const auto& fp : o.buckets_.known_seen()) buckets_.add_known_seen(fp);
}

bool RunTally::add(const TrialResult& t) {
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
  // What decides the exit code: a violation only counts if some problem of it
  // is in a bucket the baseline does not know (a history that does not fit the
  // protocol still leaves the trial unknown).
  Verdict residual = t.harness_error || !t.unavailable.empty() || t.history_error_count > 0
                         ? Verdict::kUnknown
                         : Verdict::kValid;
  bool any_new = false;
  for (const auto& c : t.checks) {
    InvariantTally& cell = s.invariants[c.invariant];
    cell.invalid += c.verdict == Verdict::kInvalid ? 1 : 0;
    cell.unknown += c.verdict == Verdict::kUnknown ? 1 : 0;
    cell.worst = compose(cell.worst, c.verdict);
    if (!c.excused.empty()) {  // the scenario excuses it: shown, counted toward no verdict
      cell.excused = c.excused;
      continue;
    }
    not_valid_checks_ += c.verdict != Verdict::kValid ? 1 : 0;
    if (c.verdict == Verdict::kInvalid) {
      const bool is_new = buckets_.add(t, c);
      ++(is_new ? cell.invalid_new : cell.invalid_known);
      any_new |= is_new;
    } else {
      residual = compose(residual, c.verdict);
    }
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
  residual_ = compose(residual_, residual);
  new_violating_ += any_new ? 1 : 0;
  for (const auto& [kind, n] : t.faults) s.faults[kind] += static_cast<std::uint64_t>(n);
  for (const auto& state : t.reached) ++s.reached[state];
  for (double ms : t.acquire_ms) s.acquire.add_ms(ms), acquire_.add(ms);
  for (double ms : t.barrier_ms) s.barrier.add_ms(ms), barrier_.add(ms);
  for (double ms : t.recovery_ms) s.recovery.add_ms(ms), recovery_.add(ms);
  return any_new;
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
  std::size_t n = acquire_.footprint() + barrier_.footprint() + recovery_.footprint() +
                  buckets_.buckets().size() + buckets_.known_seen().size();
  for (const auto& [name, s] : scenarios_) {
    n += 1 + s.invariants.size() + s.faults.size() + s.reached.size() + s.acquire.counts.size() +
         s.barrier.counts.size() + s.recovery.counts.size();
  }
  return n;
}

bool RunResult::add(TrialResult t) {
  const bool is_new = tally.add(t);
  if (!t.failing() || (max_listed > 0 && listed.size() >= max_listed)) return is_new;
  // The samples are in the tally; a listed trial keeps what reports print.
  std::vector<double>().swap(t.acquire_ms);
  std::vector<double>().swap(t.barrier_ms);
  std::vector<double>().swap(t.recovery_ms);
  listed.push_back(std::move(t));
  return is_new;
}

double RunResult::progress(bool finished) const {
  if (finished && !interrupted) return 1;
  double p = 0;
  if (planned > 0) {
    p = static_cast<double>(tally.trials()) / static_cast<double>(planned);
  } else if (duration_s > 0) {
    p = elapsed / duration_s;
  }
  return std::clamp(p, 0.0, 1.0);
}

std::vector<const KnownFailure*> RunResult::known_not_recurred() const {
  std::vector<const KnownFailure*> out;
  const Baseline* b = tally.buckets().baseline();
  if (!b) return out;
  for (const auto& [fp, k] : b->known) {
    auto parts = parse_fingerprint(fp);
    if (!parts || !tally.scenarios().contains(parts->scenario)) continue;
    if (!tally.buckets().known_seen().contains(fp)) out.push_back(&k);
  }
  return out;
}

std::vector<std::string> RunResult::missing_reached() const {
  std::vector<std::string> out;
  for (const auto& [scenario, states] : expect_reached) {
    auto it = tally.scenarios().find(scenario);
    for (const auto& s : states) {
      // "a|b": either state will do (a subject that refuses where another
      // proceeds reaches the same window by another door).
      bool seen = false;
      for (std::size_t at = 0; it != tally.scenarios().end() && !seen;) {
        std::size_t bar = s.find('|', at);
        seen = it->second.reached.contains(s.substr(at, bar == std::string::npos ? std::string::npos : bar - at));
        if (bar == std::string::npos) break;
        at = bar + 1;
      }
      if (!seen) out.push_back(scenario + ": " + s);
    }
  }
  return out;
}

int RunResult::exit_code() const {
  Verdict v = tally.triaged_verdict();
  if (v == Verdict::kInvalid) return 1;
  if (harness_failed()) return 3;
  if (v == Verdict::kUnknown || !missing_reached().empty() || interrupted) return 4;
  return 0;
}

}  // namespace harness
