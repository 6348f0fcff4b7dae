#!/bin/bash
# A trial that can only hang ends when it is known to, not at its timeout
# (harness/supervisor_hang.cc): with the variant whose barrier never detects a
# dead participant (tests/mutants/barrier-no-death-detection), barrier-kill's
# survivors wait forever; the supervisor ends the trial once every live
# worker's barrier op is past its deadline + grace + margin (2 + 2 + 1 s),
# far below the scenario's 15 s timeout, and barrier.liveness still calls it
# a hang. Control: the stock worker, same seed and trials, ends no trial early.
# usage: hang_ends_early.sh SHMSTRESS VARIANT_WORKER
source "$(dirname "$0")/lib.sh"
BIN=$1 VARIANT=$2
[ -x "$BIN" ] && [ -x "$VARIANT" ] || fail "missing binaries: $BIN $VARIANT"

"$BIN" run scenarios/barrier-kill.toml --worker-bin "$VARIANT" --trials 4 --seed 11 --parallel 2 \
  --keep-passing --out "$SCRATCH/variant" >"$SCRATCH/variant.log" 2>&1 && fail "the variant passed barrier-kill"
"$PY" - "$SCRATCH/variant" <<'PYEOF' || fail "the variant's hung trials did not end early"
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
    early += 1
sys.exit(0 if early > 0 else 'no trial ended early')
PYEOF

"$BIN" run scenarios/barrier-kill.toml --trials 4 --seed 11 --parallel 2 --keep-passing \
  --out "$SCRATCH/stock" >"$SCRATCH/stock.log" 2>&1 || { cat "$SCRATCH/stock.log"; fail "the stock worker failed barrier-kill"; }
if grep -l '"hung"' "$SCRATCH"/stock/barrier-kill/trial-*/history.jsonl; then fail "a stock trial was ended early"; fi
echo "PASS"
