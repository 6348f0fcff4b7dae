#include "injector.h"

#include "shmcoord/failpoint.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <set>

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

namespace {

const char* json_type(const nlohmann::json& v) {
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number_float()) return "a float";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "a table";
  return "null";
}

std::string quoted(const std::string& key) { return "'" + key + "'"; }

// An integer JSON value as int64 without wrapping; false if it does not fit.
bool as_int64(const nlohmann::json& v, std::int64_t* out) {
  if (v.is_number_unsigned()) {
    auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) return false;
    *out = static_cast<std::int64_t>(u);
    return true;
  }
  if (v.is_number_integer()) {
    *out = v.get<std::int64_t>();
    return true;
  }
  return false;
}

}  // namespace

std::optional<std::string> param_int(const FaultSpec& f, const std::string& key, std::int64_t def, std::int64_t lo,
                                     std::int64_t hi, std::int64_t* out) {
  *out = def;
  if (!f.params.contains(key)) return std::nullopt;
  const auto& v = f.params[key];
  std::int64_t x = 0;
  if (!v.is_number_integer() && !v.is_number_unsigned()) {
    return quoted(key) + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], not " +
           json_type(v);
  }
  if (!as_int64(v, &x) || x < lo || x > hi) {
    return quoted(key) + " = " + v.dump() + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  }
  *out = x;
  return std::nullopt;
}

std::optional<std::string> param_int(const FaultSpec& f, const std::string& key, int def, int lo, int hi, int* out) {
  std::int64_t x = def;
  auto e = param_int(f, key, static_cast<std::int64_t>(def), lo, hi, &x);
  *out = static_cast<int>(x);
  return e;
}

namespace {

// A number in [lo, hi] or (lo, hi].
std::optional<std::string> param_number(const FaultSpec& f, const std::string& key, double def,
                                        double lo, bool lo_inclusive, double hi, double* out) {
  *out = def;
  if (!f.params.contains(key)) return std::nullopt;
  const auto& v = f.params[key];
  // Built only for an error: validation plans every fault hundreds of times.
  auto range = [&] {
    return (lo_inclusive ? "[" : "(") + nlohmann::json(lo).dump() + ", " +
           nlohmann::json(hi).dump() + "]";
  };
  if (!v.is_number())
    return quoted(key) + " must be a number in " + range() + ", not " + json_type(v);
  const double x = v.get<double>();
  if (!((lo_inclusive ? x >= lo : x > lo) && x <= hi))
    return quoted(key) + " = " + v.dump() + " is out of range " + range();
  *out = x;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> param_double(const FaultSpec& f, const std::string& key, double def,
                                        double lo_excl, double hi_incl, double* out) {
  return param_number(f, key, def, lo_excl, false, hi_incl, out);
}

std::optional<std::string> param_share(const FaultSpec& f, const std::string& key, double def,
                                       double* out) {
  return param_number(f, key, def, 0.0, true, 1.0, out);
}

std::optional<std::string> param_bool(const FaultSpec& f, const std::string& key, bool def, bool* out) {
  *out = def;
  if (!f.params.contains(key)) return std::nullopt;
  const auto& v = f.params[key];
  if (!v.is_boolean()) return quoted(key) + " must be true or false, not " + json_type(v);
  *out = v.get<bool>();
  return std::nullopt;
}

std::optional<std::string> param_string(const FaultSpec& f, const std::string& key, const std::string& def,
                                        std::initializer_list<const char*> allowed, std::string* out) {
  *out = def;
  auto why = [&] {
    std::string words;
    for (const char* a : allowed) words += (words.empty() ? "" : ", ") + std::string(a);
    return quoted(key) +
           (allowed.size() ? " must be one of " + words : " must be a non-empty string");
  };
  if (!f.params.contains(key)) return std::nullopt;
  const auto& v = f.params[key];
  if (!v.is_string()) return why() + ", not " + json_type(v);
  std::string x = v.get<std::string>();
  if (x.empty()) return why();
  if (allowed.size() && std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return x == a; })) {
    return why() + ", not \"" + x + "\"";
  }
  *out = std::move(x);
  return std::nullopt;
}

std::optional<std::string> param_strings(const FaultSpec& f, const std::string& key,
                                         const std::vector<std::string>& def, std::vector<std::string>* out) {
  *out = def;
  if (!f.params.contains(key)) return std::nullopt;
  const auto& v = f.params[key];
  auto why = [&] {
    return quoted(key) + " must be a non-empty string or a non-empty list of them";
  };
  out->clear();
  if (v.is_string()) {
    out->push_back(v.get<std::string>());
  } else if (v.is_array()) {
    for (const auto& x : v) {
      if (!x.is_string()) return why() + " (an element is " + json_type(x) + ")";
      out->push_back(x.get<std::string>());
    }
  } else {
    return why() + ", not " + json_type(v);
  }
  if (out->empty() ||
      std::any_of(out->begin(), out->end(), [](const std::string& x) { return x.empty(); }))
    return why();
  return std::nullopt;
}

