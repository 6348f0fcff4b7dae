#!/usr/bin/env bash
# The harness's memory is flat in the number of trials (issue 12): a soak of
# at least 5,000 real trials of a cheap scenario at a high --parallel, with the
# live summary.json and metrics textfile on, must not grow the harness's RSS
# by 10 % or more after a warm-up. The RSS is read from outside
# (/proc/PID/status VmRSS) once a second, the trial count from the live
# summary.json; the run is then stopped with SIGINT (exit 4: interrupted, no
# violation). ctest label "soak": not in the default suite (scripts/test).
#   flat_memory.sh SHMSTRESS    env: SOAK_TRIALS (6000), SOAK_WARMUP (1000), SOAK_PARALLEL (32)
source "$(dirname "$0")/lib.sh"
S=$1
[[ -x $S ]] || fail "no shmstress binary at '$S'"
target=${SOAK_TRIALS:-6000}
warmup=${SOAK_WARMUP:-1000}
parallel=${SOAK_PARALLEL:-32}
(( target >= 5000 )) || fail "SOAK_TRIALS=$target: the claim is about at least 5,000 trials"

# Cheap: one rank acquires, runs a round, releases. A second scenario kills
# its rank, so faults and reached states are counted too.
cat >"$SCRATCH/cheap.toml" <<'TOML'
description = "One rank: acquire, one barrier round, release."
trials = 1
timeout = "10s"
[[job]]
ranks = 1
dirs = ["/data/{job}"]
[job.workload]
rounds = 1
TOML
cat >"$SCRATCH/cheap-kill.toml" <<'TOML'
description = "One rank, SIGKILLed early (often while holding its prefix)."
invariants = ["prefix.unique", "cleanup.safety", "harness.no-orphans"]
trials = 1
timeout = "10s"
[[job]]
ranks = 1
dirs = ["/data/{job}"]
[job.workload]
rounds = 1
hold = "5ms"
[[fault]]
kind = "sigkill"
at = "0-10ms"
job = 0
rank = 0
TOML
"$S" run "$SCRATCH/cheap.toml" "$SCRATCH/cheap-kill.toml" --trials 1 --seed 1 --out "$SCRATCH/probe" >"$SCRATCH/probe.log" 2>&1 ||
  { cat "$SCRATCH/probe.log"; fail "the cheap scenarios do not pass on their own"; }

"$S" run "$SCRATCH/cheap.toml" "$SCRATCH/cheap-kill.toml" --duration 1800s --parallel "$parallel" --seed 7 \
  --out "$SCRATCH/run" --metrics-file "$SCRATCH/metrics/shmstress.prom" >"$SCRATCH/run.log" 2>&1 &
pid=$!
trap 'kill -INT $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$SCRATCH"' EXIT
t0=$(date +%s)
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null; }
trials() { "$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['trials'])" "$SCRATCH/run/summary.json" 2>/dev/null || echo 0; }
baseline=0 base_trials=0 peak=0 n=0
echo "# seconds trials rss_kb" >"$SCRATCH/samples.txt"
while kill -0 $pid 2>/dev/null; do
  n=$(trials) r=$(rss)
  [[ -n $r ]] || break
  echo "$(( $(date +%s) - t0 )) $n $r" >>"$SCRATCH/samples.txt"
  if (( baseline == 0 && n >= warmup )); then baseline=$r base_trials=$n; fi
  if (( baseline > 0 && r > peak )); then peak=$r; fi
  (( n >= target )) && break
  (( $(date +%s) - t0 < 1700 )) || break
  sleep 1
done
end_rss=$(rss)
kill -INT $pid
set +e
wait $pid; rc=$?
set -e
trap 'rm -rf "$SCRATCH"' EXIT
secs=$(( $(date +%s) - t0 ))
cat "$SCRATCH/samples.txt" | awk 'NR == 1 || NR % 15 == 0'
(( n >= target )) || { tail -5 "$SCRATCH/run.log"; fail "only $n trials in ${secs}s (wanted $target)"; }
[[ $rc -eq 4 ]] || { tail -20 "$SCRATCH/run.log"; fail "the soak exited $rc, expected 4 (interrupted, no violation)"; }
(( baseline > 0 && peak > 0 )) || fail "no RSS samples after the warm-up"
growth=$("$PY" -c "import sys; b, p = map(int, sys.argv[1:]); print(f'{100.0 * (p - b) / b:.2f}')" "$baseline" "$peak")
echo "flat memory: $n trials in ${secs}s at --parallel $parallel; RSS ${baseline} kB at $base_trials trials (after warm-up), peak ${peak} kB after, ${end_rss:-?} kB at the end: growth ${growth} %"
"$PY" -c "import sys; sys.exit(0 if float(sys.argv[1]) < 10.0 else 1)" "$growth" ||
  fail "RSS grew ${growth} % after the warm-up (limit 10 %)"
