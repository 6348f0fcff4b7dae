#include "summary.h"

#include <charconv>
#include <limits>
#include <memory>
#include <utility>

#include "files.h"
#include "stored_json.h"

namespace harness {
namespace {

using stored_json::describe;
using stored_json::Json;
using stored_json::pointer;
using stored_json::printable;

bool blank(const std::string& s) { return s.find_first_not_of(" \t\r\n\v\f") == std::string::npos; }

// Where each element of "buckets" starts and where its keys are, by line.
struct BucketLines {
  std::vector<int> start;
  std::vector<std::map<std::string, int>> keys;
  std::string top_key;

  void see(int depth, Json::parse_event_t event, const Json& parsed, int line) {
    using E = Json::parse_event_t;
    if (event == E::key && depth == 1) {
      top_key = parsed.get<std::string>();
      if (top_key == "buckets") start.clear(), keys.clear();  // a repeated key: the last one counts
    }
    if (top_key != "buckets") return;
    if (event == E::object_start && depth == 2) {
      start.push_back(line);
      keys.emplace_back();
    }
    if (event == E::key && depth == 3 && !keys.empty())
      keys.back().emplace(parsed.get<std::string>(), line);
  }

  int of(std::size_t bucket, const std::string& key) const {
    if (bucket < keys.size()) {
      if (auto it = keys[bucket].find(key); it != keys[bucket].end()) return it->second;
    }
    return bucket < start.size() ? start[bucket] : 0;
  }

  // An error inside a bucket ("/buckets/3/known_reason") gets its line.
  void place(StoredError* err) const {
    static const std::string kPrefix = "/buckets/";
    if (err == nullptr || !err->where.starts_with(kPrefix)) return;
    std::string_view rest = std::string_view(err->where).substr(kPrefix.size());
    std::size_t i = 0;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), i);
    if (ec != std::errc() || end == rest.data()) return;
    rest.remove_prefix(static_cast<std::size_t>(end - rest.data()));
    std::string key;
    if (rest.starts_with("/")) key = std::string(rest.substr(1, rest.find('/', 1) - 1));
    err->line = of(i, key);
  }
};

// Decodes one document; the first problem goes to *err (through r).
class SummaryDecoder {
  using Reader = stored_json::Reader;

 public:
  SummaryDecoder(const std::string& file, StoredError* err) : r_(file, err) {}

  bool failure(const Json& e, const std::string& at, StoredFailure* f) {
    if (!r_.is_object(e, at) || !r_.string(e, "invariant", at, false, &f->invariant) ||
        !r_.string(e, "scenario", at, false, &f->scenario) ||
        !r_.int32(e, "trial", at, false, 0, &f->trial) || !r_.u64(e, "seed", at, false, &f->seed) ||
        !r_.u64(e, "run_seed", at, false, &f->run_seed) ||
        !r_.string(e, "trial_dir", at, false, &f->trial_dir) ||
        !r_.string(e, "reproduce", at, false, &f->reproduce) ||
        !r_.strings(e, "problems", at, false, &f->problems)) {
      return false;
    }
    return true;
  }

  bool bucket(const Json& b, const std::string& at, StoredBucket* out) {
    if (!r_.is_object(b, at)) return false;
    std::optional<std::string> fp, status;
    if (!r_.string(b, "fingerprint", at, true, &fp) || !r_.string(b, "status", at, false, &status))
      return false;
    out->fingerprint = std::move(*fp);
    if (status) {
      if (*status != "new" && *status != "known") {
        return r_.fail(pointer(at, "status"), "must be \"new\" or \"known\", got " +
                                                  describe(*Reader::field(b, "status")));
      }
      out->known = *status == "known";
    }
    if (!r_.string(b, "invariant", at, false, &out->invariant) ||
        !r_.string(b, "scenario", at, false, &out->scenario) ||
        !r_.count(b, "trials", at, false, &out->trials) ||
        !r_.int32(b, "first_trial", at, false, 0, &out->first_trial) ||
        !r_.int32(b, "last_trial", at, false, 0, &out->last_trial) ||
        !r_.string(b, "shape", at, false, &out->shape) ||
        !r_.string(b, "problem", at, false, &out->problem) ||
        !r_.int32(b, "example_trial", at, false, 0, &out->example_trial) ||
        !r_.u64(b, "example_seed", at, false, &out->example_seed) ||
        !r_.string(b, "trial_dir", at, false, &out->trial_dir) ||
        !r_.string(b, "reproduce", at, false, &out->reproduce) ||
        !r_.string(b, "known_reason", at, false, &out->known_reason) ||
        !r_.day(b, "known_expires", at, &out->known_expires) ||
        !r_.string(b, "shrunk", at, false, &out->shrunk)) {
      return false;
    }
    // `shmstress baseline` writes the reason into a line that must have one.
    if (out->known_reason && blank(*out->known_reason)) {
      return r_.fail(pointer(at, "known_reason"), "must be a non-blank string");
    }
    return true;
  }

