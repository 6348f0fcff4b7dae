#!/usr/bin/env bash
# A known-bad variant of shmcoord must be caught by the stock catalog within
# 60 s, and by the invariant its patch names.
#   mutant_caught.sh SHMSTRESS WORKER_BIN EXPECTED_INVARIANT
source "$(dirname "$0")/lib.sh"
shmstress=$1 worker=$2 expected=$3
start=$(date +%s.%N)
set +e
"$shmstress" run scenarios/*.toml --worker-bin "$worker" --duration 60s --stop-on-violation \
  --seed 20261121 --out "$SCRATCH/run" >"$SCRATCH/out.log" 2>&1
rc=$?
set -e
took=$("$PY" -c "import sys; print(round($(date +%s.%N) - $start, 1))")
[[ $rc -eq 1 ]] || { cat "$SCRATCH/out.log"; fail "exit code $rc, expected 1 (a violation) for $(basename "$worker")"; }
found=$(json "$SCRATCH/run/summary.json" "' '.join(sorted({v['invariant'] for v in j['violations']}))")
first=$(json "$SCRATCH/run/summary.json" "j['violations'][0]['scenario'] + ' trial ' + str(j['violations'][0]['trial'])")
echo "$(basename "$worker"): caught in ${took}s by [$found] ($first)"
[[ " $found " == *" $expected "* ]] || { cat "$SCRATCH/out.log"; fail "expected $expected among [$found]"; }
