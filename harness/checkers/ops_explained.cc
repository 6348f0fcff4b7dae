// ops.explained: every failed operation has a cause the history shows, and
// the cause its error claims is true (DESIGN §4).
//
// A failure is explained by one of these causes (kCauses, one table; the
// checker tests have a case per row):
// - fault:    a fault that can cause that very error (checkers/excuses.cc:
//             aimed at that process, at a peer of its job, or at the world);
// - death:    a process of the op's job was gone before the op ended (an exit
//             by a signal or at a crash point, a launcher's end): its peers
//             time out or see the slot or barrier broken;
// - cascade:  a process of the op's job (its own included: a retry) had
//             failed an op before: a poisoned slot hands its code to every
//             rank, and one failure breaks a barrier for everyone;
// - stop:     a stop window overlapped the op (a stopped process may hold any
//             lock of the namespace): a timeout;
// - conflict: another job that shares one of its local dirs, with a remote on
//             either side, had acquired before it: "in use";
// - config:   the scenario misconfigures the job's local world size (any
//             code: the subject fails on it as it does).
// A failure with none of them is a violation: a subject that fails on its own
// (every contended acquire "timed out after 0 ms", a FileExistsError with no
// fault at all) is a broken subject, not a clean error.
//
// Claims are judged whatever the cause: an error that names a participant or
// a rank as dead or departed ("participant 1 (pid 12) died before entering
// round 3", "local rank 0 (pid 7) of job 'job0' died before all 2 local ranks
// joined", "a participant died holding the barrier lock") must be true: the
// process it names was not seen alive after the failure and had not detached
// but for a "detached", and for an unnamed participant someone of the job died
// before. A stopped process is alive (SIGSTOP is no death).
#include <fmt/format.h>

#include <cstdlib>
#include <regex>
#include <string_view>

#include "checker.h"
#include "checkers/history_queries.h"
#include "checkers/excuses.h"

