#include "injector.h"

#include <algorithm>
#include <set>
#include <cerrno>
#include <cstdlib>

namespace harness {

std::vector<InjectorInfo>& injector_registry() {
  static std::vector<InjectorInfo> r;
  return r;
}

const InjectorInfo* find_injector(const std::string& kind) {
  for (const auto& i : injector_registry()) {
    if (i.kind == kind) return &i;
  }
  return nullptr;
}

std::optional<std::string> only_keys(const FaultSpec& f, std::initializer_list<const char*> keys) {
  for (auto it = f.params.begin(); it != f.params.end(); ++it) {
    if (it.key() == "kind") continue;
    if (std::find_if(keys.begin(), keys.end(), [&](const char* k) { return it.key() == k; }) == keys.end()) {
      std::string known;
      for (const char* k : keys) known += (known.empty() ? "" : ", ") + std::string(k);
      return "unknown key '" + it.key() + "' in [[fault]] of kind '" + f.kind + "' (known: " + known + ")";
    }
  }
  return std::nullopt;
}

std::optional<std::string> param_range(const FaultSpec& f, const std::string& key, MsRange def, MsRange* out) {
  *out = def;
  if (!f.params.contains(key)) return std::nullopt;
  const auto& v = f.params[key];
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) {
    out->min = out->max = Ms(v.get<std::int64_t>());
    return std::nullopt;
  }
  std::string why = "expected a duration or range like \"10-200ms\"";
  if (v.is_string() && parse_range_text(v.get<std::string>(), out, &why)) return std::nullopt;
  return "'" + key + "': " + why;
}

std::int64_t pick_ns(Rng& rng, MsRange r) {
  std::int64_t lo = r.min.count() * 1000000, hi = r.max.count() * 1000000;
  if (hi <= lo) return lo;
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

std::optional<std::string> pick_target(const FaultSpec& f, const Scenario& s, Rng& rng, int* job, int* rank) {
  int njobs = static_cast<int>(s.jobs.size());
  if (f.params.contains("job")) {
    const auto& v = f.params["job"];
    if (!v.is_number_integer() || v.get<int>() < 0 || v.get<int>() >= njobs) {
      return "'job' must be an integer in [0, " + std::to_string(njobs) + ")";
    }
    *job = v.get<int>();
  } else {
    *job = std::uniform_int_distribution<int>(0, njobs - 1)(rng);
  }
  int nranks = s.jobs[*job].ranks;
  if (f.params.contains("rank")) {
    const auto& v = f.params["rank"];
    if (!v.is_number_integer() || v.get<int>() < 0 || v.get<int>() >= nranks) {
      return "'rank' must be an integer in [0, " + std::to_string(nranks) + ") for job " + std::to_string(*job);
    }
    *rank = v.get<int>();
  } else {
    *rank = std::uniform_int_distribution<int>(0, nranks - 1)(rng);
  }
  return std::nullopt;
}

std::optional<std::string> pick_distinct_targets(const FaultSpec& f, const Scenario& s, Rng& rng, int count,
                                                 std::vector<std::pair<int, int>>* out) {
  if (count < 1 || count > 256) return std::string("'count' must be in [1, 256]");
  std::set<std::pair<int, int>> chosen;
  for (int tries = 0; static_cast<int>(chosen.size()) < count && tries < 1000; ++tries) {
    int job, rank;
    if (auto e = pick_target(f, s, rng, &job, &rank)) return e;
    chosen.insert({job, rank});
  }
  if (static_cast<int>(chosen.size()) < count) return std::string("'count' exceeds the ranks it can choose from");
  out->assign(chosen.begin(), chosen.end());
  return std::nullopt;
}

std::optional<int> errno_param(const std::string& name, Rng& rng) {
  static const std::pair<const char*, int> kNames[] = {
      {"EACCES", EACCES}, {"EPERM", EPERM}, {"ENOSPC", ENOSPC}, {"EMFILE", EMFILE}, {"ENFILE", ENFILE},
      {"EIO", EIO},       {"ENOMEM", ENOMEM}, {"EAGAIN", EAGAIN}, {"EINTR", EINTR}, {"EEXIST", EEXIST},
      {"ENOENT", ENOENT}};
  if (name == "random") {
    static const int kChoices[] = {EACCES, EPERM, EIO};
    return kChoices[std::uniform_int_distribution<int>(0, 2)(rng)];
  }
  for (const auto& [n, v] : kNames) {
    if (name == n) return v;
  }
  if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos) return std::atoi(name.c_str());
  return std::nullopt;
}

std::optional<std::string> pick_workers(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p,
                                        std::vector<WorkerPlan*>* out) {
  out->clear();
  if (f.params.value("random_rank", false)) {
    int job, rank;
    if (auto e = pick_target(f, s, rng, &job, &rank)) return e;
    for (auto& w : p.workers) {
      if (w.job == job && w.rank == rank) out->push_back(&w);
    }
    return std::nullopt;
  }
  int njobs = static_cast<int>(s.jobs.size());
  int job = -1, rank = -1;
  if (f.params.contains("job")) {
    const auto& v = f.params["job"];
    if (!v.is_number_integer() || v.get<int>() < 0 || v.get<int>() >= njobs) {
      return "'job' must be an integer in [0, " + std::to_string(njobs) + ")";
    }
    job = v.get<int>();
  }
  if (f.params.contains("rank")) {
    const auto& v = f.params["rank"];
    int limit = job >= 0 ? s.jobs[job].ranks : 64;
    if (!v.is_number_integer() || v.get<int>() < 0 || v.get<int>() >= limit) {
      return "'rank' must be an integer in [0, " + std::to_string(limit) + ")";
    }
    rank = v.get<int>();
  }
  for (auto& w : p.workers) {
    if ((job < 0 || w.job == job) && (rank < 0 || w.rank == rank)) out->push_back(&w);
  }
  if (out->empty()) return std::string("no worker matches 'job'/'rank'");
  return std::nullopt;
}

}  // namespace harness
