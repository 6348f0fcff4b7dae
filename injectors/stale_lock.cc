// stale-lock: lock files left in the trial's lock dir. Params: prefixes (list),
// kind (default "barrier_filelock"), holder = "dead" (the file names a dead
// pid) | "reused-pid" (it names a pid now used by a live unrelated process) |
// "stopped" (flock held by a SIGSTOPped process) | "inherited" (flock kept by
// an fd a forgotten child of a dead process inherited). A held lock is a live
// owner's: no cleanup may remove it while held; the heal releases it.
#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario&, Rng&, TrialPlan& p) {
  if (auto e = only_keys(f, {"prefixes", "kind", "holder"})) return e;
  std::vector<int> prefixes;
  for (const auto& x : f.params.value("prefixes", nlohmann::json::array({0}))) {
    if (!x.is_number_integer() || x.get<int>() < 0 || x.get<int>() > 999999) return std::string("'prefixes' must be a list of ints in [0, 999999]");
    prefixes.push_back(x.get<int>());
  }
  std::string kind = f.params.value("kind", std::string("barrier_filelock"));
  std::string holder = f.params.value("holder", std::string("dead"));
  if (holder != "dead" && holder != "reused-pid" && holder != "stopped" && holder != "inherited") {
    return std::string("'holder' must be dead, reused-pid, stopped or inherited");
  }
  for (int prefix : prefixes) {
    char name[64];
    std::snprintf(name, sizeof name, "%06d_%s", prefix, kind.c_str());
    Seed sd;
    sd.fault = "stale-lock";
    sd.where = "lock";
    sd.name = name;
    // A pid that is dead (beyond pid_max) or alive and unrelated (1: init).
    sd.content = holder == "reused-pid" ? "1\n" : holder == "dead" ? "4194304\n" : "";
    if (holder == "stopped" || holder == "inherited") sd.held_by = holder;
    sd.detail = {{"holder", holder}};
    p.seeds.push_back(std::move(sd));
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("stale-lock", "lock files of dead owners, reused pids, stopped holders or inherited fds",
                            plan);

}  // namespace harness
