#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "harness/triage.h"
#include "reports/reports.h"
#include "reports/throttle.h"

namespace reports {
namespace {

using Json = nlohmann::json;

Json quantiles(const harness::QuantileSketch& q) {
  if (q.count() == 0) return nullptr;
  return {{"count", q.count()}, {"p50", q.quantile(0.5)}, {"p90", q.quantile(0.9)}, {"p99", q.quantile(0.99)}, {"max", q.max()}};
}

class LiveSummary : public harness::RunSubscriber {
 public:
  void trial_finished(const harness::TrialResult&, const harness::RunResult& so_far) override {
    if (!throttle_.due(std::chrono::steady_clock::now())) return;
    (void)write_summary(
        so_far, so_far.out_dir + "/summary.json",
        harness::Durability::kUnsynced);  // the final write (by the caller) reports failures
  }

 private:
  Throttle throttle_{kLiveRewriteEvery};
};

Json expires_json(const std::optional<harness::Day>& d) {
  return d ? Json(harness::day_text(*d)) : Json(nullptr);
}

Json known_json(const harness::KnownFailure& k) {
  return {{"fingerprint", k.fingerprint}, {"reason", k.reason}, {"expires", expires_json(k.expires)}};
}

Json sketch_json(const harness::QuantileSketch& q) {
  const auto s = q.state();
  Json j = {{"count", s.count}, {"min", s.min}, {"max", s.max}};
  if (!s.buckets.empty() || s.zeros > 0) {
    j["zeros"] = s.zeros;
    j["buckets"] = s.buckets;
  } else {
    j["exact"] = s.exact;
  }
  return j;
}

Json classes_json(const harness::LatencyClasses& c) {
  return {{"counts", c.counts}, {"count", c.count}, {"sum_s", c.sum_s}};
}

// What `merge` needs to add shards up: the run's counters as they are kept
// (harness::RunTally), not as the reports above render them.
Json tally_json(const harness::RunTally& t) {
  const auto tot = t.totals();
  Json j;
  j["totals"] = {{"trials", tot.trials},
                 {"failing", tot.failing},
                 {"harness_errors", tot.harness_errors},
                 {"not_valid_checks", tot.not_valid_checks},
                 {"new_violating", tot.new_violating},
                 {"verdict", harness::verdict_name(tot.verdict)},
                 {"residual_verdict", harness::verdict_name(tot.residual)}};
  j["scenarios"] = Json::object();
  for (const auto& [name, s] : t.scenarios()) {
    Json inv = Json::object();
    for (const auto& [i, c] : s.invariants) {
      inv[i] = {{"invalid", c.invalid},         {"unknown", c.unknown},
                {"invalid_new", c.invalid_new}, {"invalid_known", c.invalid_known},
                {"worst", harness::verdict_name(c.worst)}};
      if (!c.excused.empty()) inv[i]["excused"] = c.excused;  // counted toward no verdict
    }
    j["scenarios"][name] = {{"file", s.file},
                            {"trials", s.trials},
                            {"violating", s.violating},
                            {"unavailable", s.unavailable},
                            {"harness_errors", s.harness_errors},
                            {"seconds", s.seconds},
                            {"invariants", inv},
                            {"faults", s.faults},
                            {"reached", s.reached},
                            {"acquire", classes_json(s.acquire)},
                            {"barrier", classes_json(s.barrier)},
                            {"recovery", classes_json(s.recovery)},
                            {"first_unavailable", s.first_unavailable},
                            {"last_unavailable", s.last_unavailable},
                            {"first_harness_error", s.first_harness_error},
                            {"history_error_trials", s.history_error_trials},
                            {"first_history_error", s.first_history_error},
                            {"expected", s.expected},
                            {"expect_met", s.expect_met},
                            {"expect_no_evidence", s.expect_no_evidence},
                            {"expect_other", s.expect_other}};
  }
  j["sketches"] = {{"acquire", sketch_json(t.acquire_ms())},
                   {"barrier", sketch_json(t.barrier_ms())},
                   {"recovery", sketch_json(t.recovery_ms())}};
  j["buckets_overflow"] = t.buckets().overflow();
  j["known_seen"] = t.buckets().known_seen();
  return j;
}

}  // namespace

Json bucket_json(const harness::Bucket& b) {
  Json j = {{"fingerprint", b.fingerprint},
            {"status", b.known ? "known" : "new"},
            {"invariant", b.invariant},
            {"scenario", b.scenario},
            {"trials", b.trials},
            {"first_trial", b.first_trial},
            {"last_trial", b.last_trial},
            {"shape", b.shape},
            {"problem", b.example_problem},
            {"example_trial", b.example_trial},
            {"example_seed", b.example_seed},
            {"trial_dir", b.example_dir},
            {"reproduce", b.reproduce}};
  if (b.known) {
    j["known_reason"] = b.known_reason;
    j["known_expires"] = expires_json(b.known_expires);
  }
  if (!b.shrunk.empty()) j["shrunk"] = b.shrunk;
  return j;
}

std::vector<const harness::Bucket*> buckets_in_order(const harness::RunResult& r) {
  std::vector<const harness::Bucket*> out;
  for (const auto& [fp, b] : r.tally.buckets().buckets()) out.push_back(&b);
  std::stable_sort(out.begin(), out.end(), [](const harness::Bucket* a, const harness::Bucket* b) {
    if (a->known != b->known) return !a->known;
    if (a->trials != b->trials) return a->trials > b->trials;
    return a->fingerprint < b->fingerprint;
  });
  return out;
}

Json summary_json(const harness::RunResult& r) {
  using harness::Verdict;
  using harness::verdict_name;
  Json j;
  j["run_id"] = r.run_id;
  j["seed"] = r.seed;
  j["subject"] = r.subject;
  j["verdict"] = verdict_name(r.verdict());
  j["exit_code"] = r.exit_code();
  j["interrupted"] = r.interrupted;
  j["elapsed_s"] = r.elapsed;
  j["trials"] = r.tally.trials();
  j["shard"] = std::to_string(r.shard_index) + "/" + std::to_string(r.shard_count);
  j["violations"] = Json::array();
  j["unknown"] = Json::array();
  const harness::BucketTally& bt = r.tally.buckets();
  // The listed failing trials in detail (all of them up to the --max-kept cap).
  std::uint64_t skipped = 0, harness_errors = 0;
  std::uint64_t history = 0;
  for (const auto& t : r.listed) {
    for (const auto& c : t.checks) {
      if (c.verdict == Verdict::kValid || !c.excused.empty()) continue;
      Json v = {{"invariant", c.invariant}, {"scenario", t.scenario}, {"trial", t.trial},
                {"seed", t.seed},           {"run_seed", t.run_seed}, {"trial_dir", t.dir},
                {"reproduce", t.reproduce}, {"problems", c.problems}};
      if (c.verdict == Verdict::kInvalid) {
        // Its buckets, and whether any of them is new.
        bool any_new = false;
        Json fps = Json::array();
        for (const auto& f : harness::violation_fingerprints(t.scenario, c)) {
          fps.push_back(f.id);
          any_new |= bt.baseline() == nullptr || bt.baseline()->find(f.id) == nullptr;
        }
        v["fingerprints"] = fps;
        v["status"] = any_new ? "new" : "known";
      }
      j[c.verdict == Verdict::kInvalid ? "violations" : "unknown"].push_back(std::move(v));
    }
    if (!t.unavailable.empty()) {
      ++skipped;
      j["skipped"].push_back({{"scenario", t.scenario}, {"trial", t.trial}, {"reason", t.unavailable}});
    }
    if (t.history_error_count > 0) {
      ++history;
      j["history_errors"].push_back({{"scenario", t.scenario}, {"trial", t.trial}, {"count", t.history_error_count},
                                     {"errors", t.history_errors}, {"trial_dir", t.dir}, {"reproduce", t.reproduce}});
    }
    if (t.harness_error) {
      ++harness_errors;
      j["harness_errors"].push_back({{"scenario", t.scenario}, {"trial", t.trial}, {"message", t.harness_error_text}, {"trial_dir", t.dir}});
    }
  }
  j["faults"] = r.tally.faults();
  j["reached"] = r.tally.reached();
  j["missing_reached"] = r.missing_reached();
  j["scenarios"] = Json::object();
  std::uint64_t invalid = 0, unknown = 0, unavailable = 0;
  for (const auto& [name, s] : r.tally.scenarios()) {
    unavailable += s.unavailable;
    if (s.invariants.empty()) continue;  // nothing was checked (the subject never ran)
    Json inv = Json::object(), excused = Json::object();
    for (const auto& [i, cell] : s.invariants) {
      if (!cell.excused.empty()) {  // shown, counted nowhere
        inv[i] = "excused";
        excused[i] = {{"reason", cell.excused}, {"verdict", verdict_name(cell.worst)}, {"not_valid", cell.not_valid()}};
        continue;
      }
      inv[i] = verdict_name(cell.worst);
      invalid += cell.invalid;
      unknown += cell.unknown;
    }
    nlohmann::json sc = {{"trials", s.trials}, {"invariants", inv}};
    if (!excused.empty()) sc["excused"] = excused;
    if (s.history_error_trials > 0) {
      sc["history_errors"] = {{"trials", s.history_error_trials}, {"first", s.first_history_error}};
    }
    if (!s.expected.empty()) {
      nlohmann::json e = {{"expected", s.expected},       {"caught", s.expectation_met()},
                          {"met", s.expect_met},          {"no_evidence", s.expect_no_evidence},
                          {"other", s.expect_other},      {"trials", s.trials},
                          {"text", expectation_line(s)}};
      sc["expectation"] = e;
      e["scenario"] = name;
      j["expectations"].push_back(std::move(e));
    }
    j["scenarios"][name] = std::move(sc);
  }
  std::uint64_t history_total = 0;
  for (const auto& [name, s] : r.tally.scenarios()) history_total += s.history_error_trials;
  j["latency_ms"] = {{"acquire", quantiles(r.tally.acquire_ms())},
                     {"barrier", quantiles(r.tally.barrier_ms())},
                     {"recovery", quantiles(r.tally.recovery_ms())}};
  // Failing trials past the cap: counted, not listed (docs/reports.md).
  if (r.unlisted() > 0) {
    j["unlisted"] = {{"trials", r.unlisted()},
                     {"violations", invalid - j["violations"].size()},
                     {"unknown", unknown - j["unknown"].size()},
                     {"skipped", unavailable - skipped},
                     {"harness_errors", r.tally.harness_errors() - harness_errors},
                     {"history_errors", history_total - history},
                     {"max_kept", r.max_listed}};
  }
  // Triage (docs/reports.md): the buckets, new ones first.
  j["buckets"] = Json::array();
  for (const auto* b : buckets_in_order(r)) j["buckets"].push_back(bucket_json(*b));
  j["new_buckets"] = bt.count(false);
  j["known_buckets"] = bt.count(true);
  if (bt.overflow() > 0) j["buckets_overflow"] = bt.overflow();
  if (const harness::Baseline* b = bt.baseline()) {
    Json base = {{"file", b->file}, {"entries", Json::array()}, {"expired", Json::array()},
                 {"not_recurred", Json::array()}};
    for (const auto& [fp, k] : b->known) base["entries"].push_back(known_json(k));
    for (const auto& k : b->expired) base["expired"].push_back(known_json(k));
    for (const auto* k : r.known_not_recurred()) base["not_recurred"].push_back(known_json(*k));
    j["baseline"] = base;
  }
  // What reports and `merge` need beyond the above.
  j["out_dir"] = r.out_dir;
  j["max_kept"] = r.max_listed;
  j["planned"] = r.planned;
  j["duration_s"] = r.duration_s;
  j["expect_reached"] = r.expect_reached;
  j["concurrency"] = {{"adaptive", r.concurrency.adaptive}, {"last", r.concurrency.now},
                      {"lowest", r.concurrency.lowest}, {"highest", r.concurrency.highest},
                      {"backoffs", r.concurrency.backoffs}, {"mean", r.concurrency.mean}};
  j["tally"] = tally_json(r.tally);
  return j;
}

std::optional<harness::OutputError> write_summary(const harness::RunResult& r,
                                                  const std::string& path, harness::Durability d) {
  return harness::write_output(path, summary_json(r).dump(2) + "\n",
                               harness::OutputOrigin::kDerived, d);
}

std::shared_ptr<harness::RunSubscriber> live_summary() { return std::make_shared<LiveSummary>(); }

}  // namespace reports