  bool known(const Json& k, const std::string& at, KnownFailure* out) {
    std::optional<std::string> fp, reason;
    if (!r_.is_object(k, at) || !r_.string(k, "fingerprint", at, true, &fp) ||
        !r_.string(k, "reason", at, true, &reason) || !r_.day(k, "expires", at, &out->expires)) {
      return false;
    }
    out->fingerprint = std::move(*fp);
    out->reason = std::move(*reason);
    return true;
  }

  bool baseline(const Json& b, const std::string& at, StoredBaseline* out) {
    std::optional<std::string> file;
    if (!r_.string(b, "file", at, true, &file)) return false;
    out->file = std::move(*file);
    for (const char* key : {"entries", "expired"}) {
      bool ok = true;
      const Json* list = r_.array(b, key, at, false, &ok);
      if (!ok) return false;
      if (list == nullptr) continue;
      auto& to = std::string_view(key) == "entries" ? out->entries : out->expired;
      for (std::size_t i = 0; i < list->size(); ++i) {
        KnownFailure k;
        if (!known((*list)[i], pointer(pointer(at, key), i), &k)) return false;
        to.push_back(std::move(k));
      }
    }
    return true;
  }

  bool counts_map(const Json& o, const char* key, const std::string& at,
                  std::map<std::string, std::uint64_t>* out) {
    bool ok = true;
    const Json* m = r_.object(o, key, at, true, &ok);
    if (m == nullptr) return false;
    const std::string w = pointer(at, key);
    for (const auto& [k, v] : m->items()) {
      std::uint64_t n = 0;
      if (!r_.count_value(v, pointer(w, k), &n)) return false;
      (*out)[k] = n;
    }
    return true;
  }

  bool classes(const Json& o, const char* key, const std::string& at, LatencyClasses* out) {
    bool ok = true;
    const Json* c = r_.object(o, key, at, true, &ok);
    if (c == nullptr) return false;
    const std::string w = pointer(at, key);
    const Json* counts = r_.array(*c, "counts", w, true, &ok);
    if (counts == nullptr) return false;
    const std::size_t want = latency_bounds_s().size();
    if (!counts->empty() && counts->size() != want) {
      return r_.fail(pointer(w, "counts"), "has " + std::to_string(counts->size()) +
                                               " classes, not " + std::to_string(want));
    }
    for (std::size_t i = 0; i < counts->size(); ++i) {
      std::uint64_t n = 0;
      if (!r_.count_value((*counts)[i], pointer(pointer(w, "counts"), i), &n)) return false;
      out->counts.push_back(n);
    }
    std::optional<std::uint64_t> count;
    std::optional<double> sum;
    if (!r_.count(*c, "count", w, true, &count) ||
        !r_.number(*c, "sum_s", w, true, -std::numeric_limits<double>::infinity(), &sum)) {
      return false;
    }
    out->count = *count;
    out->sum_s = *sum;
    return true;
  }

