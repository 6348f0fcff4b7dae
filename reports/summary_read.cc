// A run read back from its summary.json: what `merge` adds the shards of a
// nightly up from, and what `shrink` updates. It reads the counters as the
// run kept them (the "tally" object), the buckets, the baseline the run
// classified them with, and the listed failing trials; every value is checked
// once, here, and an error names the key.
#include <cstdint>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "harness/known.h"
#include "reports/reports.h"
#include "reports/summary_read.h"

namespace reports {
namespace {

using Json = nlohmann::json;

struct Bad : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const char* kind_of(const Json& j) { return j.type_name(); }

// A count no run reaches (2^40: a trial a microsecond for twelve days, a
// million times over). Every count is at most this, so the sums of up to
// 100000 shards (run --shard's limit) fit in 64 bits: merge never overflows.
constexpr std::uint64_t kMaxCount = std::uint64_t{1} << 40;
constexpr int kMaxShards = 100000;

// Keys whose unsigned value is a seed (any 64-bit value), not a count.
bool is_seed_key(const std::string& key) { return key == "seed" || key == "run_seed" || key == "example_seed"; }

std::uint64_t count_value(std::uint64_t v, const std::string& where) {
  if (v > kMaxCount) throw Bad(where + " = " + std::to_string(v) + " is past any run's count (at most 2^40)");
  return v;
}

// o[key] as T, or Bad naming where.key. Integers must fit T (a trial index
// past 2^31 is refused, never wrapped); unsigned counts are at most kMaxCount.
template <class T>
T need(const Json& o, const std::string& key, const std::string& where) {
  if (!o.is_object() || !o.contains(key)) throw Bad(where + "." + key + " is missing");
  const Json& v = o[key];
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (v.is_number_integer()) {
      const bool fits = v.is_number_unsigned()
                            ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())
                            : v.get<std::int64_t>() >= static_cast<std::int64_t>(std::numeric_limits<T>::min()) &&
                                  (std::is_unsigned_v<T> ||
                                   v.get<std::int64_t>() <= static_cast<std::int64_t>(std::numeric_limits<T>::max()));
      if (!fits) throw Bad(where + "." + key + " = " + v.dump() + " is out of range");
      if constexpr (std::is_unsigned_v<T>) {
        if (v.is_number_unsigned() && !is_seed_key(key)) (void)count_value(v.get<std::uint64_t>(), where + "." + key);
      }
    }
  }
  try {
    if constexpr (std::is_same_v<T, std::string>) {
      if (!v.is_string()) throw Bad("");
    } else if constexpr (std::is_same_v<T, bool>) {
      if (!v.is_boolean()) throw Bad("");
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!v.is_number()) throw Bad("");
    } else if constexpr (std::is_unsigned_v<T>) {
      if (!v.is_number_unsigned()) throw Bad("");
    } else if constexpr (std::is_integral_v<T>) {
      if (!v.is_number_integer()) throw Bad("");
    }
    return v.get<T>();
  } catch (const std::exception&) {
    throw Bad(where + "." + key + " has the wrong type (" + kind_of(v) + ")");
  }
}

template <class T>
T opt(const Json& o, const std::string& key, const std::string& where, T fallback) {
  if (!o.is_object() || !o.contains(key) || o[key].is_null()) return fallback;
  return need<T>(o, key, where);
}

const Json& object(const Json& o, const std::string& key, const std::string& where) {
  if (!o.is_object() || !o.contains(key) || !o[key].is_object())
    throw Bad(where + "." + key + " is missing or not an object");
  return o[key];
}

const Json& array(const Json& o, const std::string& key, const std::string& where) {
  static const Json empty = Json::array();
  if (!o.is_object() || !o.contains(key)) return empty;
  if (!o[key].is_array()) throw Bad(where + "." + key + " is not an array");
  return o[key];
}

harness::Verdict verdict(const std::string& s, const std::string& where) {
  if (s == "valid") return harness::Verdict::kValid;
  if (s == "unknown") return harness::Verdict::kUnknown;
  if (s == "invalid") return harness::Verdict::kInvalid;
  throw Bad(where + ": '" + s + "' is not a verdict");
}

