# The harness's sources, listed once for every build that compiles them:
# harness/CMakeLists.txt (its libraries and the stock worker's build token),
# harness/fuzz/ (the same code, instrumented, as one object library; it
# names the few files it leaves out) and tests/mutants/ (the worker). A
# file added to one list and not another used to break only the fuzz link,
# and only in CI. A new checker or injector is one line here.
set(_d ${CMAKE_CURRENT_LIST_DIR})
set(SHMSTRESS_HARNESS_CORE_SOURCES
  # history + checkers
  ${_d}/history.cc
  ${_d}/checker.cc
  ${_d}/checkers/history_queries.cc
  ${_d}/checkers/prefix_unique.cc
  ${_d}/checkers/prefix_agreement.cc
  ${_d}/checkers/prefix_exclusive_local.cc
  ${_d}/checkers/prefix_progress.cc
  ${_d}/checkers/barrier_safety.cc
  ${_d}/checkers/barrier_liveness.cc
  ${_d}/checkers/cleanup_no_leak.cc
  ${_d}/checkers/cleanup_safety.cc
  ${_d}/checkers/resource_private.cc
  ${_d}/checkers/worker_clean_exit.cc
  ${_d}/checkers/job_teardown.cc
  ${_d}/checkers/ops_explained.cc
  ${_d}/checkers/harness_no_orphans.cc
  ${_d}/checkers/worker_exits.cc
  ${_d}/checkers/excuses.cc
  # scenario
  ${_d}/scenario.cc
  # what a run adds up to, and which violations are the same flaw
  ${_d}/results.cc
  ${_d}/coverage.cc
  ${_d}/triage.cc
  ${_d}/baseline.cc
  ${_d}/baseline_decode.cc
  ${_d}/known.cc
  ${_d}/files.cc
  ${_d}/stored.cc
  ${_d}/stored_json.cc
  ${_d}/summary.cc
)
# The native worker's code (harness_worker): the only harness code that calls shmcoord.
set(SHMSTRESS_HARNESS_WORKER_SOURCES ${_d}/worker.cc ${_d}/events.cc)
# Planning, injectors, supervision, the run loop.
set(SHMSTRESS_HARNESS_RUNTIME_SOURCES
  ${_d}/plan.cc
  ${_d}/injector.cc
  ${_d}/supervisor.cc
  ${_d}/supervisor_spawn.cc
  ${_d}/supervisor_watch.cc
  ${_d}/supervisor_faults.cc
  ${_d}/supervisor_teardown.cc
  ${_d}/supervisor_hang.cc
  ${_d}/lock_holder.cc
  ${_d}/run.cc
  ${_d}/trial_dirs.cc
  ${_d}/concurrency.cc
  ${_d}/shrink.cc
  ${_d}/subject_check.cc
  ${_d}/subjects.cc
  ${_d}/run_lease.cc
  ${_d}/worker_exe.cc
  ${PROJECT_SOURCE_DIR}/injectors/sigkill.cc
  ${PROJECT_SOURCE_DIR}/injectors/sigterm.cc
  ${PROJECT_SOURCE_DIR}/injectors/interrupt.cc
  ${PROJECT_SOURCE_DIR}/injectors/rlimit.cc
  ${PROJECT_SOURCE_DIR}/injectors/sigstop.cc
  ${PROJECT_SOURCE_DIR}/injectors/crash_point.cc
  ${PROJECT_SOURCE_DIR}/injectors/fiu_errno.cc
  ${PROJECT_SOURCE_DIR}/injectors/fiu_preload.cc
  ${PROJECT_SOURCE_DIR}/injectors/unprivileged.cc
  ${PROJECT_SOURCE_DIR}/injectors/stale_segment.cc
  ${PROJECT_SOURCE_DIR}/injectors/stale_lock.cc
  ${PROJECT_SOURCE_DIR}/injectors/exhaustion.cc
  ${PROJECT_SOURCE_DIR}/injectors/misconfig.cc
  ${PROJECT_SOURCE_DIR}/injectors/pool_worker_kill.cc
  ${PROJECT_SOURCE_DIR}/injectors/on_event.cc
  ${PROJECT_SOURCE_DIR}/injectors/pause_at_point.cc
  ${PROJECT_SOURCE_DIR}/injectors/replacement.cc
  ${PROJECT_SOURCE_DIR}/injectors/reused_pid.cc
  ${PROJECT_SOURCE_DIR}/injectors/containers.cc
  ${PROJECT_SOURCE_DIR}/injectors/init_lock.cc
  ${PROJECT_SOURCE_DIR}/injectors/sometimes.cc
)
unset(_d)
