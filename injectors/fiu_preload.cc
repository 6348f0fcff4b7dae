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
  std::vector<std::string> names;
  const auto& en = f.params.value("enable", nlohmann::json());
  if (en.is_string()) names.push_back(en.get<std::string>());
  if (en.is_array()) {
    for (const auto& x : en) {
      if (x.is_string()) names.push_back(x.get<std::string>());
    }
  }
  if (names.empty()) return std::string("'enable' must be a libfiu point name (e.g. \"posix/io/dir/opendir\") or a list");
  auto err = errno_param(f.params.value("errno", std::string("EACCES")), rng);
  if (!err) return std::string("'errno' must be EACCES, EPERM, ..., a number, or \"random\"");
  double prob = f.params.value("probability", 1.0);
  if (!(prob > 0 && prob <= 1)) return std::string("'probability' must be in (0, 1]");
  std::vector<WorkerPlan*> ws;
  if (auto e = pick_workers(f, s, rng, p, &ws)) return e;
  std::string cmds;
  for (const auto& n : names) {
    cmds += prob < 1 ? "enable_random name=" + n + ",failinfo=" + std::to_string(*err) + ",probability=" + std::to_string(prob)
                     : "enable name=" + n + ",failinfo=" + std::to_string(*err);
    cmds += "\n";
  }
  for (auto* w : ws) {
    w->env["LD_PRELOAD"] = kPreload;
    w->env["FIU_ENABLE"] = cmds;
    w->env["FIU_CTRL_FIFO"] = "";
    p.actions.push_back(Action{0, w->job, w->rank, 0, "fiu-preload", "instant", {{"enable", names}, {"errno", *err}}});
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("fiu-preload", "libfiu's POSIX preload (fiu-run -x) in chosen workers, remote control off",
                            plan);

}  // namespace harness
