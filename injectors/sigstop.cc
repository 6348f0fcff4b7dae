// sigstop: pause ranks with SIGSTOP for a log-uniform time in `duration`
// (default 1 ms - 2 s), then SIGCONT. With count > 1, that many distinct ranks
// (of `job` if given) are stopped one by one, 0-`stagger` apart, and resumed in
// a random order. Params: job, rank, count, at, duration, stagger; worker = n
// (count 1) stops the rank's loader worker #n, target = "launcher" its launcher. The
// supervisor SIGCONTs every worker at teardown, so no rank stays stopped.
#include <algorithm>
#include <cmath>
#include <csignal>

#include "injector.h"

namespace harness {
namespace {

std::int64_t log_uniform_ns(Rng& rng, MsRange dur) {
  double lo = std::max<double>(1, dur.min.count()), hi = std::max<double>(lo, dur.max.count());
  return static_cast<std::int64_t>(std::exp(std::uniform_real_distribution<double>(std::log(lo), std::log(hi))(rng)) * 1e6);
}

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"job", "rank", "count", "at", "duration", "stagger", "worker", "target"})) return e;
  MsRange at, dur, stagger;
  if (auto e = param_range(f, "at", MsRange{Ms(0), Ms(200)}, &at)) return e;
  if (auto e = param_range(f, "duration", MsRange{Ms(1), Ms(2000)}, &dur)) return e;
  if (auto e = param_range(f, "stagger", MsRange{Ms(0), Ms(50)}, &stagger)) return e;
  std::vector<std::pair<int, int>> order;
  int count = 1;
  if (auto e = param_int(f, "count", 1, 1, 256, &count)) return e;
  if (auto e = pick_distinct_targets(f, s, rng, count, &order)) return e;
  if ((f.params.contains("worker") || f.params.contains("target")) && count != 1) {
    return std::string("'worker' and 'target' aim at one process: 'count' must be 1");
  }
  Action who;
  if (auto e = pick_process(f, s, order.front().first, &who)) return e;
  auto aimed = [&](Action a) {
    a.worker = who.worker;
    a.launcher = who.launcher;
    if (who.launcher) a.rank = -1;
    return a;
  };
  std::shuffle(order.begin(), order.end(), rng);
  // Stop one by one...
  std::int64_t t = pick_ns(rng, at);
  std::int64_t last_stop = t;
  for (auto [job, rank] : order) {
    p.actions.push_back(aimed(Action{t, job, rank, SIGSTOP, "sigstop", "start", {{"order", "stop"}}}));
    last_stop = t;
    t += pick_ns(rng, stagger);
  }
  // ...and resume in a random order, each after its own log-uniform pause.
  std::shuffle(order.begin(), order.end(), rng);
  std::int64_t resume = last_stop;
  for (auto [job, rank] : order) {
    resume += log_uniform_ns(rng, dur) / static_cast<std::int64_t>(order.size());
    p.actions.push_back(aimed(Action{resume, job, rank, SIGCONT, "sigstop", "end", {{"order", "resume"}}}));
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("sigstop",
                            "pause ranks (SIGSTOP) for a log-uniform 1 ms - 2 s, one by one, resumed in random order",
                            plan);

}  // namespace harness
