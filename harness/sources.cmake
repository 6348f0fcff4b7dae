# The harness's sources, listed once for every build that compiles them:
# harness/CMakeLists.txt (its libraries and the stock worker's build token),
# harness/fuzz/ (the same code, instrumented, as one object library; it
# names the few files it leaves out) and tests/mutants/ (the worker). A
# file added to one list and not another used to break only the fuzz link,
# and only in CI. A new checker or injector is one line here.
set(SHMSTRESS_HARNESS_CORE_SOURCES
  # history + checkers
  history.cc
  checker.cc
  checkers/history_queries.cc
  checkers/prefix_unique.cc
  checkers/prefix_agreement.cc
  checkers/prefix_exclusive_local.cc
  checkers/prefix_progress.cc
  checkers/barrier_safety.cc
  checkers/barrier_liveness.cc
  checkers/cleanup_no_leak.cc
  checkers/cleanup_safety.cc
  checkers/resource_private.cc
  checkers/worker_clean_exit.cc
  checkers/job_teardown.cc
  checkers/ops_explained.cc
  checkers/ops_no_spin.cc
  checkers/harness_no_orphans.cc
  checkers/worker_exits.cc
  checkers/excuses.cc
  cut.cc
  # scenario
  scenario.cc
  # what a run adds up to, and which violations are the same flaw
  results.cc
  coverage.cc
  triage.cc
  baseline.cc
  baseline_decode.cc
  known.cc
  files.cc
  stored.cc
  stored_json.cc
  summary.cc
)
# The native worker's code (harness_worker): the only harness code that calls shmcoord.
set(SHMSTRESS_HARNESS_WORKER_SOURCES worker.cc zygote.cc events.cc)
# Planning, injectors, supervision, the run loop.
set(SHMSTRESS_HARNESS_RUNTIME_SOURCES
  plan.cc
  injector.cc
  supervisor.cc
  supervisor_spawn.cc
  supervisor_watch.cc
  supervisor_faults.cc
  supervisor_teardown.cc
  supervisor_hang.cc
  supervisor_cut.cc
  supervisor_spin.cc
  lock_holder.cc
  run.cc
  trial_dirs.cc
  concurrency.cc
  shrink.cc
  subject_check.cc
  subjects.cc
  run_lease.cc
  worker_exe.cc
  zygote_server.cc
)
# The fault kinds (injectors/), linked into the runtime: each registers itself.
set(_injectors
  sigkill.cc
  sigterm.cc
  interrupt.cc
  rlimit.cc
  sigstop.cc
  crash_point.cc
  fiu_errno.cc
  fiu_preload.cc
  unprivileged.cc
  stale_segment.cc
  stale_lock.cc
  exhaustion.cc
  misconfig.cc
  pool_worker_kill.cc
  on_event.cc
  pause_at_point.cc
  replacement.cc
  reused_pid.cc
  containers.cc
  init_lock.cc
  sometimes.cc
)
# Absolute, so the lists mean the same files from any directory that includes this.
foreach(_part CORE WORKER RUNTIME)
  list(TRANSFORM SHMSTRESS_HARNESS_${_part}_SOURCES PREPEND ${CMAKE_CURRENT_LIST_DIR}/)
endforeach()
list(TRANSFORM _injectors PREPEND ${PROJECT_SOURCE_DIR}/injectors/)
list(APPEND SHMSTRESS_HARNESS_RUNTIME_SOURCES ${_injectors})
unset(_injectors)
