#!/usr/bin/env bash
# A subject writing events that do not fit the worker protocol costs its own
# trials their verdict (each is unknown, with history errors in the console,
# summary.json and JUnit), never the run: no abort, every report written, and
# `check` and `report` re-read the kept trials without crashing.
#   hostile_events.sh SHMSTRESS
source "$(dirname "$0")/lib.sh"
S=$1
subject="exec:/usr/bin/python3 $PWD/tests/e2e/subjects/bad_events.py"
cat >"$SCRATCH/bad.toml" <<'TOML'
description = "one job of 2 ranks whose subject writes malformed events"
trials = 3
[[job]]
ranks = 2
TOML
set +e
"$S" run "$SCRATCH/bad.toml" --subject "$subject" --allow-shared-shm --seed 5 --out "$SCRATCH/run" \
  --junit "$SCRATCH/junit.xml" >"$SCRATCH/out.log" 2>&1
rc=$?
set -e
cat "$SCRATCH/out.log" | tail -n 30
(( rc == 1 || rc == 4 )) || fail "run exited $rc (a crash or harness failure), expected 4 (inconclusive) or 1"
[[ -f $SCRATCH/run/summary.json ]] || fail "no summary.json"
n=$(json "$SCRATCH/run/summary.json" "len(j.get('history_errors', []))")
[[ $n == 3 ]] || fail "summary.json lists $n trials with history errors, expected 3"
json "$SCRATCH/run/summary.json" "[e for t in j['history_errors'] for e in t['errors']]" | grep -q 'needs an integer t and a string type' \
  || fail "summary.json does not name the wrong-typed event"
grep -q 'history errors in bad trial' "$SCRATCH/out.log" || fail "the console does not show the history errors"
grep -q '<error type="history"' "$SCRATCH/junit.xml" || fail "JUnit has no history error"
for cmd in check report; do
  set +e
  "$S" $cmd "$SCRATCH/run" >"$SCRATCH/$cmd.log" 2>&1
  crc=$?
  set -e
  (( crc == 1 || crc == 4 )) || { cat "$SCRATCH/$cmd.log"; fail "$cmd exited $crc on the kept trials"; }
done
echo "hostile events: run exit $rc, 3 trials with history errors in summary, console and JUnit; check and report fine"