std::optional<std::string> param_ints(const FaultSpec& f, const std::string& key, const std::vector<int>& def, int lo,
                                      int hi, std::vector<int>* out) {
  *out = def;
  if (!f.params.contains(key)) return std::nullopt;
  const auto& v = f.params[key];
  auto why = [&] {
    return quoted(key) + " must be a non-empty list of integers in [" + std::to_string(lo) + ", " +
           std::to_string(hi) + "]";
  };
  if (!v.is_array() || v.empty())
    return why() + (v.is_array() ? "" : std::string(", not ") + json_type(v));
  out->clear();
  for (const auto& x : v) {
    std::int64_t n = 0;
    if (!as_int64(x, &n) || n < lo || n > hi) return why() + " (got " + x.dump() + ")";
    out->push_back(static_cast<int>(n));
  }
  return std::nullopt;
}

std::optional<std::string> param_errno(const FaultSpec& f, const std::string& key, const std::string& def, Rng& rng,
                                       int* out) {
  static const std::pair<const char*, int> kNames[] = {
      {"EACCES", EACCES}, {"EPERM", EPERM},   {"ENOSPC", ENOSPC}, {"EMFILE", EMFILE}, {"ENFILE", ENFILE},
      {"EIO", EIO},       {"ENOMEM", ENOMEM}, {"EAGAIN", EAGAIN}, {"EINTR", EINTR},   {"EEXIST", EEXIST},
      {"ENOENT", ENOENT}};
  constexpr int kMaxErrno = 4095;  // the kernel's MAX_ERRNO
  const std::string why = quoted(key) +
                          " must be an errno name (EACCES, EPERM, ENOSPC, EMFILE, ENFILE, EIO, ENOMEM, EAGAIN, "
                          "EINTR, EEXIST, ENOENT), \"random\" or a number in [1, 4095]";
  nlohmann::json v = f.params.contains(key) ? f.params[key] : nlohmann::json(def);
  std::int64_t n = 0;
  if (as_int64(v, &n)) {
    if (n < 1 || n > kMaxErrno) return why + ", not " + v.dump();
    *out = static_cast<int>(n);
    return std::nullopt;
  }
  if (!v.is_string()) return why + ", not " + json_type(v);
  const std::string name = v.get<std::string>();
  if (name == "random") {
    static const int kChoices[] = {EACCES, EPERM, EIO};
    *out = kChoices[std::uniform_int_distribution<int>(0, 2)(rng)];
    return std::nullopt;
  }
  for (const auto& [k, e] : kNames) {
    if (name == k) {
      *out = e;
      return std::nullopt;
    }
  }
  if (!name.empty() && name.size() <= 4 && name.find_first_not_of("0123456789") == std::string::npos) {
    n = std::stoll(name);
    if (n >= 1 && n <= kMaxErrno) {
      *out = static_cast<int>(n);
      return std::nullopt;
    }
  }
  return why + ", not \"" + name + "\"";
}

std::optional<std::string> param_range(const FaultSpec& f, const std::string& key, MsRange def, MsRange* out) {
  *out = def;
  if (!f.params.contains(key)) return std::nullopt;
  const auto& v = f.params[key];
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0 && v.get<std::int64_t>() <= 600000) {
    out->min = out->max = Ms(v.get<std::int64_t>());
    return std::nullopt;
  }
  std::string why = "expected a duration or range like \"10-200ms\"";
  if (v.is_string() && parse_range_text(v.get<std::string>(), out, &why)) {
    // A trial lasts at most 10 minutes (its timeout's bound); past that a
    // time means nothing and, in nanoseconds, would wrap an int64.
    if (out->max <= Ms(600000)) return std::nullopt;
    why = "\"" + v.get<std::string>() + "\" is out of range (0..10m: no trial lasts longer)";
  }
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
    if (auto e = param_int(f, "job", 0, 0, njobs - 1, job)) return e;
  } else {
    *job = std::uniform_int_distribution<int>(0, njobs - 1)(rng);
  }
  int nranks = s.jobs[*job].ranks;
  if (f.params.contains("rank")) {
    if (auto e = param_int(f, "rank", 0, 0, nranks - 1, rank)) return *e + " (ranks of job " + std::to_string(*job) + ")";
  } else {
    *rank = std::uniform_int_distribution<int>(0, nranks - 1)(rng);
  }
  return std::nullopt;
}

