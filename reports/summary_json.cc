#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "reports/reports.h"

namespace reports {
namespace {

nlohmann::json quantiles(const harness::QuantileSketch& q) {
  if (q.count() == 0) return nullptr;
  return {{"count", q.count()}, {"p50", q.quantile(0.5)}, {"p90", q.quantile(0.9)}, {"p99", q.quantile(0.99)}, {"max", q.max()}};
}

class LiveSummary : public harness::RunSubscriber {
 public:
  void trial_finished(const harness::TrialResult&, const harness::RunResult& so_far) override {
    (void)write_summary(so_far, so_far.out_dir + "/summary.json");  // the final write (by the caller) reports failures
  }
};

}  // namespace

nlohmann::json summary_json(const harness::RunResult& r) {
  using harness::Verdict;
  using harness::verdict_name;
  nlohmann::json j;
  j["run_id"] = r.run_id;
  j["seed"] = r.seed;
  j["subject"] = r.subject;
  j["verdict"] = verdict_name(r.verdict());
  j["exit_code"] = r.exit_code();
  j["interrupted"] = r.interrupted;
  j["elapsed_s"] = r.elapsed;
  j["trials"] = r.tally.trials();
  j["shard"] = std::to_string(r.shard_index) + "/" + std::to_string(r.shard_count);
  j["violations"] = nlohmann::json::array();
  j["unknown"] = nlohmann::json::array();
  // The listed failing trials in detail (all of them up to the --max-kept cap).
  std::uint64_t skipped = 0, harness_errors = 0;
  std::uint64_t history = 0;
  for (const auto& t : r.listed) {
    for (const auto& c : t.checks) {
      if (c.verdict == Verdict::kValid || !c.excused.empty()) continue;
      nlohmann::json v = {{"invariant", c.invariant}, {"scenario", t.scenario}, {"trial", t.trial},
                          {"seed", t.seed},           {"run_seed", t.run_seed}, {"trial_dir", t.dir},
                          {"reproduce", t.reproduce}, {"problems", c.problems}};
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
  j["scenarios"] = nlohmann::json::object();
  std::uint64_t invalid = 0, unknown = 0, unavailable = 0;
  for (const auto& [name, s] : r.tally.scenarios()) {
    unavailable += s.unavailable;
    if (s.invariants.empty()) continue;  // nothing was checked (the subject never ran)
    nlohmann::json inv = nlohmann::json::object(), excused = nlohmann::json::object();
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
  return j;
}

bool write_summary(const harness::RunResult& r, const std::string& path) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp);
    if (!f) return false;
    f << summary_json(r).dump(2) << "\n";
    if (!f) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

std::shared_ptr<harness::RunSubscriber> live_summary() { return std::make_shared<LiveSummary>(); }

}  // namespace reports
