// signal-on-event: send a signal to a rank right after a worker logs a given
// event — "kill rank 1 as soon as it has acquired", "stop rank 0 when it enters
// round 3" — for subjects that have no crash points of their own. Params:
// after = "TYPE:OP" (e.g. "ok:acquire", "invoke:barrier", "point:crash/...");
// nth (the nth such event, default 1); job, rank (whose event; default job 0
// rank 0); target_rank (who gets the signal; default the same rank);
// signal = "kill" | "stop" (default kill); delay (default 0ms); duration (stop
// only: SIGCONT after it, default 200ms); tree = true (kill only) to kill the
// target's whole process tree (its process group, e.g. with CPython's resource
// tracker) as an OOM kill, a container stop or torchrun's killpg does.
// worker = n: the event is one of that rank's loader worker #n, which is also
// the target unless target_rank is given; target = "launcher": the signal
// goes to the job's launcher; signal = "term" sends SIGTERM. value = { key =
// scalar, ... }: only an event whose value holds those (e.g. a barrier_attach
// that says created = true) counts, so a fault per rank kills whichever rank
// the subject's own event names (the one that created the barrier, F6).

#include <algorithm>
#include <csignal>
#include <iterator>

#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"after", "nth", "job", "rank", "target_rank", "signal", "delay", "duration", "tree",
                             "worker", "target", "value"})) {
    return e;
  }
  std::string after;
  if (auto e = param_string(f, "after", "", {}, &after)) return e;
  auto colon = after.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == after.size()) {
    return std::string("'after' must be TYPE:OP, e.g. \"ok:acquire\"");
  }
  // A trigger that names nothing a worker logs never fires: refused here.
  const std::string type = after.substr(0, colon), what = after.substr(colon + 1);
  if (type == "point") {
    if (auto e = check_failpoint("after", what)) return e;
  } else if (type == "invoke" || type == "ok" || type == "fail") {
    // The native worker's and the Streaming adapter's ops (docs/worker-protocol.md),
    // a loader worker's iterate, and a pool subject's (docs/joblib.md).
    static const char* const kOps[] = {"acquire", "release", "barrier", "barrier_attach", "barrier_detach",
                                       "clean",   "segment", "witness", "iterate", "pool",
                                       "mapped",  "folder",  "file",    "chmod",   "track",
                                       "remove"};
    if (std::find(std::begin(kOps), std::end(kOps), what) == std::end(kOps)) {
      return "'after' = \"" + after + "\": '" + what +
             "' is no operation of the worker protocol (acquire, release, barrier, barrier_attach, barrier_detach, "
             "clean, segment, witness, iterate; a pool subject's pool, mapped, folder, file, chmod, track, remove)";
    }
  } else {
    return "'after' = \"" + after + "\": '" + type + "' is no event a worker logs (invoke, ok, fail or point)";
  }
  FaultSpec who = f;
  if (!who.params.contains("job")) who.params["job"] = 0;
  if (!who.params.contains("rank")) who.params["rank"] = 0;
  int job, rank;
  if (auto e = pick_target(who, s, rng, &job, &rank)) return e;
  int target = rank;
  if (auto e = param_int(f, "target_rank", rank, 0, s.jobs[job].ranks - 1, &target)) return e;
  int nth = 1;
  if (auto e = param_int(f, "nth", 1, 1, 1000000, &nth)) return e;
  std::string sig;
  if (auto e = param_string(f, "signal", "kill", {"kill", "stop", "term"}, &sig)) return e;
  bool tree = false;
  if (auto e = param_bool(f, "tree", false, &tree)) return e;
  if (tree && sig != "kill") return std::string("'tree' applies to signal = \"kill\" only");
  MsRange delay, dur;
  if (auto e = param_range(f, "delay", MsRange{Ms(0), Ms(0)}, &delay)) return e;
  if (auto e = param_range(f, "duration", MsRange{Ms(200), Ms(200)}, &dur)) return e;
  Action a;
  a.at_ns = pick_ns(rng, delay);
  a.job = job;
  a.rank = target;
  a.signal = sig == "kill" ? SIGKILL : sig == "term" ? SIGTERM : SIGSTOP;
  a.fault = "signal-on-event";
  a.phase = sig == "stop" ? "start" : "instant";
  if (auto e = pick_process(f, s, job, &a)) return e;
  a.on_worker = a.worker;
  if (f.params.contains("target_rank")) a.worker = -1;  // the event is the worker's, the signal the rank's
  a.detail = {{"after", after}, {"nth", nth}, {"of_rank", rank}};
  if (a.on_worker >= 0) a.detail["of_worker"] = a.on_worker;
  a.tree = tree;
  if (tree) a.detail["tree"] = true;
  a.on_type = after.substr(0, colon);
  a.on_op = after.substr(colon + 1);
  a.on_job = job;
  a.on_rank = rank;
  a.on_nth = nth;
  if (f.params.contains("value")) {
    const auto& v = f.params["value"];
    bool scalars = v.is_object() && !v.empty();
    if (scalars) {
      for (const auto& x : v) scalars &= x.is_boolean() || x.is_number_integer() || x.is_number_unsigned() || x.is_string();
    }
    if (!scalars) {
      return std::string("'value' must be a non-empty table of booleans, integers or strings (the trigger "
                         "event's value fields to match), e.g. { created = true }");
    }
    a.on_value = v;
    a.detail["value"] = v;
  }
  p.actions.push_back(a);
  if (sig == "stop") {
    Action c = a;
    c.at_ns = a.at_ns + pick_ns(rng, dur);
    c.signal = SIGCONT;
    c.phase = "end";
    p.actions.push_back(c);
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("signal-on-event",
                            "SIGKILL or SIGSTOP a rank right after a worker logs a given event (ok:acquire, ...)", plan);

}  // namespace harness
