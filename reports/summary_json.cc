#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "reports/reports.h"

namespace reports {
namespace {

nlohmann::json quantiles(std::vector<double> v) {
  if (v.empty()) return nullptr;
  std::sort(v.begin(), v.end());
  auto q = [&](double p) { return v[std::min(v.size() - 1, static_cast<std::size_t>(p * (v.size() - 1) + 0.5))]; };
  return {{"count", v.size()}, {"p50", q(0.5)}, {"p90", q(0.9)}, {"p99", q(0.99)}, {"max", v.back()}};
}

}  // namespace

nlohmann::json summary_json(const harness::RunResult& r) {
  using harness::verdict_name;
  nlohmann::json j;
  j["run_id"] = r.run_id;
  j["seed"] = r.seed;
  j["subject"] = r.subject;
  j["verdict"] = verdict_name(r.verdict());
  j["exit_code"] = r.exit_code();
  j["interrupted"] = r.interrupted;
  j["elapsed_s"] = r.elapsed;
  j["trials"] = r.trials.size();
  j["shard"] = std::to_string(r.shard_index) + "/" + std::to_string(r.shard_count);
  j["violations"] = nlohmann::json::array();
  j["unknown"] = nlohmann::json::array();
  std::map<std::string, int> faults, reached;
  std::map<std::string, std::map<std::string, std::string>> by_scenario;  // scenario -> invariant -> verdict
  std::map<std::string, int> trials_by_scenario;
  std::vector<double> acq, bar, rec;
  for (const auto& t : r.trials) {
    ++trials_by_scenario[t.scenario];
    for (const auto& [k, n] : t.faults) faults[k] += n;
    for (const auto& s : t.reached) ++reached[s];
    acq.insert(acq.end(), t.acquire_ms.begin(), t.acquire_ms.end());
    bar.insert(bar.end(), t.barrier_ms.begin(), t.barrier_ms.end());
    rec.insert(rec.end(), t.recovery_ms.begin(), t.recovery_ms.end());
    for (const auto& c : t.checks) {
      auto& cell = by_scenario[t.scenario][c.invariant];
      if (cell.empty() || harness::compose(harness::Verdict::kValid, c.verdict) > harness::Verdict::kValid) {
        if (cell != "invalid") cell = verdict_name(c.verdict);
      }
      if (c.verdict == harness::Verdict::kValid) continue;
      nlohmann::json v = {{"invariant", c.invariant}, {"scenario", t.scenario}, {"trial", t.trial},
                          {"seed", t.seed},           {"run_seed", t.run_seed}, {"trial_dir", t.dir},
                          {"reproduce", t.reproduce}, {"problems", c.problems}};
      j[c.verdict == harness::Verdict::kInvalid ? "violations" : "unknown"].push_back(std::move(v));
    }
    if (!t.unavailable.empty()) {
      j["skipped"].push_back({{"scenario", t.scenario}, {"trial", t.trial}, {"reason", t.unavailable}});
    }
    if (t.harness_error) {
      j["harness_errors"].push_back({{"scenario", t.scenario}, {"trial", t.trial}, {"message", t.harness_error_text}, {"trial_dir", t.dir}});
    }
  }
  j["faults"] = faults;
  j["reached"] = reached;
  j["missing_reached"] = r.missing_reached();
  j["scenarios"] = nlohmann::json::object();
  for (const auto& [s, inv] : by_scenario) j["scenarios"][s] = {{"trials", trials_by_scenario[s]}, {"invariants", inv}};
  j["latency_ms"] = {{"acquire", quantiles(acq)}, {"barrier", quantiles(bar)}, {"recovery", quantiles(rec)}};
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

}  // namespace reports
