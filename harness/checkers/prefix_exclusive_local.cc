// prefix.exclusive-local: a local dir registered (with a remote, on either
// side) by a live job is never granted to another job, which instead gets a
// clear "in-use" error naming the dir; and only a live job can make a dir
// "in use" (DESIGN §4). "Live" is the hold of checkers/history_queries.h without its
// stale remainder: a dead job must not block a restart.
//
// Verdicts: invalid when two conflicting jobs certainly held at one moment, or
// a refusal names no shared dir, or a refusal came while no conflicting job
// could have held the dir; valid when the holds overlap only while an
// acquire or release was in flight; unknown when the scenario facts for a job
// are missing.
//
// At a cut (judges_cuts): holds still running are certain only up to their
// holders' last sign of life (history_queries.cc), so two holds overlap for
// certain only where both holders spoke; a refusal's "no live holder" reads
// holds possibly running to the cut, which later facts only lengthen.
#include <fmt/format.h>

#include <set>

#include "checker.h"
#include "checkers/history_queries.h"

namespace harness {
namespace {

// The dirs two jobs share where either side has a remote.
std::vector<std::string> conflicts(const TrialMeta& meta, int a, int b) {
  std::vector<std::string> out;
  const JobMeta& ja = meta.jobs[a];
  const JobMeta& jb = meta.jobs[b];
  auto remote = [](const JobMeta& j, std::size_t i) {
    return i < j.has_remote.size() && j.has_remote[i];
  };
  for (std::size_t i = 0; i < ja.dirs.size(); ++i) {
    for (std::size_t k = 0; k < jb.dirs.size(); ++k) {
      if (ja.dirs[i] == jb.dirs[k] && (remote(ja, i) || remote(jb, k))) out.push_back(ja.dirs[i]);
    }
  }
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

CheckResult check_exclusive_local(const History& h) {
  checks::Report rep("prefix.exclusive-local");
  const int njobs = static_cast<int>(h.meta.jobs.size());
  std::vector<checks::JobHold> holds = checks::prefix_holds(h);

  for (const auto& x : holds) {
    for (const auto& y : holds) {
      if (x.job >= y.job || x.job >= njobs || y.job >= njobs) continue;
      auto dirs = conflicts(h.meta, x.job, y.job);
      if (dirs.empty()) {
        // Sharing a dir without a remote is allowed; say that it happened.
        for (const auto& d : h.meta.jobs[x.job].dirs) {
          for (const auto& e : h.meta.jobs[y.job].dirs) {
            if (d == e &&
                checks::overlaps(x.maybe_start, x.maybe_end, y.maybe_start, y.maybe_end)) {
              rep.reach("local-dir-shared-without-remote");
            }
          }
        }
        continue;
      }
      auto span = [&](const checks::JobHold& j, std::int64_t from, std::int64_t to) {
        return fmt::format("job {} (pids {}, prefix {}) from {} to {}", j.job, j.pids(), j.prefix,
                           checks::at(h, from), checks::at(h, to));
      };
      if (x.has_sure() && y.has_sure() &&
          checks::overlaps(x.sure_start, x.sure_end, y.sure_start, y.sure_end)) {
        rep.invalid(fmt::format(
            "local dir {} (with a remote) granted to {} and to {} at the same time", join(dirs),
            span(x, x.sure_start, x.sure_end), span(y, y.sure_start, y.sure_end)));
      } else if (checks::overlaps(x.maybe_start, x.maybe_end, y.maybe_start, y.maybe_end)) {
        // Overlap only while an acquire or release was in flight: a valid handover order exists.
        rep.reach("local-dir-handover-in-flight");
      } else {
        const auto& first = x.maybe_start <= y.maybe_start ? x : y;
        if (first.died_holding) rep.reach("local-dir-reused-after-owner-death");
      }
    }
  }

  for (const Op& op : h.ops) {
    if (op.op != "acquire" || op.outcome != Outcome::kFail || op.error_code != "in-use") continue;
    rep.reach("acquire-failed-in-use");
    if (op.job < 0 || op.job >= njobs) {
      rep.unknown(
          fmt::format("{} was refused \"in use\", but the scenario facts for job {} are missing",
                      checks::describe(h, op), op.job));
      continue;
    }
    // Who could have been holding one of its dirs while it asked.
    std::set<std::string> shared;
    std::string live;
    for (int other = 0; other < njobs; ++other) {
      if (other == op.job) continue;
      auto dirs = conflicts(h.meta, op.job, other);
      if (dirs.empty()) continue;
      shared.insert(dirs.begin(), dirs.end());
      bool held = false;
      for (const auto& j : holds) {
        held = held || (j.job == other && checks::overlaps(j.maybe_start, j.maybe_end, op.invoke_t,
                                                           op.complete_t + 1));
      }
      for (const Op& a :
           h.ops) {  // a conflicting acquire in flight may have registered the dir for a moment
        held = held ||
               (a.job == other && a.op == "acquire" &&
                checks::overlaps(a.invoke_t, a.complete_t + 1, op.invoke_t, op.complete_t + 1));
      }
      if (held) live += fmt::format("{}job {}", live.empty() ? "" : ", ", other);
    }
    if (live.empty()) {
      rep.invalid(fmt::format(
          "{} was refused \"in use\" at {} ({}), but no live job could have held {}",
          checks::describe(h, op), checks::at(h, op.complete_t), op.error_message,
          shared.empty() ? join(h.meta.jobs[op.job].dirs) : join({shared.begin(), shared.end()})));
      continue;
    }
    bool named = false;
    for (const auto& d : shared) named = named || op.error_message.find(d) != std::string::npos;
    if (!named && op.truncated) {
      rep.unknown(fmt::format("{} was refused \"in use\" with a truncated message that names none "
                              "of the shared dirs ({})",
                              checks::describe(h, op), join({shared.begin(), shared.end()})));
      continue;
    }
    if (!named) {
      rep.invalid(fmt::format(
          "{} was refused \"in use\" with a message that names none of the shared dirs ({}): {}",
          checks::describe(h, op), join({shared.begin(), shared.end()}), op.error_message));
      continue;
    }
    rep.reach("exclusive-local-refused");
  }
  return rep.take();
}

}  // namespace
}  // namespace harness

SHMSTRESS_REGISTER_CHECKER(
    "prefix.exclusive-local",
    "a local dir with a remote held by a live job is never granted to another; the other gets "
    "a clear in-use error naming it",
    harness::check_exclusive_local,
    {"acquire-failed-in-use", "exclusive-local-refused", "local-dir-shared-without-remote",
     "local-dir-reused-after-owner-death", "local-dir-handover-in-flight"},
    /*judges_cuts=*/true);
