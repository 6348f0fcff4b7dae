// stale-lock: lock files left in the trial's lock dir. Params: prefixes (list),
// suffix (default "barrier_filelock": the file is <root><prefix:06>_<suffix>;
// it was called `kind` once, which the fault's own `kind` key shadowed),
// holder = "dead" (the file names a dead pid) | "reused-pid" (it names a pid
// now used by a live unrelated process) | "stopped" (flock held by a
// SIGSTOPped process) | "inherited" (flock kept by an fd a forgotten child of a
// dead process inherited). A held lock is a live owner's: no cleanup may
// remove it while held; the heal releases it. For shmcoord's own init lock see
// init-lock.
#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario&, Rng&, TrialPlan& p) {
  if (auto e = only_keys(f, {"prefixes", "suffix", "holder"})) return e;
  std::vector<int> prefixes;
  if (auto e = param_ints(f, "prefixes", {0}, 0, 999999, &prefixes)) return e;
  std::string suffix;
  if (auto e = param_string(f, "suffix", "barrier_filelock", {}, &suffix)) return e;
  if (suffix.size() > 64 || suffix.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
                                std::string::npos) {
    return "'suffix' must be 1-64 of [A-Za-z0-9._-] (a file name), not \"" + suffix + "\"";
  }
  std::string holder;
  if (auto e = param_string(f, "holder", "dead", {"dead", "reused-pid", "stopped", "inherited"}, &holder)) return e;
  for (int prefix : prefixes) {
    char name[96];
    std::snprintf(name, sizeof name, "%06d_%s", prefix, suffix.c_str());
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
