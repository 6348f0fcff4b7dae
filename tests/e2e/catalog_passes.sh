#!/usr/bin/env bash
# The real shmcoord passes the whole stock catalog: exit 0, every invariant valid.
source "$(dirname "$0")/lib.sh"
shmstress=$1
set +e
"$shmstress" run scenarios/*.toml --trials ${CATALOG_TRIALS:-6} --seed 20261121 --out "$SCRATCH/run" >"$SCRATCH/out.log" 2>&1
rc=$?
set -e
tail -n 40 "$SCRATCH/out.log"
[[ $rc -eq 0 ]] || fail "shmcoord did not pass the catalog (exit $rc)"
[[ $(json "$SCRATCH/run/summary.json" "j['verdict']") == valid ]] || fail "verdict not valid"
[[ $(json "$SCRATCH/run/summary.json" "len(j['violations'])") == 0 ]] || fail "violations reported"