  bool sketch(const Json& o, const char* key, const std::string& at, QuantileSketch* out) {
    bool ok = true;
    const Json* j = r_.object(o, key, at, true, &ok);
    if (j == nullptr) return false;
    const std::string w = pointer(at, key);
    constexpr double kAny = -std::numeric_limits<double>::infinity();
    QuantileSketch::State s;
    std::optional<std::uint64_t> count, zeros;
    std::optional<double> min, max;
    if (!r_.count(*j, "count", w, true, &count) || !r_.number(*j, "min", w, true, kAny, &min) ||
        !r_.number(*j, "max", w, true, kAny, &max) || !r_.count(*j, "zeros", w, false, &zeros)) {
      return false;
    }
    s.count = *count;
    s.min = *min;
    s.max = *max;
    s.zeros = zeros.value_or(0);
    if (const Json* exact = r_.array(*j, "exact", w, false, &ok)) {
      for (std::size_t i = 0; i < exact->size(); ++i) {
        double v = 0;
        if (!r_.number_value((*exact)[i], pointer(pointer(w, "exact"), i), kAny, &v)) return false;
        s.exact.push_back(v);
      }
    }
    if (!ok) return false;
    if (const Json* buckets = r_.array(*j, "buckets", w, false, &ok)) {
      for (std::size_t i = 0; i < buckets->size(); ++i) {
        const Json& b = (*buckets)[i];
        const std::string bw = pointer(pointer(w, "buckets"), i);
        std::uint64_t n = 0;
        if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() ||
            b[0].get<std::int64_t>() < std::numeric_limits<int>::min() ||
            b[0].get<std::int64_t>() > std::numeric_limits<int>::max() ||
            (b[0].is_number_unsigned() &&
             b[0].get<std::uint64_t>() > std::numeric_limits<int>::max())) {
          return r_.fail(bw, "must be a pair [bucket index, count], got " + describe(b));
        }
        if (!r_.count_value(b[1], pointer(bw, 1), &n)) return false;
        s.buckets.emplace_back(static_cast<int>(b[0].get<std::int64_t>()), n);
      }
    }
    if (!ok) return false;
    auto q = QuantileSketch::from_state(s);
    if (!q) return r_.fail(w, "is not a consistent quantile sketch");
    *out = std::move(*q);
    return true;
  }

  bool scenario(const Json& s, const std::string& ws, ScenarioTally* st) {
    if (!r_.is_object(s, ws)) return false;
    std::optional<std::string> file, first_unavailable, last_unavailable, first_harness_error,
        first_history_error, expected;
    std::optional<std::uint64_t> trials, violating, unavailable, harness_errors,
        history_error_trials, expect_met, expect_no_evidence, expect_other;
    std::optional<double> seconds;
    if (!r_.string(s, "file", ws, true, &file) || !r_.count(s, "trials", ws, true, &trials) ||
        !r_.count(s, "violating", ws, true, &violating) ||
        !r_.count(s, "unavailable", ws, true, &unavailable) ||
        !r_.count(s, "harness_errors", ws, true, &harness_errors) ||
        !r_.number(s, "seconds", ws, true, 0.0, &seconds)) {
      return false;
    }
    st->file = *file;
    st->trials = *trials;
    st->violating = *violating;
    st->unavailable = *unavailable;
    st->harness_errors = *harness_errors;
    st->seconds = *seconds;
    bool ok = true;
    const Json* invariants = r_.object(s, "invariants", ws, true, &ok);
    if (invariants == nullptr) return false;
    for (const auto& [name, c] : invariants->items()) {
      const std::string wi = pointer(pointer(ws, "invariants"), name);
      std::optional<std::uint64_t> invalid, unknown, invalid_new, invalid_known;
      std::optional<Verdict> worst;
      std::optional<std::string> excused;
      if (!r_.is_object(c, wi) || !r_.count(c, "invalid", wi, true, &invalid) ||
          !r_.count(c, "unknown", wi, true, &unknown) ||
          !r_.count(c, "invalid_new", wi, true, &invalid_new) ||
          !r_.count(c, "invalid_known", wi, true, &invalid_known) ||
          !r_.verdict(c, "worst", wi, true, &worst) ||
          !r_.string(c, "excused", wi, false, &excused)) {
        return false;
      }
      InvariantTally it;
      it.invalid = *invalid;
      it.unknown = *unknown;
      it.invalid_new = *invalid_new;
      it.invalid_known = *invalid_known;
      it.worst = *worst;
      it.excused = excused.value_or("");
      // An excused invariant's violations are not classified.
      if (it.excused.empty() && it.invalid_new + it.invalid_known != it.invalid) {
        return r_.fail(wi, "invalid_new + invalid_known != invalid");
      }
      st->invariants[name] = std::move(it);
    }
    if (!counts_map(s, "faults", ws, &st->faults) || !counts_map(s, "reached", ws, &st->reached) ||
        !classes(s, "acquire", ws, &st->acquire) || !classes(s, "barrier", ws, &st->barrier) ||
        !classes(s, "recovery", ws, &st->recovery) ||
        !r_.string(s, "first_unavailable", ws, true, &first_unavailable) ||
        !r_.string(s, "last_unavailable", ws, true, &last_unavailable) ||
        !r_.string(s, "first_harness_error", ws, true, &first_harness_error) ||
        !r_.count(s, "history_error_trials", ws, false, &history_error_trials) ||
        !r_.string(s, "first_history_error", ws, false, &first_history_error) ||
        !r_.string(s, "expected", ws, false, &expected) ||
        !r_.count(s, "expect_met", ws, false, &expect_met) ||
        !r_.count(s, "expect_no_evidence", ws, false, &expect_no_evidence) ||
        !r_.count(s, "expect_other", ws, false, &expect_other)) {
      return false;
    }
    st->first_unavailable = *first_unavailable;
    st->last_unavailable = *last_unavailable;
    st->first_harness_error = *first_harness_error;
    st->history_error_trials = history_error_trials.value_or(0);
    st->first_history_error = first_history_error.value_or("");
    st->expected = expected.value_or("");
    st->expect_met = expect_met.value_or(0);
    st->expect_no_evidence = expect_no_evidence.value_or(0);
    st->expect_other = expect_other.value_or(0);
    return true;
  }

  bool tally(const Json& j, const std::string& w, StoredTally* out) {
    bool ok = true;
    const Json* tot = r_.object(j, "totals", w, true, &ok);
    if (tot == nullptr) return false;
    const std::string wt = pointer(w, "totals");
    std::optional<std::uint64_t> trials, failing, harness_errors, not_valid_checks, new_violating;
    std::optional<Verdict> verdict, residual;
    if (!r_.count(*tot, "trials", wt, true, &trials) ||
        !r_.count(*tot, "failing", wt, true, &failing) ||
        !r_.count(*tot, "harness_errors", wt, true, &harness_errors) ||
        !r_.count(*tot, "not_valid_checks", wt, true, &not_valid_checks) ||
        !r_.count(*tot, "new_violating", wt, true, &new_violating) ||
        !r_.verdict(*tot, "verdict", wt, true, &verdict) ||
        !r_.verdict(*tot, "residual_verdict", wt, true, &residual)) {
      return false;
    }
    out->totals = {*trials,        *failing, *harness_errors, *not_valid_checks,
                   *new_violating, *verdict, *residual};
    const Json* scenarios = r_.object(j, "scenarios", w, true, &ok);
    if (scenarios == nullptr) return false;
    for (const auto& [name, s] : scenarios->items()) {
      ScenarioTally st;
      if (!scenario(s, pointer(pointer(w, "scenarios"), name), &st)) return false;
      out->scenarios[name] = std::move(st);
    }
    const Json* sk = r_.object(j, "sketches", w, true, &ok);
    if (sk == nullptr) return false;
    const std::string wsk = pointer(w, "sketches");
    std::optional<std::uint64_t> overflow;
    std::optional<std::vector<std::string>> known_seen;
    if (!sketch(*sk, "acquire", wsk, &out->acquire) ||
        !sketch(*sk, "barrier", wsk, &out->barrier) ||
        !sketch(*sk, "recovery", wsk, &out->recovery) ||
        !r_.count(j, "buckets_overflow", w, true, &overflow) ||
        !r_.strings(j, "known_seen", w, true, &known_seen)) {
      return false;
    }
    out->buckets_overflow = *overflow;
    out->known_seen = std::move(*known_seen);
    return true;
  }

  bool shard(const Json& j, std::optional<StoredShard>* out) {
    std::optional<std::string> text;
    if (!r_.string(j, "shard", "", false, &text)) return false;
    if (!text) return true;
    // "i/n": two decimal numbers.
    const std::string_view t = *text;
    const auto slash = t.find('/');
    auto number = [](std::string_view s, int* v) {
      auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
      return !s.empty() && ec == std::errc() && end == s.data() + s.size();
    };
    int i = -1, n = 0;
    if (slash == std::string_view::npos || !number(t.substr(0, slash), &i) ||
        !number(t.substr(slash + 1), &n)) {
      return r_.fail("/shard", "\"" + printable(t) + "\" is not i/n (0 <= i < n)");
    }
    if (n > kMaxStoredShards) {
      return r_.fail("/shard", "\"" + printable(t) + "\": more than " +
                                   std::to_string(kMaxStoredShards) + " shards");
    }
    if (n < 1 || i < 0 || i >= n)
      return r_.fail("/shard", "\"" + printable(t) + "\" is not i/n (0 <= i < n)");
    *out = StoredShard{i, n};
    return true;
  }

  template <class T, class F>
  bool list(const Json& j, const char* key, std::vector<T>* out, F decode_one) {
    bool ok = true;
    const Json* a = r_.array(j, key, "", false, &ok);
    if (a == nullptr) return ok;
    out->reserve(a->size());
    for (std::size_t i = 0; i < a->size(); ++i) {
      T t;
      if (!decode_one((*a)[i], pointer(pointer("", key), i), &t)) return false;
      out->push_back(std::move(t));
    }
    return true;
  }

  bool document(std::string_view text, const std::string& file, BucketLines& lines,
                StoredSummary* s) {
    const stored_json::ParseObserver observe = [&](int depth, Json::parse_event_t event,
                                                   const Json& parsed, int line) {
      lines.see(depth, event, parsed, line);
    };
    auto j = r_.parse(text, &observe);
    if (!j) return false;
    s->file = file;
    if (!top(*j, s, lines)) return false;
    return true;
  }

  bool top(const Json& j, StoredSummary* s, const BucketLines& lines) {
    if (!r_.string(j, "run_id", "", false, &s->run_id) ||
        !r_.string(j, "subject", "", false, &s->subject) ||
        !r_.number(j, "elapsed_s", "", false, 0.0, &s->elapsed_s) ||
        !r_.u64(j, "seed", "", false, &s->seed) ||
        !r_.boolean(j, "interrupted", "", false, &s->interrupted) || !shard(j, &s->shard) ||
        !r_.string(j, "out_dir", "", false, &s->out_dir) ||
        !r_.count(j, "max_kept", "", false, &s->max_kept) ||
        !r_.integer(j, "planned", "", false, -1, static_cast<std::int64_t>(kMaxStoredCount),
                    &s->planned) ||
        !r_.number(j, "duration_s", "", false, 0.0, &s->duration_s)) {
      return false;
    }
    bool ok = true;
    if (const Json* er = r_.object(j, "expect_reached", "", false, &ok)) {
      for (const auto& [name, states] : er->items()) {
        std::vector<std::string> v;
        if (!r_.strings_value(states, pointer("/expect_reached", name), &v)) return false;
        s->expect_reached[name] = std::move(v);
      }
    }
    if (!ok) return false;
    if (const Json* c = r_.object(j, "concurrency", "", false, &ok)) {
      const std::string w = "/concurrency";
      std::optional<bool> adaptive;
      std::optional<int> now, lowest, highest, backoffs;
      std::optional<double> mean;
      if (!r_.boolean(*c, "adaptive", w, false, &adaptive) ||
          !r_.int32(*c, "last", w, false, 0, &now) ||
          !r_.int32(*c, "lowest", w, false, 0, &lowest) ||
          !r_.int32(*c, "highest", w, false, 0, &highest) ||
          !r_.int32(*c, "backoffs", w, false, 0, &backoffs) ||
          !r_.number(*c, "mean", w, false, 0.0, &mean)) {
        return false;
      }
      s->concurrency = RunResult::Concurrency{adaptive.value_or(false), now.value_or(0),
                                              lowest.value_or(0),       highest.value_or(0),
                                              backoffs.value_or(0),     mean.value_or(0.0)};
    }
    if (!ok) return false;
    if (const Json* b = Reader::field(j, "baseline"); b != nullptr && !b->is_null()) {
      StoredBaseline base;
      if (!r_.is_object(*b, "/baseline") || !baseline(*b, "/baseline", &base)) return false;
      s->baseline = std::move(base);
    }
    if (const Json* t = r_.object(j, "tally", "", false, &ok)) {
      StoredTally tally;
      if (!this->tally(*t, "/tally", &tally)) return false;
      s->tally = std::move(tally);
    }
    if (!ok) return false;
    auto one_failure = [&](const Json& e, const std::string& at, StoredFailure* f) {
      return failure(e, at, f);
    };
    if (!list(j, "violations", &s->violations, one_failure) ||
        !list(j, "unknown", &s->unknown, one_failure)) {
      return false;
    }
    if (Reader::field(j, "buckets") != nullptr) {
      std::vector<StoredBucket> buckets;
      const bool decoded = list(j, "buckets", &buckets,
                                [&](const Json& b, const std::string& at, StoredBucket* out) {
                                  return bucket(b, at, out);
                                });
      if (!decoded) return false;
      for (std::size_t i = 0; i < buckets.size(); ++i) buckets[i].line = lines.of(i, "fingerprint");
      s->buckets = std::move(buckets);
    }
    const bool rest =
        list(j, "skipped", &s->skipped,
             [&](const Json& e, const std::string& at, StoredSkipped* out) {
               std::optional<std::string> scenario, reason;
               std::optional<int> trial;
               if (!r_.is_object(e, at) || !r_.string(e, "scenario", at, true, &scenario) ||
                   !r_.int32(e, "trial", at, true, 0, &trial) ||
                   !r_.string(e, "reason", at, true, &reason)) {
                 return false;
               }
               *out = {*scenario, *trial, *reason};
               return true;
             }) &&
        list(j, "harness_errors", &s->harness_errors,
             [&](const Json& e, const std::string& at, StoredHarnessError* out) {
               std::optional<std::string> scenario, message, dir;
               std::optional<int> trial;
               if (!r_.is_object(e, at) || !r_.string(e, "scenario", at, true, &scenario) ||
                   !r_.int32(e, "trial", at, true, 0, &trial) ||
                   !r_.string(e, "message", at, true, &message) ||
                   !r_.string(e, "trial_dir", at, true, &dir)) {
                 return false;
               }
               *out = {*scenario, *trial, *message, *dir};
               return true;
             }) &&
        list(j, "history_errors", &s->history_errors,
             [&](const Json& e, const std::string& at, StoredHistoryErrors* out) {
               std::optional<std::string> scenario, dir, reproduce;
               std::optional<int> trial;
               std::optional<std::uint64_t> count;
               std::optional<std::vector<std::string>> errors;
               if (!r_.is_object(e, at) || !r_.string(e, "scenario", at, true, &scenario) ||
                   !r_.int32(e, "trial", at, true, 0, &trial) ||
                   !r_.count(e, "count", at, true, &count) ||
                   !r_.strings(e, "errors", at, true, &errors) ||
                   !r_.string(e, "trial_dir", at, true, &dir) ||
                   !r_.string(e, "reproduce", at, true, &reproduce)) {
                 return false;
               }
               *out = {*scenario, *trial, *count, std::move(*errors), *dir, *reproduce};
               return true;
             });
    return rest;
  }

 private:
  Reader r_;
};

