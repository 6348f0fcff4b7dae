// sigstop: pause a rank with SIGSTOP for a log-uniform or given duration, then
// SIGCONT. Params: job, rank, at = "30-60ms", duration = "1ms-2s" (log-uniform
// over the range). The supervisor SIGCONTs every worker at teardown, so a
// stopped rank never outlives its window.
#include <cmath>
#include <csignal>

#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"job", "rank", "at", "duration"})) return e;
  MsRange at, dur;
  if (auto e = param_range(f, "at", MsRange{Ms(0), Ms(200)}, &at)) return e;
  if (auto e = param_range(f, "duration", MsRange{Ms(1), Ms(2000)}, &dur)) return e;
  int job, rank;
  if (auto e = pick_target(f, s, rng, &job, &rank)) return e;
  std::int64_t start = pick_ns(rng, at);
  double lo = std::max<double>(1, dur.min.count()), hi = std::max<double>(lo, dur.max.count());
  double ms = std::exp(std::uniform_real_distribution<double>(std::log(lo), std::log(hi))(rng));
  std::int64_t len = static_cast<std::int64_t>(ms * 1e6);
  nlohmann::json detail = {{"duration_ms", len / 1e6}};
  p.actions.push_back(Action{start, job, rank, SIGSTOP, "sigstop", "start", detail});
  p.actions.push_back(Action{start + len, job, rank, SIGCONT, "sigstop", "end", detail});
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("sigstop", "pause a rank (SIGSTOP) for a log-uniform 1 ms - 2 s, then SIGCONT", plan);

}  // namespace harness
