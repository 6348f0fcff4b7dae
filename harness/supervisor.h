// The trial supervisor: a forked child of the harness that owns one trial.
//
// Process contract:
// - It makes the trial's world: a private mount namespace with its own tmpfs
//   /dev/shm (when permitted; otherwise a unique shm name root the native
//   subject honours) and a lock dir in the trial dir, its own process group,
//   and itself a child subreaper, so every descendant of the trial (workers,
//   their resource trackers, forgotten grandchildren) is reaped here.
// - It dies with the harness (PR_SET_PDEATHSIG), and its workers die with it;
//   workers are started with clone(CLONE_VM | CLONE_VFORK) + execve, as
//   posix_spawn does (not Boost.Process v2: in Boost 1.81 its environment and
//   launcher initialisers corrupted memory here once the environment grew;
//   see exec_worker for what a worker is set up with);
//   so a harness killed by SIGKILL leaves no worker alive and, with a mount
//   namespace, no segment either (the tmpfs vanishes with its last process).
// - It is the only reaper of the trial. It carries out the plan's actions at
//   their times, logs every fault and exit to history.jsonl, kills everything at
//   the trial timeout, SIGCONTs every worker before teardown (the heal), runs the
//   cleanup step, waits for stragglers, then audits for leftovers and orphans.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "history.h"
#include "plan.h"

namespace harness {

struct SupervisorConfig {
  std::string exe;        // this binary: workers are `exe worker`
  // An external subject: workers are `command... worker` instead (argv, no
  // shell). It uses fixed names in /dev/shm and $TMPDIR, so it only runs in a
  // private mount namespace unless allow_shared_shm.
  std::vector<std::string> command;
  std::optional<std::string> shm_root;  // the subject's own name root (in a private /dev/shm)
  std::string shm_size;  // the subject's own /dev/shm size (subject.toml); "": 256m
  bool allow_shared_shm = false;
  std::string trial_dir;  // exists; history.jsonl and rank-*/ go here
  bool allow_mount_ns = true;
  std::string fallback_root;  // shm root when no mount namespace: unique per trial
  // The run's zygote (zygote.h): its registration socket, inherited from
  // the harness; native workers are forked from it where they can be. -1:
  // every worker is exec'd (--exec-workers, or no zygote).
  int zygote_fd = -1;
  // How long an op of each kind may stay open, not counting what its process
  // waited for a CPU, before the checkers call it a hang however the trial
  // goes on (its deadline + grace + a margin): with it the supervisor ends a
  // trial that can only hang then, not at its timeout (supervisor_hang.cc).
  // Empty: every trial runs to its end or its timeout.
  std::map<std::string, std::int64_t> hang_after_ns;
  // Set under --stop-on-violation (harness/cut.h): the supervisor judges the
  // running trial's record at every point it knows complete, with the
  // checkers of `cut_invariants`, and ends the trial at the first invalid
  // one, marking the cut in the history. Unset, or no invariants: every
  // trial is judged whole.
  std::optional<TrialMeta> cut_meta;
  std::vector<std::string> cut_invariants;
  // ops.no-spin's budget (TrialMeta::spin_budget_ns) for a subject whose
  // workers report cpu_run_ns: the supervisor looks at the CPU of a worker
  // whose op stays open, and logs the look (a `cpu` event) when that op
  // spun (supervisor_spin.cc). 0: no looks.
  std::int64_t spin_budget_ns = 0;
};

// Forks the supervisor; returns its pid (-1 on fork failure). The child never returns.
pid_t start_supervisor(const TrialPlan& plan, const SupervisorConfig& cfg);

}  // namespace harness