std::optional<harness::Day> day(const Json& o, const std::string& key, const std::string& where) {
  if (!o.contains(key) || o[key].is_null()) return std::nullopt;
  auto d = harness::parse_day(need<std::string>(o, key, where));
  if (!d) throw Bad(where + "." + key + " is not a date YYYY-MM-DD");
  return d;
}

std::map<std::string, std::uint64_t> counts(const Json& o, const std::string& key, const std::string& where) {
  std::map<std::string, std::uint64_t> out;
  for (const auto& [k, v] : object(o, key, where).items()) {
    if (!v.is_number_unsigned()) throw Bad(where + "." + key + "." + k + " is not a count");
    out[k] = count_value(v.get<std::uint64_t>(), where + "." + key + "." + k);
  }
  return out;
}

// A trial index: an int >= 0.
int trial_index(const Json& o, const std::string& key, const std::string& where) {
  const int v = need<int>(o, key, where);
  if (v < 0) throw Bad(where + "." + key + " = " + std::to_string(v) + " is not a trial index");
  return v;
}

harness::LatencyClasses classes(const Json& o, const std::string& key, const std::string& where) {
  const Json& c = object(o, key, where);
  harness::LatencyClasses l;
  const std::string w = where + "." + key;
  l.counts = need<std::vector<std::uint64_t>>(c, "counts", w);
  for (auto n : l.counts) (void)count_value(n, w + ".counts");
  if (!l.counts.empty() && l.counts.size() != harness::latency_bounds_s().size())
    throw Bad(w + ".counts has " + std::to_string(l.counts.size()) + " classes, not " +
              std::to_string(harness::latency_bounds_s().size()));
  l.count = need<std::uint64_t>(c, "count", w);
  l.sum_s = need<double>(c, "sum_s", w);
  return l;
}

harness::QuantileSketch sketch(const Json& o, const std::string& key, const std::string& where) {
  const Json& j = object(o, key, where);
  const std::string w = where + "." + key;
  harness::QuantileSketch::State s;
  s.count = need<std::uint64_t>(j, "count", w);
  s.min = need<double>(j, "min", w);
  s.max = need<double>(j, "max", w);
  if (j.contains("exact")) s.exact = need<std::vector<double>>(j, "exact", w);
  s.zeros = opt<std::uint64_t>(j, "zeros", w, 0);
  if (j.contains("buckets")) s.buckets = need<std::vector<std::pair<int, std::uint64_t>>>(j, "buckets", w);
  for (const auto& [index, n] : s.buckets) (void)count_value(n, w + ".buckets");
  auto q = harness::QuantileSketch::from_state(s);
  if (!q) throw Bad(w + " is not a consistent quantile sketch");
  return *q;
}