// What run_result_of needs and the file may lack.
class Need {
 public:
  Need(const StoredSummary& s, StoredError* err) : s_(s), err_(err) {}

  template <class T>
  bool operator()(const std::optional<T>& v, const std::string& where, T* out, int line = 0) {
    if (v) {
      *out = *v;
      return true;
    }
    if (err_ != nullptr) *err_ = StoredError{s_.file, where, "is missing", line};
    return false;
  }

 private:
  const StoredSummary& s_;
  StoredError* err_;
};

}  // namespace

std::map<std::string, std::string> StoredSummary::reproduce_by_dir() const {
  std::map<std::string, std::string> out;
  for (const auto* list : {&violations, &unknown}) {
    for (const auto& v : *list) {
      // Trials past --max-kept have no dir: nothing to look up.
      if (v.trial_dir && !v.trial_dir->empty()) out[*v.trial_dir] = v.reproduce.value_or("");
    }
  }
  return out;
}

std::optional<StoredSummary> parse_summary(std::string_view text, const std::string& file,
                                           StoredError* err) {
  StoredError e;
  SummaryDecoder d(file, &e);
  StoredSummary s;
  BucketLines lines;
  if (!d.document(text, file, lines, &s)) {
    lines.place(&e);
    if (err != nullptr) *err = std::move(e);
    return std::nullopt;
  }
  return s;
}

