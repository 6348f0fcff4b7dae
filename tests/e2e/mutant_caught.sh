#!/usr/bin/env bash
# A known-bad variant of shmcoord must be caught by the stock catalog within
# 60 s, by the invariant its patch names — and a catch counts only when the
# stock worker, run as a control with the same seed for the same time, is
# clean, and stays clean on the very trial that caught the mutant. A "catch"
# the stock worker also produces is a false alarm (or an injector artefact),
# not evidence about the mutant.
#   mutant_caught.sh SHMSTRESS WORKER_BIN EXPECTED_INVARIANT[|ANOTHER...]
# (alternatives: a flaw that breaks the lib's own state may show first as
# a crash, worker.clean-exit, before the invariant it was written against).
source "$(dirname "$0")/lib.sh"
shmstress=$1 worker=$2 expected=$3
name=$(basename "$worker")
budget=${MUTANT_BUDGET_S:-60}
# The catalog (MUTANT_SCENARIOS narrows it, e.g. to measure by hand).
read -r -a catalog <<<"${MUTANT_SCENARIOS:-$(echo scenarios/*.toml)}"
# Which invariant a flaw trips first varies between runs; keep going (new
# seeds) until the expected one shows, within the budget.
start=$(date +%s)
found="" attempt=0 caught="" hit=""
while (( $(date +%s) - start < budget )); do
  left=$(( budget - ($(date +%s) - start) ))
  seed=$((20261121 + attempt))
  set +e
  t0=$(date +%s)
  "$shmstress" run "${catalog[@]}" --worker-bin "$worker" --duration "${left}s" --stop-on-violation \
    --seed "$seed" --out "$SCRATCH/run$attempt" >"$SCRATCH/out$attempt.log" 2>&1
  rc=$?
  took=$(( $(date +%s) - t0 ))
  set -e
  if [[ $rc -eq 0 || $rc -eq 4 ]] && [[ -f $SCRATCH/run$attempt/summary.json ]]; then
    # No violation in this attempt (4: its time ran out before every state was
    # reached, which a last, shortened attempt often does): not caught yet.
    found="$found [none in ${took}s, exit $rc]"
    attempt=$((attempt + 1))
    continue
  fi
  if [[ $rc -ne 1 ]]; then
    cat "$SCRATCH/out$attempt.log"
    fail "exit code $rc, expected 1 (a violation) for $name"
  fi
  got=$(json "$SCRATCH/run$attempt/summary.json" "' '.join(sorted({v['invariant'] for v in j['violations']}))")
  found="$found [$got]"
  for want in ${expected//|/ }; do
    if [[ " $got " == *" $want "* ]]; then
      caught=$attempt hit=$want
      break 2
    fi
  done
  attempt=$((attempt + 1))
done
[[ -n $caught ]] || fail "expected $expected within ${budget} s; saw$found"
caught_after=$(( $(date +%s) - start ))

summary="$SCRATCH/run$caught/summary.json"
# The catching trial ran on the run's own tmpfs (as root) and was kept: it is
# in the out dir whole, with its timeline, and the tmpfs left nothing behind,
# neither its dir nor a mount. (That the mount is never seen outside the run
# while it runs is harness/trial_dirs_test.cc's.)
kept=$(json "$summary" "[v for v in j['violations'] if v['invariant'] == '$hit'][0]['trial_dir']")
if [[ $kept != "$SCRATCH/run$caught/"* ]]; then
  # Why it was not kept is the summary's (a keep that failed is a harness error).
  json "$summary" "json.dumps({'violations': j['violations'], 'harness_errors': j.get('harness_errors')}, indent=1)" >&2
  tail -n 20 "$SCRATCH/out$caught.log" >&2
  fail "the catching trial's dir '$kept' is not in the out dir"
fi
for f in history.jsonl schedule.json scenario.toml verdict.json timeline.html; do
  [[ -s $kept/$f ]] || fail "the kept trial dir $kept has no $f"
done
[[ ! -e $SCRATCH/run$caught/.trials ]] || fail "the run left $SCRATCH/run$caught/.trials behind"
! grep -q " $SCRATCH/" /proc/self/mountinfo || fail "the run left a mount under $SCRATCH behind"
first=$(json "$summary" "[v for v in j['violations'] if v['invariant'] == '$hit'][0]['scenario'] + ' trial ' + str([v for v in j['violations'] if v['invariant'] == '$hit'][0]['trial'])")
file=$(json "$summary" "[v for v in j['violations'] if v['invariant'] == '$hit'][0]['scenario']")
trial=${first##* trial }

# Control 1: the stock worker, same seed, as long as the mutant's run took
# (at least 10 s): the same trial schedule, round-robin over the catalog.
# The suite's e2e.shmcoord_passes_catalog run (MUTANT_CONTROL: its
# summary.json) is that control when it has the same seed and catalog, and at
# least as many trials of every scenario as the mutant's run reached.
control_s=$(( took > 10 ? took : 10 ))
control=""
if [[ -z ${MUTANT_SCENARIOS:-} && -f ${MUTANT_CONTROL:-} ]] && "$PY" - "$MUTANT_CONTROL" "$SCRATCH/run$caught/summary.json" "$seed" <<'PYEOF'
import json, sys
c, m = (json.load(open(p)) for p in sys.argv[1:3])
ok = c.get('seed') == int(sys.argv[3]) and not c.get('violations') and c.get('verdict') == 'valid'
cs, ms = c['tally']['scenarios'], m['tally']['scenarios']
ok = ok and all(n in cs and cs[n]['trials'] >= ms[n]['trials'] for n in ms)
sys.exit(0 if ok else 1)
PYEOF
then
  control=$MUTANT_CONTROL
  control_s=$(json "$control" "round(j['elapsed_s'])")
else
  set +e
  "$shmstress" run "${catalog[@]}" --duration "${control_s}s" --seed "$seed" \
    --out "$SCRATCH/control" >"$SCRATCH/control.log" 2>&1
  crc=$?
  set -e
  control=$SCRATCH/control/summary.json
  cviol=$(json "$control" "len(j['violations'])")
  if [[ $cviol != 0 ]]; then
    tail -n 40 "$SCRATCH/control.log"
    fail "control (stock worker, seed $seed, ${control_s}s) is not clean: $cviol violation(s), exit $crc; the catch of $name does not count"
  fi
fi
ctrials=$(json "$control" "j['trials']")

# Control 2: the exact trial that caught the mutant, three times with the stock worker.
for i in 1 2 3; do
  set +e
  "$shmstress" run "scenarios/$file.toml" --seed "$seed" --trial "$trial" \
    --out "$SCRATCH/replay$i" >"$SCRATCH/replay$i.log" 2>&1
  set -e
  rv=$(json "$SCRATCH/replay$i/summary.json" "len(j['violations'])")
  if [[ $rv != 0 ]]; then
    cat "$SCRATCH/replay$i.log"
    fail "the stock worker also fails $file trial $trial (seed $seed): the catch of $name does not count"
  fi
done

echo "$name: caught in ${caught_after}s by $hit (first: $first; attempt $((caught + 1)); seen:$found)"
[[ $control == "${MUTANT_CONTROL:-}" ]] && shared=" (the catalog run's)" || shared=""
echo "$name: control clean$shared: stock worker, seed $seed, ${control_s}s, $ctrials trials, 0 violations; $file trial $trial clean 3/3"
