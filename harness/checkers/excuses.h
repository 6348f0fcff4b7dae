// What an injected fault can cause, per fault kind, in one place (DESIGN §4:
// "a fault excuses only the outcomes it can cause"). Checkers ask here whether
// a fault explains an operation's failure or a process's pause; nothing else in
// checkers/ looks at fault kinds. Pure, like the checkers.
//
// A rule says what a fault does to the process it aims at (kills it, stops it
// for its window, makes its syscalls fail with an errno, misconfigures it) and
// which error codes that can produce: in the target's own operations, in the
// operations of its job's other ranks (a job whose ranks wait for each other:
// a dead, stopped or failing rank makes the others time out or see the barrier
// or slot broken, and a poisoned slot hands the target's code on to them), and
// for world faults (aimed at no job) in everyone's. A kind without a rule
// excuses nothing.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "history.h"

namespace harness::checks {

struct FaultRule {
  std::string_view kind;
  std::string_view signal;  // for signal-on-event: "kill" or "stop" (by Fault::signal); else ""
  bool kills = false;       // the target dies at the fault's start
  bool stops = false;       // the target is stopped for the fault's window
  // Error codes the target's own operations may fail with. "errno" stands for
  // the code of the errno in the fault's detail ("errno": n).
  std::vector<std::string_view> own_codes;
  // Codes the target's job peers may fail with; "own" repeats own_codes.
  std::vector<std::string_view> peer_codes;
  // A world fault (job -1): codes any operation of the trial may fail with.
  std::vector<std::string_view> world_codes;
  std::string_view why;  // one line for docs and problem texts
};

// Every rule, for docs and tests.
const std::vector<FaultRule>& fault_rules();
// The rule for a fault event (signal-on-event picks by signal), or nullptr.
const FaultRule* rule_for(const Fault& f);

// The protocol's error code for an errno (docs/worker-protocol.md).
std::string_view code_for_errno(int e);

// Whether the fault stops / kills the worker it aims at.
bool stops(const Fault& f);
bool kills(const Fault& f);

// The fault that can make `op` fail with op.error_code (its own process's,
// a job peer's, or a world fault active while it ran), or nullptr.
const Fault* fault_causing_failure(const History& h, const Op& op);

// A fault that can keep a lock from `op` while it ran: a stopped process of
// any job (it may hold a barrier's mutex or the namespace's init lock), a
// fault that holds a lock itself (init-lock, a held stale lock), or one that
// makes op's own process's calls fail with op's code. A death never does: the
// kernel releases a dead holder's robust mutex and flock. nullptr if none.
const Fault* fault_keeping_lock(const History& h, const Op& op);

// "sigstop of job 0 rank 1 (pid 12) at +3.000ms": for problem texts.
std::string describe_fault(const History& h, const Fault& f);

}  // namespace harness::checks
