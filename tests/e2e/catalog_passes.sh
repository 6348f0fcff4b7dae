#!/usr/bin/env bash
# The real shmcoord passes the whole stock catalog: exit 0, every invariant
# valid, every scenario's expect_reached states reached.
#   catalog_passes.sh SHMSTRESS [KEEP_DIR]
# With KEEP_DIR the run stays there: it is the stock-worker control that the
# e2e.mutant_caught tests share. 8 trials of every scenario with the seed of
# their first attempts: more than most reach before their catch, and
# tests/e2e/mutant_caught.sh checks the seed and the per-scenario trial counts
# before it uses this run instead of running its own.
# At the default, adaptive number of trials at once (the test runs alone,
# RUN_SERIAL): 27 s against 164 s at --parallel 2, which it ran at while
# stop-owner's SIGSTOP was placed by time and landed before job 0's acquire
# under load; it is placed by event now (docs/faults.md, signal-on-event).
source "$(dirname "$0")/lib.sh"
shmstress=$1 keep=${2:-}
out="$SCRATCH/run"
if [[ -n $keep ]]; then
  rm -rf "$keep"
  out=$keep
fi
set +e
"$shmstress" run scenarios/*.toml --trials "${CATALOG_TRIALS:-8}" --seed 20261121 --out "$out" >"$SCRATCH/out.log" 2>"$SCRATCH/err.log"
rc=$?
set -e
tail -n 5 "$SCRATCH/err.log"
cat "$SCRATCH/out.log"
if [[ $rc -ne 0 ]]; then
  [[ -n $keep ]] && rm -rf "$keep"  # never a control that is not clean
  fail "shmcoord did not pass the catalog (exit $rc)"
fi
[[ $(json "$out/summary.json" "j['verdict']") == valid ]] || fail "verdict not valid"
[[ $(json "$out/summary.json" "len(j['violations'])") == 0 ]] || fail "violations reported"
# The console of a green run of the whole catalog fits a screen: the verdict
# first, no scenario x invariant matrix (docs/reports.md).
lines=$(grep -c . "$SCRATCH/out.log")
(( lines <= 25 )) || fail "a green catalog run printed $lines lines after its progress line (at most 25)"
[[ $(grep -m1 . "$SCRATCH/out.log") == "verdict valid: "* ]] || fail "the console does not start with the verdict"
! grep -q "prefix.unique" "$SCRATCH/out.log" || fail "the console prints the invariant matrix"
