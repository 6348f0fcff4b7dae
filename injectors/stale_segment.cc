// stale-segment: segments a dead job left, seeded into the trial's /dev/shm
// before the workers start. Params: prefixes (list of ints; gaps welcome),
// kinds (default ["locals", "barrier"]), content = "valid" | "zero-length" |
// "truncated" | "garbage" (default "garbage"), uid (owner; not root makes it
// another user's segment, which no cleanup may remove).
#include "injector.h"

namespace harness {
namespace {

std::string content_for(const std::string& how, int prefix, Rng& rng) {
  if (how == "zero-length") return "";
  // The original's `locals` record: int32 total length, then "dir\0<prefix>".
  std::string body = "/data/dead-job" + std::string(1, '\0') + std::to_string(prefix);
  std::int32_t total = static_cast<std::int32_t>(4 + body.size());
  std::string rec(reinterpret_cast<const char*>(&total), 4);
  rec += body;
  if (how == "valid") return rec;
  if (how == "truncated") return rec.substr(0, 3);
  std::string g(64, '\0');
  for (auto& c : g) c = static_cast<char>(rng());
  return g;
}

std::optional<std::string> plan(const FaultSpec& f, const Scenario&, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"prefixes", "kinds", "content", "uid"})) return e;
  std::vector<int> prefixes;
  for (const auto& x : f.params.value("prefixes", nlohmann::json::array({0}))) {
    if (!x.is_number_integer() || x.get<int>() < 0 || x.get<int>() > 999999) return std::string("'prefixes' must be a list of ints in [0, 999999]");
    prefixes.push_back(x.get<int>());
  }
  std::vector<std::string> kinds;
  for (const auto& x : f.params.value("kinds", nlohmann::json::array({"locals", "barrier"}))) {
    if (!x.is_string()) return std::string("'kinds' must be a list of strings");
    kinds.push_back(x.get<std::string>());
  }
  std::string how = f.params.value("content", std::string("garbage"));
  if (how != "valid" && how != "zero-length" && how != "truncated" && how != "garbage") {
    return std::string("'content' must be valid, zero-length, truncated or garbage");
  }
  int uid = f.params.value("uid", -1);
  for (int prefix : prefixes) {
    for (const auto& kind : kinds) {
      char name[64];
      std::snprintf(name, sizeof name, "%06d_%s", prefix, kind.c_str());
      Seed sd;
      sd.fault = "stale-segment";
      sd.name = name;
      sd.content = content_for(how, prefix, rng);
      sd.uid = uid;
      sd.foreign = uid > 0;
      sd.detail = {{"content", how}, {"uid", uid}};
      p.seeds.push_back(std::move(sd));
    }
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("stale-segment", "segments a dead job left: valid, zero-length, truncated, garbage, or another user's",
                            plan);

}  // namespace harness
