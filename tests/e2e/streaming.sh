#!/usr/bin/env bash
# The external-subject path end to end: every scenario in scenarios/streaming/
# reproduces its Streaming failure against the stand-in package (which keeps
# the original's flaws), driven through subjects/streaming/adapter.py exactly
# as a user's installed Streaming would be — the violated invariant is one the
# scenario names — and the native shmcoord passes the same scenarios.
source "$(dirname "$0")/lib.sh"
S=$1
export SHMSTRESS_STREAMING_PATH=$PWD/tests/streaming_standin
export SHMSTRESS_STANDIN_PROCESS_GROUP=file  # the stand-in's dist.barrier(), as under a launcher
# each scenario names its subject: subject = "streaming" (subjects/streaming/subject.toml)
for f in scenarios/streaming/*.toml; do
  n=$(basename "$f" .toml)
  start=$(date +%s%N)
  set +e
  "$S" run "$f" --stop-on-violation --seed 5 --out "$SCRATCH/$n" >"$SCRATCH/$n.log" 2>&1
  rc=$?
  set -e
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  [[ $rc -eq 1 ]] || { tail -20 "$SCRATCH/$n.log"; fail "$n: exit $rc against the stand-in, expected 1 (a violation)"; }
  got=$(json "$SCRATCH/$n/summary.json" "' '.join(sorted({v['invariant'] for v in j['violations']}))")
  want=$(grep -E '^(invariants|expect_violation)' "$f")
  hit=0
  for inv in $got; do [[ $want == *"\"$inv\""* ]] && hit=1; done
  (( hit )) || fail "$n: violated [$got], none of which the scenario names ($want)"
  echo "streaming/$n: caught by [$got] in ${ms} ms"
done
unset SHMSTRESS_STANDIN_PROCESS_GROUP
"$S" run scenarios/streaming/*.toml --subject native --trials 3 --seed 5 --out "$SCRATCH/native" >"$SCRATCH/native.log" 2>&1 \
  || { tail -30 "$SCRATCH/native.log"; fail "shmcoord did not pass scenarios/streaming"; }
echo "shmcoord passes all of scenarios/streaming ($(json "$SCRATCH/native/summary.json" "j['trials']") trials)"