std::optional<std::string> pick_process(const FaultSpec& f, const Scenario& s, int job, Action* a) {
  const JobSpec& js = s.jobs[static_cast<std::size_t>(job)];
  std::string target;
  if (auto e = param_string(f, "target", "rank", {"rank", "launcher"}, &target)) return e;
  if (target == "launcher") {
    if (!js.launcher.present()) {
      return "'target' = \"launcher\" but job " + std::to_string(job) + " has no [job.launcher]";
    }
    if (f.params.contains("worker")) return std::string("'worker' and 'target' = \"launcher\" name two processes");
    a->launcher = true;
    a->rank = -1;
    return std::nullopt;
  }
  if (!f.params.contains("worker")) return std::nullopt;
  if (js.loader.workers <= 0) {
    return "'worker' but job " + std::to_string(job) + " has no loader workers ([job.loader] workers)";
  }
  if (auto e = param_int(f, "worker", 0, 0, js.loader.workers - 1, &a->worker)) {
    return *e + " (loader workers of job " + std::to_string(job) + ")";
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

std::optional<std::string> pick_workers(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p,
                                        std::vector<WorkerPlan*>* out) {
  out->clear();
  bool random_rank = false;
  if (auto e = param_bool(f, "random_rank", false, &random_rank)) return e;
  if (random_rank) {
    int job, rank;
    if (auto e = pick_target(f, s, rng, &job, &rank)) return e;
    for (auto& w : p.workers) {
      if (w.job == job && w.rank == rank) out->push_back(&w);
    }
    return std::nullopt;
  }
  int njobs = static_cast<int>(s.jobs.size());
  int job = -1, rank = -1;
  if (auto e = param_int(f, "job", -1, 0, njobs - 1, &job)) return e;
  int limit = job >= 0 ? s.jobs[job].ranks : 64;
  if (auto e = param_int(f, "rank", -1, 0, limit - 1, &rank)) return e;
  for (auto& w : p.workers) {
    if ((job < 0 || w.job == job) && (rank < 0 || w.rank == rank)) out->push_back(&w);
  }
  if (out->empty()) return std::string("no worker matches 'job'/'rank'");
  return std::nullopt;
}

}  // namespace harness

namespace harness {

std::optional<std::string> check_failpoint(const std::string& key, const std::string& point) {
  if (shmcoord::failpoint::known(point)) return std::nullopt;
  return "'" + key + "': \"" + point + "\" is not a shmcoord failpoint (docs/failpoints.md)";
}

std::optional<std::string> pick_point(const FaultSpec& f, int trial, const std::string& def_point, std::string* point,
                                      int* nth, int* pass) {
  std::vector<std::string> listed;
  if (auto e = param_strings(f, "point", {def_point}, &listed)) return e;
  // "*" is the table's own window points: nothing to check, built once.
  static const std::vector<std::string> kWindows = window_points();
  const bool all = listed.size() == 1 && listed[0] == "*";
  const std::vector<std::string>& points = all ? kWindows : listed;
  if (!all) {
    for (const auto& p : listed) {
      if (auto e = check_failpoint("point", p)) return e;
    }
  }
  if (f.params.contains("nth") && f.params.contains("enumerate")) return std::string("give 'nth' or 'enumerate', not both");
  int k = 1;
  if (auto e = param_int(f, "enumerate", 0, 1, 1000, &k)) return e;
  if (f.params.contains("enumerate")) {
    const std::size_t pairs = points.size() * static_cast<std::size_t>(k);
    // Points vary fastest, so the first trials of a short run visit many points.
    const std::size_t i = static_cast<std::size_t>(trial) % pairs;
    *point = points[i % points.size()];
    *nth = static_cast<int>(i / points.size()) + 1;
    if (pass) *pass = static_cast<int>(static_cast<std::size_t>(trial) / pairs);
    return std::nullopt;
  }
  if (auto e = param_int(f, "nth", 1, 1, 1000000, nth)) return e;
  *point = points[static_cast<std::size_t>(trial) % points.size()];
  if (pass) *pass = static_cast<int>(static_cast<std::size_t>(trial) / points.size());
  return std::nullopt;
}

std::optional<std::string> pick_point_target(const FaultSpec& f, const Scenario& s, Rng& rng, int pass, int* job,
                                             int* rank) {
  std::string target;
  if (auto e = param_string(f, "target", "random", {"random", "cycle"}, &target)) return e;
  if (target == "random" || f.params.contains("job") || f.params.contains("rank")) {
    if (target != "random") return std::string("'target' = \"cycle\" chooses the rank: give no 'job' or 'rank'");
    return pick_target(f, s, rng, job, rank);
  }
  int total = 0;
  for (const auto& j : s.jobs) total += j.ranks;
  int k = pass % total;
  for (std::size_t j = 0; j < s.jobs.size(); ++j) {
    if (k < s.jobs[j].ranks) {
      *job = static_cast<int>(j);
      *rank = k;
      return std::nullopt;
    }
    k -= s.jobs[j].ranks;
  }
  return std::string("no rank to target");
}

std::vector<std::string> window_points() {
  std::vector<std::string> out;
  for (const auto& p : shmcoord::failpoint::points()) {
    if (p.kind == shmcoord::failpoint::Kind::kWindow) out.emplace_back(p.name);
  }
  return out;
}

}  // namespace harness