namespace harness {
namespace {

struct Cause {
  std::string_view name;
  // Returns a short account of the cause when it explains `op`'s failure.
  std::string (*explains)(const History& h, const Op& op);
};

bool in_job(const Op& a, const Op& b) { return a.job == b.job && a.job >= 0; }

std::string by_fault(const History& h, const Op& op) {
  const Fault* f = checks::fault_causing_failure(h, op);
  return f ? checks::describe_fault(h, *f) : "";
}

std::string by_death(const History& h, const Op& op) {
  for (const Exit& e : h.exits) {
    if (e.job != op.job || e.pid == op.pid || checks::gone_t(e) > op.complete_t) continue;
    if (e.signal > 0 || e.launcher || !e.crash_point.empty()) return checks::who(e) + " was gone";
  }
  return "";
}

std::string by_cascade(const History& h, const Op& op) {
  for (const Op& other : h.ops) {
    if (&other == &op || !in_job(other, op) || other.outcome != Outcome::kFail) continue;
    if (other.complete_t <= op.complete_t && other.invoke_t < op.complete_t) {
      return other.op + " of " + checks::who(other) + " failed (" + other.error_code + ")";
    }
  }
  return "";
}

std::string by_stop(const History& h, const Op& op) {
  if (op.error_code != "timeout") return "";
  for (const Fault& f : h.faults) {
    if (checks::is_stop(f) && f.start_t <= op.complete_t && f.end_t >= op.invoke_t) {
      return checks::describe_fault(h, f);
    }
  }
  return "";
}

std::string by_conflict(const History& h, const Op& op) {
  if (op.op != "acquire" || op.error_code != "in-use") return "";
  if (op.job < 0 || static_cast<std::size_t>(op.job) >= h.meta.jobs.size()) return "";
  const JobMeta& mine = h.meta.jobs[static_cast<std::size_t>(op.job)];
  for (std::size_t j = 0; j < h.meta.jobs.size(); ++j) {
    if (static_cast<int>(j) == op.job) continue;
    const JobMeta& theirs = h.meta.jobs[j];
    for (std::size_t a = 0; a < mine.dirs.size(); ++a) {
      for (std::size_t b = 0; b < theirs.dirs.size(); ++b) {
        if (mine.dirs[a] != theirs.dirs[b] || !(mine.has_remote[a] || theirs.has_remote[b])) continue;
        for (const Op& other : h.ops) {
          if (other.job == static_cast<int>(j) && other.op == "acquire" && other.invoke_t < op.complete_t) {
            return fmt::format("job {} shares {}", j, mine.dirs[a]);
          }
        }
      }
    }
  }
  return "";
}

// Whatever the subject calls it: a misconfigured job fails as the subject
// fails on it (Streaming's ranks without a local world size all lead and
// collide on File exists); whether they all fail alike and clearly is
// prefix.agreement's question.
std::string by_config(const History& h, const Op& op) {
  if (op.job < 0 || static_cast<std::size_t>(op.job) >= h.meta.jobs.size()) return "";
  return h.meta.jobs[static_cast<std::size_t>(op.job)].misconfigured ? "the job's local world size is misconfigured"
                                                                       : "";
}

constexpr Cause kCauses[] = {
    {"fault", by_fault},   {"death", by_death},       {"cascade", by_cascade},
    {"stop", by_stop},     {"conflict", by_conflict}, {"config", by_config},
};

// The latest moment a process certainly ran: its latest event of its own.
std::int64_t seen_alive(const History& h, int job, int pid) {
  std::int64_t t = std::numeric_limits<std::int64_t>::min();
  for (const Op& o : h.ops) {
    if (o.job != job || o.pid != pid) continue;
    t = std::max(t, o.invoke_t);
    if (o.outcome != Outcome::kInfo) t = std::max(t, o.complete_t);
  }
  return t;
}

bool detached_before(const History& h, int job, int pid, std::int64_t t) {
  for (const Op& o : h.ops) {
    if (o.job == job && o.pid == pid && o.op == "barrier_detach" && o.invoke_t <= t) return true;
  }
  return false;
}

// Whether the error's claim about who died or left is false.
std::string false_claim(const History& h, const Op& op) {
  static const std::regex named(
      R"((participant \d+|local rank \d+) \(pid (\d+)( in another pid namespace)?\)[^;]*? (died|detached))");
  std::smatch m;
  const std::string& msg = op.error_message;
  if (std::regex_search(msg, m, named)) {
    const int pid = std::atoi(m[2].str().c_str());
    const bool elsewhere = m[3].matched;
    const bool detached = m[4].str() == "detached";
    for (std::size_t j = 0; j < h.meta.jobs.size(); ++j) {
      const int job = static_cast<int>(j);
      if (elsewhere ? job == op.job : job != op.job) continue;
      if (pid == op.pid && job == op.job) continue;
      const std::int64_t seen = seen_alive(h, job, pid);
      if (seen <= op.complete_t) continue;
      if (detached && detached_before(h, job, pid, op.complete_t)) continue;
      return fmt::format("it says {} (pid {}) {}, but that process ran on until {}{}", m[1].str(), pid, m[4].str(),
                         checks::at(h, seen), detached ? " without having detached" : "");
    }
    return "";
  }
  if (msg.find("a participant died holding the barrier lock") != std::string::npos) {
    for (const Exit& e : h.exits) {
      if (e.job == op.job && e.pid != op.pid && checks::gone_t(e) <= op.complete_t + 1 &&
          (e.signal > 0 || !e.crash_point.empty())) {
        return "";
      }
    }
    for (const Fault& f : h.faults) {
      if (checks::kills(f) && f.job == op.job && f.start_t <= op.complete_t) return "";
    }
    return "it says a participant died holding the barrier lock, but no process of the job had died";
  }
  return "";
}

CheckResult check_ops_explained(const History& h) {
  checks::Report rep("ops.explained");
  for (const Op& op : h.ops) {
    if (op.outcome != Outcome::kFail) continue;
    if (std::string lie = false_claim(h, op); !lie.empty()) {
      rep.invalid(fmt::format("{} failed at {} ({}: {}): {}", checks::describe(h, op), checks::at(h, op.complete_t),
                              op.error_code, op.error_message, lie));
      continue;
    }
    bool explained = false;
    for (const Cause& c : kCauses) {
      if (!c.explains(h, op).empty()) {
        rep.reach(fmt::format("failure-explained-by-{}", c.name));
        explained = true;
        break;
      }
    }
    if (!explained) {
      rep.invalid(fmt::format("{} failed at {} ({}: {}) with no cause the history shows: no fault that can cause "
                              "it, no death, stop or earlier failure in its job, no conflicting job",
                              checks::describe(h, op), checks::at(h, op.complete_t), op.error_code, op.error_message));
    }
  }
  return rep.take();
}

}  // namespace
}  // namespace harness

SHMSTRESS_REGISTER_CHECKER("ops.explained",
                           "every failed operation has a cause the history shows, and the cause it claims is true",
                           harness::check_ops_explained,
                           {"failure-explained-by-fault", "failure-explained-by-death", "failure-explained-by-cascade",
                            "failure-explained-by-stop", "failure-explained-by-conflict",
                            "failure-explained-by-config"});
