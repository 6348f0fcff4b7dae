// fiu-preload: libfiu's POSIX preload (what `fiu-run -x` does) in chosen
// workers, for subjects we cannot recompile: LD_PRELOAD the run and POSIX
// preload libraries and pass FIU_ENABLE commands. Remote control is off
// (FIU_CTRL_FIFO empty), so a killed worker leaves no /tmp/fiu-ctrl-* FIFO.
// Note the preload does not wrap shm_open, shm_unlink, flock, fcntl, lockf or
// openat: use fiu-errno for those sites in the native subject.
// Params: enable (a libfiu POSIX point name, e.g. "posix/io/dir/opendir", or
// a list), errno (failinfo, default EACCES), probability, job, rank, random_rank.
#include "injector.h"

namespace harness {
namespace {

constexpr const char* kPreload = "/usr/lib/fiu/fiu_run_preload.so /usr/lib/fiu/fiu_posix_preload.so";

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"enable", "errno", "probability", "job", "rank", "random_rank"})) return e;
  if (!f.params.contains("enable")) {
    return std::string("'enable' must be a libfiu point name (e.g. \"posix/io/dir/opendir\") or a list");
  }
  std::vector<std::string> names;
  if (auto e = param_strings(f, "enable", {}, &names)) return e;
  for (const auto& n : names) {
    // One FIU_ENABLE command per line, options after a comma: neither may
    // appear in a name.
    if (n.find_first_of(",\n=") != std::string::npos) return "'enable': \"" + n + "\" is not a libfiu point name";
  }
  int err = 0;
  if (auto e = param_errno(f, "errno", "EACCES", rng, &err)) return e;
  double prob = 1;
  if (auto e = param_double(f, "probability", 1.0, 0.0, 1.0, &prob)) return e;
  std::vector<WorkerPlan*> ws;
  if (auto e = pick_workers(f, s, rng, p, &ws)) return e;
  std::string cmds;
  for (const auto& n : names) {
    cmds += prob < 1 ? "enable_random name=" + n + ",failinfo=" + std::to_string(err) + ",probability=" + std::to_string(prob)
                     : "enable name=" + n + ",failinfo=" + std::to_string(err);
    cmds += "\n";
  }
  for (auto* w : ws) {
    w->env["LD_PRELOAD"] = kPreload;
    w->env["FIU_ENABLE"] = cmds;
    w->env["FIU_CTRL_FIFO"] = "";
    p.actions.push_back(Action{0, w->job, w->rank, 0, "fiu-preload", "instant", {{"enable", names}, {"errno", err}}});
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("fiu-preload", "libfiu's POSIX preload (fiu-run -x) in chosen workers, remote control off",
                            plan);

}  // namespace harness
