#!/bin/bash
# A trial that can only hang ends when it is known to, not at its timeout
# (harness/supervisor_hang.cc): with the variant whose barrier never detects a
# dead participant (tests/mutants/barrier-no-death-detection), barrier-kill's
# survivors wait forever; the supervisor ends the trial once every live
# worker's barrier op is past its deadline + grace + margin (2 + 2 + 1 s),
# far below the scenario's 15 s timeout, and barrier.liveness still calls it
# a hang. Then the same with every rank stopping itself for a few ms inside
# each of its barrier waits (pause-at-point at crash/barrier/wait/after-enter,
# every pass of the 20 rounds; the same self-stop `sometimes` makes, but at a
# point every survivor surely passes, also inside the wait that hangs - a
# random `sometimes` point is passed or not as the ranks happen to race, and
# under load no trial of four paused): a worker's own stop is left out of its
# op's time, as the checkers leave it out, and no longer keeps the watcher
# off. Control: the stock worker, same seeds and trials, ends no trial early.
# usage: hang_ends_early.sh SHMSTRESS VARIANT_WORKER
source "$(dirname "$0")/lib.sh"
BIN=$1 VARIANT=$2
[ -x "$BIN" ] && [ -x "$VARIANT" ] || fail "missing binaries: $BIN $VARIANT"

paused="$SCRATCH/paused/barrier-kill.toml"
mkdir -p "$SCRATCH/paused"
{
  cat scenarios/barrier-kill.toml
  printf '\n[[fault]]\nkind = "pause-at-point"\npoint = "crash/barrier/wait/after-enter"\n'
  printf 'target = "each"\nnth = [%s]\nhold = "2-10ms"\n' "$(seq -s, 1 20)"
} >"$paused"

for case in plain paused; do
  scenario=scenarios/barrier-kill.toml
  [ $case = paused ] && scenario=$paused
  "$BIN" run "$scenario" --worker-bin "$VARIANT" --trials 4 --seed 11 --parallel 2 \
    --keep-passing --out "$SCRATCH/variant-$case" >"$SCRATCH/variant-$case.log" 2>&1 &&
    fail "the variant passed barrier-kill ($case)"
  "$PY" - "$SCRATCH/variant-$case" $case <<'PYEOF' || fail "the variant's hung trials did not end early ($case)"
import glob, json, sys
early = 0
for h in sorted(glob.glob(sys.argv[1] + '/barrier-kill/trial-*/history.jsonl')):
    ev = [json.loads(l) for l in open(h) if l.strip()]
    start = next(e['t'] for e in ev if e.get('type') == 'trial' and e.get('phase') == 'start')
    hung = [e for e in ev if e.get('type') == 'trial' and e.get('phase') == 'timeout' and 'hung' in e]
    if not hung:
        continue
    took = (hung[0]['t'] - start) / 1e9
    verdict = json.load(open(h.replace('history.jsonl', 'verdict.json')))
    bad = [c['invariant'] for c in verdict['checks'] if c['verdict'] == 'invalid']
    print(f'{h}: ended after {took:.1f} s ({hung[0]["hung"][:90]}...), invalid: {bad}')
    if took >= 10 or 'barrier.liveness' not in bad:
        sys.exit(f'{h}: ended after {took:.1f} s, invalid {bad}')
    # Only a trial where a survivor stopped inside the wait that hung proves
    # the point: a stop after the invoke of an op that never completed.
    done = {(e['pid'], e['id']) for e in ev if e.get('type') in ('ok', 'fail')}
    open_since = {e['pid']: e['t'] for e in ev
                  if e.get('type') == 'invoke' and (e['pid'], e['id']) not in done}
    stops = [e for e in ev if e.get('type') == 'fault' and e.get('kind') == 'pause-at-point'
             and e.get('phase') == 'start' and e.get('effect') == 'stopped'
             and e['pid'] in open_since and e['t'] > open_since[e['pid']]]
    if sys.argv[2] == 'paused' and not stops:
        continue
    early += 1
print(f'{early} hung trials ended early ({sys.argv[2]})')
sys.exit(0 if early > 0 else 'no trial ended early')
PYEOF

  # Exit 0, or 4 (valid, a state the 4 trials did not reach): what the
  # control shows is that no trial is invalid and none ended early.
  rc=0
  "$BIN" run "$scenario" --trials 4 --seed 11 --parallel 2 --keep-passing \
    --out "$SCRATCH/stock-$case" >"$SCRATCH/stock-$case.log" 2>&1 || rc=$?
  if [ $rc != 0 ] && [ $rc != 4 ]; then
    cat "$SCRATCH/stock-$case.log"
    fail "the stock worker failed barrier-kill ($case, exit $rc)"
  fi
  if grep -l '"hung"' "$SCRATCH"/stock-$case/barrier-kill/trial-*/history.jsonl; then
    fail "a stock trial was ended early ($case)"
  fi
done
echo "PASS"
