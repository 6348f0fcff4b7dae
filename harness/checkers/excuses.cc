#include "checkers/excuses.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <csignal>

#include "checkers/history_queries.h"

namespace harness::checks {
namespace {

// The fault kinds of injectors/ and what each can cause. Keep in step with
// docs/scenarios.md ("What a fault excuses"); excuse_rules_test.cc fails for
// an injector kind without a rule.
const std::vector<FaultRule>& rules() {
  static const std::vector<FaultRule> r = {
      {"sigkill", "", true, false, {}, {"timeout", "broken"}, {},
       "a killed rank never arrives: its peers may time out or see the slot/barrier broken"},
      {"signal-on-event", "kill", true, false, {}, {"timeout", "broken"}, {},
       "as sigkill"},
      {"crash-point", "", true, false, {}, {"timeout", "broken"}, {},
       "as sigkill (the rank kills itself at a failpoint)"},
      {"sigterm", "", true, false, {}, {"timeout", "broken"}, {},
       "as sigkill (a rank that does not handle SIGTERM dies of it; a launcher SIGTERMs its ranks)"},
      {"signal-on-event", "term", true, false, {}, {"timeout", "broken"}, {}, "as sigterm"},
      {"interrupt", "", true, false, {"interrupted", "timeout", "broken"}, {"interrupted", "timeout", "broken"}, {},
       "Ctrl-C: every process of the job's foreground group (ranks, loader workers) gets SIGINT at once, so "
       "each is the fault's own: an op it cuts off fails interrupted (a DataLoader worker lives to say so), a "
       "rank dies of it after its exit handlers, and one that sees another go first may time out or see the "
       "group broken"},
      {"rlimit", "", false, false, {"exhausted"}, {"own", "timeout", "broken"}, {},
       "the rank's fds or address space run out for one step: exhausted, passed on to its peers"},
      {"sigstop", "", false, true, {"timeout"}, {"timeout"}, {},
       "a stopped rank is alive: it and its peers may time out while it is stopped, nothing else"},
      {"signal-on-event", "stop", false, true, {"timeout"}, {"timeout"}, {}, "as sigstop"},
      {"fiu-errno", "", false, false, {"errno"}, {"own", "timeout", "broken"}, {},
       "the rank's syscalls fail with the errno: its own ops fail with that code, its peers "
       "with that code (a poisoned slot), a timeout or a broken barrier"},
      {"fiu-preload", "", false, false, {"errno"}, {"own", "timeout", "broken"}, {},
       "as fiu-errno, through libfiu's POSIX preload"},
      {"unprivileged", "", false, false, {"permission"}, {"own", "timeout", "broken"}, {},
       "the rank runs as another uid: permission errors, passed on to its peers"},
      {"emfile", "", false, false, {"exhausted"}, {"own", "timeout", "broken"}, {},
       "the rank may hold few fds: exhausted, passed on to its peers"},
      {"enospc", "", false, false, {}, {}, {"exhausted", "timeout", "broken"},
       "a small /dev/shm: anyone may fail exhausted, and their peers time out or break"},
      {"misconfig", "process-count", false, false, {"mismatch"}, {"own", "timeout", "broken"}, {},
       "ranks disagree on the barrier's size: mismatch, the barrier broken for everyone"},
      {"misconfig", "late-joiner", false, false, {}, {"timeout"}, {},
       "a rank attaches late: its peers may time out waiting"},
      {"misconfig", "lock-dir", false, false, {}, {}, {},
       "a rank's lock dir differs: excuses nothing"},
      {"misconfig", "lock-dir-shm", false, false, {"invalid-argument"}, {"own", "timeout", "broken"}, {},
       "a rank's lock dir is /dev/shm: it may be refused (invalid-argument), its peers fail with it"},
      {"misconfig", "barrier-name", false, false, {"invalid-argument", "mismatch"}, {"own", "timeout", "broken"}, {},
       "a rank names its barrier outside its prefix: it may be refused (a reserved name), or meet another "
       "job's live barrier of that name (mismatch); its peers fail with it"},
      {"pause-at-point", "", false, true, {"timeout"}, {"timeout"}, {},
       "a rank stopped at a failpoint is alive: as sigstop (the pauses stay below the deadlines)"},
      {"sometimes", "", false, true, {"timeout"}, {"timeout"}, {},
       "a rank paused a few ms at a random failpoint (the run's sometimes-on pauses): as pause-at-point"},
      {"replacement", "", true, true, {"timeout"}, {"timeout", "broken"}, {},
       "a rank stopped having arrived, then killed with its tree: as a stop, then as sigkill"},
      {"reused-pid", "", true, true, {"timeout"}, {"timeout", "broken"}, {},
       "a rank stopped, killed with its tree and its pid reused: as replacement; the window "
       "with the reused pid (job -1) excuses nothing"},
      {"containers", "", false, false, {}, {}, {},
       "jobs in their own pid namespaces over one /dev/shm: the subject must cope, excuses "
       "nothing"},
      {"init-lock", "", false, false, {}, {}, {},
       "the init lock held for a while (below the deadlines): excuses nothing"},
      {"stale-segment", "", false, false, {}, {}, {},
       "leftovers of dead jobs: the subject must cope, excuses nothing"},
      {"stale-lock", "", false, false, {}, {}, {},
       "lock files, held or not: the subject must cope, excuses nothing"},
      {"pool-worker-kill", "", false, false, {"worker-died", "broken"}, {}, {},
       "a pool worker the rank started (not a rank) dies mid-task: the rank's pool call fails "
       "worker-died (or broken)"},
  };
  return r;
}

std::string variant_of(const Fault& f) {
  if (f.kind == "signal-on-event") {
    if (f.signal == SIGKILL) return "kill";
    if (f.signal == SIGTERM) return "term";
    if (f.signal == SIGSTOP || f.signal == SIGCONT) return "stop";
    return "";
  }
  if (f.kind == "misconfig" && f.detail.is_object()) {
    auto it = f.detail.find("what");
    if (it != f.detail.end() && it->is_string()) return it->get<std::string>();
  }
  return "";
}

bool has(const std::vector<std::string_view>& codes, std::string_view code) {
  return std::find(codes.begin(), codes.end(), code) != codes.end();
}

// Whether `rule` lists `code` in `codes`, with "errno" and "own" expanded.
bool covers(const FaultRule& rule, const Fault& f, const std::vector<std::string_view>& codes,
            std::string_view code, int depth = 0) {
  if (code.empty()) return false;
  if (has(codes, code)) return true;
  if (has(codes, "errno") && f.detail.is_object()) {
    auto e = json_int(f.detail, "errno");
    if (e && code_for_errno(static_cast<int>(*e)) == code) return true;
  }
  return depth == 0 && has(codes, "own") && covers(rule, f, rule.own_codes, code, depth + 1);
}

}  // namespace

const std::vector<FaultRule>& fault_rules() { return rules(); }

const FaultRule* rule_for(const Fault& f) {
  const std::string variant = variant_of(f);
  for (const FaultRule& r : rules()) {
    if (r.kind == f.kind && r.signal == variant) return &r;
  }
  return nullptr;
}

std::string_view code_for_errno(int e) {
  switch (e) {
    case EACCES:
    case EPERM:
      return "permission";
    case ENOENT:
      return "not-found";
    case EEXIST:
      return "exists";
    case EMFILE:
    case ENFILE:
    case ENOSPC:
    case ENOMEM:
      return "exhausted";
    case ETIMEDOUT:
      return "timeout";
    case EINVAL:
      return "invalid-argument";
    default:
      return "io";
  }
}

bool stops(const Fault& f) {
  const FaultRule* r = rule_for(f);
  return r != nullptr && r->stops;
}

bool kills(const Fault& f) {
  const FaultRule* r = rule_for(f);
  return r != nullptr && r->kills;
}

const Fault* fault_causing_failure(const History& h, const Op& op) {
  if (op.outcome != Outcome::kFail) return nullptr;
  for (const Fault& f : h.faults) {
    const FaultRule* rule = rule_for(f);
    if (rule == nullptr) continue;
    // When the fault can act on the op: a stop during it; anything else
    // (a death, a changed environment) from its start on.
    const bool in_time = rule->stops && !rule->kills
                             ? (f.start_t <= op.complete_t && f.end_t >= op.invoke_t)
                             : f.start_t <= op.complete_t;
    if (!in_time) continue;
    if (f.job < 0 && f.pid == 0) {
      if (covers(*rule, f, rule->world_codes, op.error_code)) return &f;
      continue;
    }
    if (aims_at(f, op.job, op.rank, op.pid)) {
      if (covers(*rule, f, rule->own_codes, op.error_code)) return &f;
    } else if (f.job == op.job && f.job >= 0) {
      if (covers(*rule, f, rule->peer_codes, op.error_code)) return &f;
    }
  }
  return nullptr;
}

const Fault* fault_keeping_lock(const History& h, const Op& op) {
  for (const Fault& f : h.faults) {
    const FaultRule* rule = rule_for(f);
    const bool during = f.start_t <= op.complete_t && std::max(f.end_t, f.start_t) >= op.invoke_t;
    if (during && ((rule != nullptr && rule->stops) || f.protect || f.kind == "init-lock"))
      return &f;
    if (rule != nullptr && !rule->kills && f.start_t <= op.complete_t &&
        aims_at(f, op.job, op.rank, op.pid) && covers(*rule, f, rule->own_codes, op.error_code)) {
      return &f;
    }
  }
  return nullptr;
}

std::string describe_fault(const History& h, const Fault& f) {
  std::string target = f.job < 0 ? std::string("the trial")
                       : f.rank < 0
                           ? fmt::format("job {}", f.job)
                           : who(f.job, f.rank, f.pid);
  if (f.end_t > f.start_t) {
    return fmt::format("{} of {} from {} to {}", f.kind, target, at(h, f.start_t), at(h, f.end_t));
  }
  return fmt::format("{} of {} at {}", f.kind, target, at(h, f.start_t));
}

}  // namespace harness::checks
