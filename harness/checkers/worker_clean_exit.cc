// worker.clean-exit: no worker dies by a signal nobody sent it (SEGV, ABRT,
// BUS, ...) or an uncaught exception; every failure is a reported error
// (DESIGN §4).
//
// A worker exits 0, or 1 after reporting a failed op. Killed by a signal is
// fine only when the harness sent it or the worker killed itself at a named
// crash point, or, for a loader worker, when the rank that forked it was gone
// (it dies with its parent). Exit 70 is the worker's "uncaught exception". A worker that
// exited normally with an op still open lost that op. Exit 1 with no failed op
// in the history is a failure nobody reported: unknown (it may be the worker's
// own setup failing, whose error is only in its stderr).
#include <fmt/format.h>

#include <csignal>
#include <cstring>
#include <set>

#include "checker.h"
#include "checkers/history_queries.h"

namespace harness {
namespace {

constexpr int kUncaughtException = 70;

std::string signal_label(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

CheckResult check_worker_clean_exit(const History& h) {
  checks::Report rep("worker.clean-exit");
  const std::set<int> crashes = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};
  for (const Exit& e : h.exits) {
    const std::string who = checks::who(e);
    if (e.status_unknown) continue;  // its parent reaped it first: nothing to judge
    if (e.signal > 0) {
      if (crashes.contains(e.signal)) {
        rep.invalid(
            fmt::format("{} died of {} at {}", who, signal_label(e.signal), checks::at(h, e.t)));
      } else if (!e.crash_point.empty()) {
        rep.reach("killed-at-crash-point");
      } else if (e.signal_sent_by_harness) {
        rep.reach(e.teardown ? "killed-at-teardown" : "killed-by-harness");
      } else if (e.parent_gone && e.signal == SIGKILL) {
        rep.reach("loader-died-with-its-rank");
      } else if (e.by_launcher) {
        rep.reach("rank-stopped-by-launcher");
      } else {
        rep.invalid(fmt::format(
            "{} was killed by {} at {}, which neither the harness nor a crash point sent", who,
            signal_label(e.signal), checks::at(h, e.t)));
      }
      continue;
    }
    if (e.exit_code < 0)
      continue;  // neither code nor signal: build_history already reported the event
    if (e.exit_code == kUncaughtException) {
      rep.invalid(fmt::format("{} exited {} (uncaught exception) at {}", who, e.exit_code,
                              checks::at(h, e.t)));
      continue;
    }
    if (e.exit_code != 0 && e.exit_code != 1) {
      rep.invalid(fmt::format("{} exited {} at {}; a worker exits 0, or 1 after a reported error",
                              who, e.exit_code, checks::at(h, e.t)));
      continue;
    }
    bool reported = false;
    for (const Op& op : h.ops) {
      if (op.job != e.job || op.rank != e.rank || (e.pid != 0 && op.pid != e.pid)) continue;
      reported = reported || op.outcome == Outcome::kFail;
      if (op.outcome == Outcome::kInfo && op.info_cause.starts_with("exited ")) {
        rep.invalid(fmt::format("{} exited {} at {} with {} still open", who, e.exit_code,
                                checks::at(h, e.t), checks::describe(h, op)));
      }
    }
    if (e.exit_code == 1 && e.launcher) {
      // torchrun exits 1 when a rank failed, or when it was stopped itself
      // (SIGTERM: its SignalException): the ranks' own exits say why.
      rep.reach("launcher-ended-with-failure");
      continue;
    }
    if (e.exit_code == 1) {
      rep.reach("worker-reported-error");
      if (!reported) {
        rep.unknown(fmt::format("{} exited 1 at {} without reporting a failed op", who,
                                checks::at(h, e.t)));
      }
    }
  }
  return rep.take();
}

}  // namespace
}  // namespace harness

SHMSTRESS_REGISTER_CHECKER(
    "worker.clean-exit",
    "no worker dies of a signal nobody sent or an uncaught exception; every failure is reported",
    harness::check_worker_clean_exit,
    {"killed-at-crash-point", "killed-by-harness", "killed-at-teardown", "worker-reported-error",
     "loader-died-with-its-rank", "rank-stopped-by-launcher", "launcher-ended-with-failure"});
