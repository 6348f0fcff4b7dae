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
  if (auto e = param_ints(f, "prefixes", {0}, 0, 999999, &prefixes)) return e;
  std::vector<std::string> kinds;
  if (auto e = param_strings(f, "kinds", {"locals", "barrier"}, &kinds)) return e;
  for (const auto& k : kinds) {
    // Part of a name in /dev/shm: no "/", no NUL, nothing a shm name cannot hold.
    if (k.size() > 64 || k.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
                             std::string::npos) {
      return "'kinds': \"" + k + "\" is not a segment kind (1-64 of [A-Za-z0-9._-])";
    }
  }
  std::string how;
  if (auto e = param_string(f, "content", "garbage", {"valid", "zero-length", "truncated", "garbage"}, &how)) return e;
  int uid = -1;
  if (auto e = param_int(f, "uid", -1, 0, 2147483647, &uid)) return e;
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