harness::RunTally tally(const Json& j, std::shared_ptr<const harness::Baseline> baseline) {
  const std::string w = "tally";
  const Json& tot = object(j, "totals", w);
  harness::RunTally::Totals t;
  t.trials = need<std::uint64_t>(tot, "trials", w + ".totals");
  t.failing = need<std::uint64_t>(tot, "failing", w + ".totals");
  t.harness_errors = need<std::uint64_t>(tot, "harness_errors", w + ".totals");
  t.not_valid_checks = need<std::uint64_t>(tot, "not_valid_checks", w + ".totals");
  t.new_violating = need<std::uint64_t>(tot, "new_violating", w + ".totals");
  t.verdict = verdict(need<std::string>(tot, "verdict", w + ".totals"), w + ".totals.verdict");
  t.residual = verdict(need<std::string>(tot, "residual_verdict", w + ".totals"), w + ".totals.residual_verdict");
  std::map<std::string, harness::ScenarioTally> scenarios;
  for (const auto& [name, s] : object(j, "scenarios", w).items()) {
    const std::string ws = w + ".scenarios." + name;
    harness::ScenarioTally st;
    st.file = need<std::string>(s, "file", ws);
    st.trials = need<std::uint64_t>(s, "trials", ws);
    st.violating = need<std::uint64_t>(s, "violating", ws);
    st.unavailable = need<std::uint64_t>(s, "unavailable", ws);
    st.harness_errors = need<std::uint64_t>(s, "harness_errors", ws);
    st.seconds = need<double>(s, "seconds", ws);
    for (const auto& [inv, c] : object(s, "invariants", ws).items()) {
      const std::string wi = ws + ".invariants." + inv;
      harness::InvariantTally it;
      it.invalid = need<std::uint64_t>(c, "invalid", wi);
      it.unknown = need<std::uint64_t>(c, "unknown", wi);
      it.invalid_new = need<std::uint64_t>(c, "invalid_new", wi);
      it.invalid_known = need<std::uint64_t>(c, "invalid_known", wi);
      it.worst = verdict(need<std::string>(c, "worst", wi), wi + ".worst");
      it.excused = opt<std::string>(c, "excused", wi, "");
      if (it.excused.empty() && it.invalid_new + it.invalid_known != it.invalid) throw Bad(wi + ": invalid_new + invalid_known != invalid");
      st.invariants[inv] = it;
    }
    st.faults = counts(s, "faults", ws);
    st.reached = counts(s, "reached", ws);
    st.acquire = classes(s, "acquire", ws);
    st.barrier = classes(s, "barrier", ws);
    st.recovery = classes(s, "recovery", ws);
    st.first_unavailable = need<std::string>(s, "first_unavailable", ws);
    st.last_unavailable = need<std::string>(s, "last_unavailable", ws);
    st.first_harness_error = need<std::string>(s, "first_harness_error", ws);
    st.history_error_trials = opt<std::uint64_t>(s, "history_error_trials", ws, 0);
    st.first_history_error = opt<std::string>(s, "first_history_error", ws, "");
    st.expected = opt<std::string>(s, "expected", ws, "");
    st.expect_met = opt<std::uint64_t>(s, "expect_met", ws, 0);
    st.expect_no_evidence = opt<std::uint64_t>(s, "expect_no_evidence", ws, 0);
    st.expect_other = opt<std::uint64_t>(s, "expect_other", ws, 0);
    scenarios[name] = std::move(st);
  }
  const Json& sk = object(j, "sketches", w);
  harness::BucketTally buckets;
  buckets.set_baseline(std::move(baseline));
  buckets.add_overflow(need<std::uint64_t>(j, "buckets_overflow", w));
  for (const auto& fp : need<std::vector<std::string>>(j, "known_seen", w)) buckets.add_known_seen(fp);
  return harness::RunTally(t, std::move(scenarios), sketch(sk, "acquire", w + ".sketches"),
                           sketch(sk, "barrier", w + ".sketches"), sketch(sk, "recovery", w + ".sketches"),
                           std::move(buckets));
}

harness::KnownFailure known(const Json& k, const std::string& where) {
  harness::KnownFailure f;
  f.fingerprint = need<std::string>(k, "fingerprint", where);
  f.reason = need<std::string>(k, "reason", where);
  f.expires = day(k, "expires", where);
  return f;
}

}  // namespace

