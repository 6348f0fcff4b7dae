#!/bin/bash
# Judging a running trial (docs/architecture.md, "Judging a running trial"):
# under --stop-on-violation a trial ends at the first point its record is
# known complete and already invalid, and is judged up to there.
# 1. The stock worker, one trial of every scenario, --stop-on-violation: no
#    violation, no trial cut, and no cut of any stored record invalid
#    (`check --every-cut`, every record at up to 250 cuts).
# 2. A variant whose cleanup removes a live holder's names
#    (cleanup-unreadable-registry-is-garbage) on exhaustion-cleaning-as: the
#    catching trial is cut, ends well before the same trial run whole
#    (no cleanup step after the cut; the audit still runs), is
#    judged invalid by cleanup.safety up to the cut (the invariants that do
#    not judge cuts: not judged), `check` of the stored dir says the same,
#    the same trial run whole with that variant fails cleanup.safety too, and
#    no cut of its record is unsound.
# usage: cuts_sound.sh SHMSTRESS VARIANT_WORKER
source "$(dirname "$0")/lib.sh"
BIN=$1 VARIANT=$2
[ -x "$BIN" ] && [ -x "$VARIANT" ] || fail "missing binaries: $BIN $VARIANT"

set +e
"$BIN" run scenarios/*.toml --trials 1 --seed 31 --stop-on-violation --keep-passing --max-kept 0 \
  --out "$SCRATCH/stock" >"$SCRATCH/stock.log" 2>&1
rc=$?
set -e
# 4: one trial of each does not reach every state a scenario expects; that is all it says.
[[ ($rc -eq 0 || $rc -eq 4) && $(json "$SCRATCH/stock/summary.json" "len(j['violations'])") == 0 ]] ||
  { tail -30 "$SCRATCH/stock.log"; fail "the stock worker failed the catalog (exit $rc)"; }
if grep -l '"phase":"cut"' "$SCRATCH"/stock/*/trial-*/history.jsonl; then fail "a stock trial was cut"; fi
"$BIN" check --every-cut "$SCRATCH/stock" >"$SCRATCH/stock.cuts" 2>&1 || { cat "$SCRATCH/stock.cuts"; fail "unsound cuts of stock records"; }
tail -1 "$SCRATCH/stock.cuts"
grep -q ", 0 invalid, 0 unsound$" "$SCRATCH/stock.cuts" || fail "a cut of a stock record is invalid: $(tail -1 "$SCRATCH/stock.cuts")"

set +e
"$BIN" run scenarios/exhaustion-cleaning-as.toml --worker-bin "$VARIANT" --trials 4 --seed 11 --stop-on-violation \
  --out "$SCRATCH/variant" >"$SCRATCH/variant.log" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || { tail -30 "$SCRATCH/variant.log"; fail "the variant's run exited $rc, expected 1"; }
trial=$(json "$SCRATCH/variant/summary.json" "j['violations'][0]['trial']")
dir="$SCRATCH/variant/exhaustion-cleaning-as/trial-$trial"
"$PY" - "$dir" <<'PYEOF' || fail "the catching trial was not cut and judged at the cut"
import json, sys
d = sys.argv[1]
ev = [json.loads(l) for l in open(d + '/history.jsonl') if l.strip()]
trial = [e for e in ev if e.get('type') == 'trial']
start = next(e['t'] for e in trial if e['phase'] == 'start')
cut = [e for e in trial if e['phase'] == 'cut']
end = next(e['t'] for e in trial if e['phase'] == 'end')
if not cut:
    sys.exit('no cut mark')
print(f"cut at +{(cut[0]['t'] - start) / 1e6:.1f} ms, invalid {cut[0]['invalid']}; ended at +{(end - start) / 1e6:.1f} ms")
v = json.load(open(d + '/verdict.json'))
checks = {c['invariant']: c for c in v['checks']}
if checks['cleanup.safety']['verdict'] != 'invalid':
    sys.exit('cleanup.safety not invalid at the cut')
if 'not judged' not in checks['cleanup.no-leak'].get('excused', ''):
    sys.exit('cleanup.no-leak was judged on a cut trial')
# No cleanup step after a cut (it serves only the leak check); the audit still runs.
if any(e.get('type') == 'invoke' and e.get('job') == -1 for e in ev):
    sys.exit('a cleanup step ran after the cut')
if not any(e.get('type') == 'audit' for e in ev):
    sys.exit('no audit after the cut')
open(d + '/../../took_ms', 'w').write(str((end - start) / 1e6))
PYEOF
set +e
"$BIN" check "$dir" >"$SCRATCH/recheck.log" 2>&1
crc=$?
set -e
[[ $crc -eq 1 ]] || { cat "$SCRATCH/recheck.log"; fail "check of the stored cut trial exited $crc, expected 1"; }
"$BIN" check --every-cut "$SCRATCH/variant" || fail "unsound cuts of the variant's records"

# The same trial whole (no --stop-on-violation): it fails the same way, later.
set +e
"$BIN" run scenarios/exhaustion-cleaning-as.toml --worker-bin "$VARIANT" --seed 11 --trial "$trial" \
  --out "$SCRATCH/whole" >"$SCRATCH/whole.log" 2>&1
set -e
"$PY" - "$SCRATCH/whole/exhaustion-cleaning-as/trial-$trial" "$(cat "$SCRATCH/variant/took_ms")" <<'PYEOF' || fail "the whole trial disagrees"
import json, sys
d, cut_took = sys.argv[1], float(sys.argv[2])
ev = [json.loads(l) for l in open(d + '/history.jsonl') if l.strip()]
trial = [e for e in ev if e.get('type') == 'trial']
if any(e['phase'] == 'cut' for e in trial):
    sys.exit('a trial without --stop-on-violation was cut')
took = (next(e['t'] for e in trial if e['phase'] == 'end') - next(e['t'] for e in trial if e['phase'] == 'start')) / 1e6
v = json.load(open(d + '/verdict.json'))
bad = [c['invariant'] for c in v['checks'] if c['verdict'] == 'invalid']
print(f'whole: {took:.1f} ms, invalid {bad}; cut: {cut_took:.1f} ms')
if 'cleanup.safety' not in bad:
    sys.exit('the whole trial does not fail cleanup.safety')
if cut_took > took - 300:
    sys.exit('the cut trial did not end well before the whole one')
PYEOF
echo "PASS"
