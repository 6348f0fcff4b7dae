#!/usr/bin/env bash
# A known-bad variant of shmcoord must be caught by the stock catalog within
# 60 s, and by the invariant its patch names.
#   mutant_caught.sh SHMSTRESS WORKER_BIN EXPECTED_INVARIANT
source "$(dirname "$0")/lib.sh"
shmstress=$1 worker=$2 expected=$3
# Which invariant a flaw trips first varies between runs; keep going (new
# seeds) until the expected one shows, within the 60 s budget.
start=$(date +%s)
found="" first="" attempt=0
while (( $(date +%s) - start < 60 )); do
  left=$(( 60 - ($(date +%s) - start) ))
  set +e
  "$shmstress" run scenarios/*.toml --worker-bin "$worker" --duration "${left}s" --stop-on-violation \
    --seed $((20261121 + attempt)) --out "$SCRATCH/run$attempt" >"$SCRATCH/out$attempt.log" 2>&1
  rc=$?
  set -e
  if [[ $rc -ne 1 ]]; then
    cat "$SCRATCH/out$attempt.log"
    fail "exit code $rc, expected 1 (a violation) for $(basename "$worker")"
  fi
  got=$(json "$SCRATCH/run$attempt/summary.json" "' '.join(sorted({v['invariant'] for v in j['violations']}))")
  found="$found $got"
  [[ -n $first ]] || first=$(json "$SCRATCH/run$attempt/summary.json" "j['violations'][0]['scenario'] + ' trial ' + str(j['violations'][0]['trial'])")
  if [[ " $got " == *" $expected "* ]]; then
    echo "$(basename "$worker"): caught in $(( $(date +%s) - start ))s by $expected (first violation: [$got] in $first; attempt $((attempt + 1)))"
    exit 0
  fi
  attempt=$((attempt + 1))
done
fail "expected $expected within 60 s; saw [$found]"