std::optional<harness::RunResult> read_summary(const nlohmann::json& j, std::string* err) {
  try {
    if (!j.is_object()) throw Bad("not a JSON object");
    if (!j.contains("tally"))
      throw Bad("no \"tally\": written by a shmstress from before `merge` (run the shard again)");
    harness::RunResult r;
    const std::string w = "summary";
    r.run_id = need<std::string>(j, "run_id", w);
    r.seed = need<std::uint64_t>(j, "seed", w);
    r.subject = need<std::string>(j, "subject", w);
    r.elapsed = need<double>(j, "elapsed_s", w);
    r.interrupted = need<bool>(j, "interrupted", w);
    const std::string shard = need<std::string>(j, "shard", w);
    int i = -1, n = 0;
    char extra;
    if (std::sscanf(shard.c_str(), "%d/%d%c", &i, &n, &extra) != 2 || n < 1 || i < 0 || i >= n)
      throw Bad("summary.shard '" + shard + "' is not i/n");
    if (n > kMaxShards) throw Bad("summary.shard '" + shard + "': more than " + std::to_string(kMaxShards) + " shards");
    r.shard_index = i;
    r.shard_count = n;
    r.out_dir = opt<std::string>(j, "out_dir", w, "");
    r.max_listed = opt<std::size_t>(j, "max_kept", w, 0);
    r.planned = opt<std::int64_t>(j, "planned", w, -1);
    if (r.planned < -1 || r.planned > static_cast<std::int64_t>(kMaxCount))
      throw Bad("summary.planned = " + std::to_string(r.planned) + " is out of range");
    r.duration_s = opt<double>(j, "duration_s", w, 0.0);
    if (j.contains("expect_reached"))
      r.expect_reached = need<std::map<std::string, std::vector<std::string>>>(j, "expect_reached", w);
    if (j.contains("concurrency")) {
      const Json& c = object(j, "concurrency", w);
      const std::string wc = w + ".concurrency";
      r.concurrency.adaptive = opt<bool>(c, "adaptive", wc, false);
      r.concurrency.now = opt<int>(c, "last", wc, 0);
      r.concurrency.lowest = opt<int>(c, "lowest", wc, 0);
      r.concurrency.highest = opt<int>(c, "highest", wc, 0);
      r.concurrency.backoffs = opt<int>(c, "backoffs", wc, 0);
      r.concurrency.mean = opt<double>(c, "mean", wc, 0.0);
    }
    // The baseline the run classified its buckets with.
    std::shared_ptr<harness::Baseline> baseline;
    if (j.contains("baseline") && !j["baseline"].is_null()) {
      const Json& b = object(j, "baseline", w);
      baseline = std::make_shared<harness::Baseline>();
      baseline->file = need<std::string>(b, "file", w + ".baseline");
      const Json& entries = array(b, "entries", w + ".baseline");
      for (std::size_t k = 0; k < entries.size(); ++k) {
        auto f = known(entries[k], w + ".baseline.entries[" + std::to_string(k) + "]");
        std::string fp = f.fingerprint;
        baseline->known.emplace(std::move(fp), std::move(f));
      }
      const Json& expired = array(b, "expired", w + ".baseline");
      for (std::size_t k = 0; k < expired.size(); ++k)
        baseline->expired.push_back(known(expired[k], w + ".baseline.expired[" + std::to_string(k) + "]"));
    }
    r.tally = tally(object(j, "tally", w), baseline);
    const Json& buckets = array(j, "buckets", w);
    for (std::size_t k = 0; k < buckets.size(); ++k) {
      const Json& b = buckets[k];
      const std::string wb = w + ".buckets[" + std::to_string(k) + "]";
      harness::Bucket x;
      x.fingerprint = need<std::string>(b, "fingerprint", wb);
      const std::string status = need<std::string>(b, "status", wb);
      if (status != "new" && status != "known") throw Bad(wb + ".status '" + status + "' is not new or known");
      x.known = status == "known";
      x.invariant = need<std::string>(b, "invariant", wb);
      x.scenario = need<std::string>(b, "scenario", wb);
      x.trials = need<std::uint64_t>(b, "trials", wb);
      x.first_trial = trial_index(b, "first_trial", wb);
      x.last_trial = trial_index(b, "last_trial", wb);
      x.shape = need<std::string>(b, "shape", wb);
      x.example_problem = need<std::string>(b, "problem", wb);
      x.example_trial = trial_index(b, "example_trial", wb);
      x.example_seed = need<std::uint64_t>(b, "example_seed", wb);
      x.example_dir = need<std::string>(b, "trial_dir", wb);
      x.reproduce = need<std::string>(b, "reproduce", wb);
      x.known_reason = opt<std::string>(b, "known_reason", wb, "");
      x.known_expires = day(b, "known_expires", wb);
      x.shrunk = opt<std::string>(b, "shrunk", wb, "");
      r.tally.buckets().merge(x, false);
    }
    // The listed failing trials, one TrialResult per (scenario, trial), in
    // the order they first appear.
    std::map<std::pair<std::string, int>, std::size_t> at;
    auto trial_of = [&](const Json& e, const std::string& we) -> harness::TrialResult& {
      const auto key = std::make_pair(need<std::string>(e, "scenario", we), trial_index(e, "trial", we));
      auto it = at.find(key);
      if (it == at.end()) {
        harness::TrialResult t;
        t.scenario = key.first;
        t.trial = key.second;
        t.run_seed = r.seed;
        it = at.emplace(key, r.listed.size()).first;
        r.listed.push_back(std::move(t));
      }
      return r.listed[it->second];
    };
    for (const char* key : {"violations", "unknown"}) {
      const Json& list = array(j, key, w);
      for (std::size_t k = 0; k < list.size(); ++k) {
        const std::string we = w + "." + key + "[" + std::to_string(k) + "]";
        const Json& e = list[k];
        harness::TrialResult& t = trial_of(e, we);
        t.seed = need<std::uint64_t>(e, "seed", we);
        t.run_seed = need<std::uint64_t>(e, "run_seed", we);
        t.dir = need<std::string>(e, "trial_dir", we);
        t.kept = !t.dir.empty();
        t.reproduce = need<std::string>(e, "reproduce", we);
        harness::CheckResult c;
        c.invariant = need<std::string>(e, "invariant", we);
        c.verdict = std::string(key) == "violations" ? harness::Verdict::kInvalid : harness::Verdict::kUnknown;
        c.problems = need<std::vector<std::string>>(e, "problems", we);
        t.verdict = harness::compose(t.verdict, c.verdict);
        t.checks.push_back(std::move(c));
      }
    }
    const Json& skipped = array(j, "skipped", w);
    for (std::size_t k = 0; k < skipped.size(); ++k) {
      const std::string we = w + ".skipped[" + std::to_string(k) + "]";
      harness::TrialResult& t = trial_of(skipped[k], we);
      t.unavailable = need<std::string>(skipped[k], "reason", we);
      t.verdict = harness::compose(t.verdict, harness::Verdict::kUnknown);
    }
    const Json& errors = array(j, "harness_errors", w);
    for (std::size_t k = 0; k < errors.size(); ++k) {
      const std::string we = w + ".harness_errors[" + std::to_string(k) + "]";
      harness::TrialResult& t = trial_of(errors[k], we);
      t.harness_error = true;
      t.harness_error_text = need<std::string>(errors[k], "message", we);
      if (t.dir.empty()) t.dir = need<std::string>(errors[k], "trial_dir", we);
      t.kept = !t.dir.empty();
      t.verdict = harness::compose(t.verdict, harness::Verdict::kUnknown);
    }
    // Trials whose events did not fit the protocol (absent when none did).
    if (j.contains("history_errors")) {
      const Json& history = array(j, "history_errors", w);
      for (std::size_t k = 0; k < history.size(); ++k) {
        const std::string we = w + ".history_errors[" + std::to_string(k) + "]";
        harness::TrialResult& t = trial_of(history[k], we);
        t.history_error_count = need<std::size_t>(history[k], "count", we);
        t.history_errors = need<std::vector<std::string>>(history[k], "errors", we);
        if (t.dir.empty()) t.dir = need<std::string>(history[k], "trial_dir", we);
        if (t.reproduce.empty()) t.reproduce = need<std::string>(history[k], "reproduce", we);
        t.kept = !t.dir.empty();
        t.verdict = harness::compose(t.verdict, harness::Verdict::kUnknown);
      }
    }
    for (auto& t : r.listed) {
      if (auto it = r.tally.scenarios().find(t.scenario); it != r.tally.scenarios().end())
        t.scenario_file = it->second.file;
    }
    return r;
  } catch (const Bad& e) {
    *err = e.what();
    return std::nullopt;
  } catch (const std::exception& e) {  // nlohmann on a value it cannot convert
    *err = e.what();
    return std::nullopt;
  }
}

}  // namespace reports