std::optional<StoredSummary> load_summary(const std::string& path, StoredError* err) {
  auto text = read_stored(path, err);
  return text ? parse_summary(*text, path, err) : std::nullopt;
}

std::optional<RunResult> run_result_of(const StoredSummary& s, StoredError* err) {
  if (!s.tally) {
    if (err != nullptr) {
      *err = StoredError{
          s.file, "",
          "no \"tally\": written by a shmstress from before `merge` (run the shard again)"};
    }
    return std::nullopt;
  }
  Need need(s, err);
  RunResult r;
  StoredShard shard;
  if (!need(s.run_id, "/run_id", &r.run_id) || !need(s.seed, "/seed", &r.seed) ||
      !need(s.subject, "/subject", &r.subject) || !need(s.elapsed_s, "/elapsed_s", &r.elapsed) ||
      !need(s.interrupted, "/interrupted", &r.interrupted) || !need(s.shard, "/shard", &shard)) {
    return std::nullopt;
  }
  r.shard_index = shard.index;
  r.shard_count = shard.count;
  r.out_dir = s.out_dir.value_or("");
  r.max_listed = static_cast<std::size_t>(s.max_kept.value_or(0));
  r.planned = s.planned.value_or(-1);
  r.duration_s = s.duration_s.value_or(0.0);
  r.expect_reached = s.expect_reached;
  if (s.concurrency) r.concurrency = *s.concurrency;
  // The baseline the run classified its buckets with.
  std::shared_ptr<Baseline> baseline;
  if (s.baseline) {
    baseline = std::make_shared<Baseline>();
    baseline->file = s.baseline->file;
    for (const auto& k : s.baseline->entries) baseline->known.emplace(k.fingerprint, k);
    baseline->expired = s.baseline->expired;
  }
  const StoredTally& t = *s.tally;
  BucketTally buckets;
  buckets.set_baseline(std::move(baseline));
  buckets.add_overflow(t.buckets_overflow);
  for (const auto& fp : t.known_seen) buckets.add_known_seen(fp);
  r.tally = RunTally(t.totals, t.scenarios, t.acquire, t.barrier, t.recovery, std::move(buckets));
  if (s.buckets) {
    for (std::size_t k = 0; k < s.buckets->size(); ++k) {
      const StoredBucket& b = (*s.buckets)[k];
      const std::string wb = "/buckets/" + std::to_string(k);
      Bucket x;
      x.fingerprint = b.fingerprint;
      if (!need(b.known, wb + "/status", &x.known, b.line) ||
          !need(b.invariant, wb + "/invariant", &x.invariant, b.line) ||
          !need(b.scenario, wb + "/scenario", &x.scenario, b.line) ||
          !need(b.trials, wb + "/trials", &x.trials, b.line) ||
          !need(b.first_trial, wb + "/first_trial", &x.first_trial, b.line) ||
          !need(b.last_trial, wb + "/last_trial", &x.last_trial, b.line) ||
          !need(b.shape, wb + "/shape", &x.shape, b.line) ||
          !need(b.problem, wb + "/problem", &x.example_problem, b.line) ||
          !need(b.example_trial, wb + "/example_trial", &x.example_trial, b.line) ||
          !need(b.example_seed, wb + "/example_seed", &x.example_seed, b.line) ||
          !need(b.trial_dir, wb + "/trial_dir", &x.example_dir, b.line) ||
          !need(b.reproduce, wb + "/reproduce", &x.reproduce, b.line)) {
        return std::nullopt;
      }
      x.known_reason = b.known_reason.value_or("");
      x.known_expires = b.known_expires;
      x.shrunk = b.shrunk.value_or("");
      r.tally.buckets().merge(x, false);
    }
  }
  // The listed failing trials, one TrialResult per (scenario, trial), in the
  // order they first appear.
  std::map<std::pair<std::string, int>, std::size_t> at;
  auto trial_of = [&](const std::string& scenario, int trial) -> TrialResult& {
    const auto key = std::make_pair(scenario, trial);
    auto it = at.find(key);
    if (it == at.end()) {
      TrialResult t;
      t.scenario = scenario;
      t.trial = trial;
      t.run_seed = r.seed;
      it = at.emplace(key, r.listed.size()).first;
      r.listed.push_back(std::move(t));
    }
    return r.listed[it->second];
  };
  for (const auto* list : {&s.violations, &s.unknown}) {
    const bool violations = list == &s.violations;
    for (std::size_t k = 0; k < list->size(); ++k) {
      const StoredFailure& e = (*list)[k];
      const std::string we =
          std::string(violations ? "/violations/" : "/unknown/") + std::to_string(k);
      std::string scenario;
      int trial = 0;
      std::uint64_t seed = 0, run_seed = 0;
      std::string dir, reproduce;
      CheckResult c;
      if (!need(e.scenario, we + "/scenario", &scenario) || !need(e.trial, we + "/trial", &trial) ||
          !need(e.seed, we + "/seed", &seed) || !need(e.run_seed, we + "/run_seed", &run_seed) ||
          !need(e.trial_dir, we + "/trial_dir", &dir) ||
          !need(e.reproduce, we + "/reproduce", &reproduce) ||
          !need(e.invariant, we + "/invariant", &c.invariant) ||
          !need(e.problems, we + "/problems", &c.problems)) {
        return std::nullopt;
      }
      TrialResult& t = trial_of(scenario, trial);
      t.seed = seed;
      t.run_seed = run_seed;
      t.dir = std::move(dir);
      t.kept = !t.dir.empty();
      t.reproduce = std::move(reproduce);
      c.verdict = violations ? Verdict::kInvalid : Verdict::kUnknown;
      t.verdict = compose(t.verdict, c.verdict);
      t.checks.push_back(std::move(c));
    }
  }
  for (const auto& e : s.skipped) {
    TrialResult& t = trial_of(e.scenario, e.trial);
    t.unavailable = e.reason;
    t.verdict = compose(t.verdict, Verdict::kUnknown);
  }
  for (const auto& e : s.harness_errors) {
    TrialResult& t = trial_of(e.scenario, e.trial);
    t.harness_error = true;
    t.harness_error_text = e.message;
    if (t.dir.empty()) t.dir = e.trial_dir;
    t.kept = !t.dir.empty();
    t.verdict = compose(t.verdict, Verdict::kUnknown);
  }
  // Trials whose events did not fit the protocol.
  for (const auto& e : s.history_errors) {
    TrialResult& t = trial_of(e.scenario, e.trial);
    t.history_error_count = static_cast<std::size_t>(e.count);
    t.history_errors = e.errors;
    if (t.dir.empty()) t.dir = e.trial_dir;
    if (t.reproduce.empty()) t.reproduce = e.reproduce;
    t.kept = !t.dir.empty();
    t.verdict = compose(t.verdict, Verdict::kUnknown);
  }
  for (auto& t : r.listed) {
    if (auto it = r.tally.scenarios().find(t.scenario); it != r.tally.scenarios().end()) {
      t.scenario_file = it->second.file;
    }
  }
  return r;
}

}  // namespace harness
