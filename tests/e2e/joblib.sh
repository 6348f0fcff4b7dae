#!/usr/bin/env bash
# joblib's memmapping pool end to end (Debian's python3-joblib 1.2.0, real loky
# worker processes), driven by subjects/joblib/adapter.py. Every scenario in
# scenarios/joblib/ states its outcome on 1.2.0 (expect_violation, or the two
# "# expect-" comment lines; tests/e2e/joblib_evidence.py reads them and
# derives the joblib states). A scenario passes only if some trial shows its
# outcome - the named invariant broken (or none, when none is named) with
# every evidence state - and no trial broke an invariant another way, judged
# from the trials' own verdict.json and history.jsonl as the Streaming e2e
# judges. Then the native shmcoord must pass the same scenario files.
#
# Budget: ~1.5 min on 2 cores. All scenarios run in one run, up to 6 trials at
# once: the two parent-kill scenarios (first, 2 trials each) spend ~35-40 s
# waiting for loky's workers to give up on their dead parent, on no CPU.
source "$(dirname "$0")/lib.sh"
S=$1
EVIDENCE=$(dirname "$0")/joblib_evidence.py
"$PY" -c 'import joblib, numpy' 2>/dev/null || fail "Debian's python3-joblib and python3-numpy are missing (scripts/setup installs them)"
# The long ones first, so they wait side by side while the others run.
files=(scenarios/joblib/parent-kill-busy.toml scenarios/joblib/parent-kill-idle.toml)
for f in scenarios/joblib/*.toml; do
  [[ " ${files[*]} " == *" $f "* ]] || files+=("$f")
done
[[ -n ${SHMSTRESS_JOBLIB_SCENARIOS:-} ]] && files=($SHMSTRESS_JOBLIB_SCENARIOS)
start=$(date +%s%N)
set +e
"$S" run "${files[@]}" --seed 5 --parallel 6 --keep-passing --max-kept 0 --out "$SCRATCH/joblib" >"$SCRATCH/joblib.log" 2>&1
rc=$?
set -e
((rc == 0 || rc == 1)) || { tail -30 "$SCRATCH/joblib.log"; fail "the joblib run ended with exit $rc (0 or 1 expected)"; }
for f in "${files[@]}"; do
  n=$(basename "$f" .toml)
  "$PY" "$EVIDENCE" --expect "$f" >"$SCRATCH/$n.exp"
  viol=$(sed -n 1p "$SCRATCH/$n.exp") evid=$(sed -n 2p "$SCRATCH/$n.exp")
  want="violation: ${viol:-none}; evidence: ${evid:-none}"
  "$PY" "$EVIDENCE" "$f" "$SCRATCH/joblib" >"$SCRATCH/$n.judged"
  read -r mode hit wrong trials timeouts <"$SCRATCH/$n.judged"
  details=$(tail -n +2 "$SCRATCH/$n.judged")
  ((trials > 0)) || { tail -30 "$SCRATCH/joblib.log"; fail "$n: no trial of it finished"; }
  ((timeouts == 0)) || { echo "$details"; fail "$n: $timeouts of $trials trials ran into the timeout"; }
  ((wrong == 0)) || { echo "$details"; fail "$n: a trial broke an invariant another way than the one named ($want)"; }
  ((hit > 0)) || {
    for t in "$SCRATCH/joblib/$n"/trial-*; do echo "$t: $("$PY" "$EVIDENCE" --facts "$t")"; done
    fail "$n: no trial of $trials showed the stated outcome ($want)"
  }
  echo "joblib/$n: shown in $hit of $trials trials [$want]"
done
# What the parent kills cost: from the kill to the last straggler gone.
for n in parent-kill-busy parent-kill-idle; do
  for t in "$SCRATCH/joblib/$n"/trial-*; do
    echo "joblib/$n/${t##*/}: $("$PY" "$EVIDENCE" --facts "$t" | "$PY" -c 'import json,sys; f=json.load(sys.stdin); print("folders gone", f.get("settled_after_kill_s"), "s after the kill")')"
  done
done
echo "joblib 1.2.0: all of scenarios/joblib in $((($(date +%s%N) - start) / 1000000)) ms"

# What is claimed caught has a control, and the reverse.
# - resource.private: the same trials under umask 077 create everything private and pass it
#   (the checker reads modes; it does not fail joblib by name).
# - cleanup.safety: sweep-while-live passed above with joblib's (absent) stale cleanup; with the
#   users' rm -rf sweep as the clean it must break, naming the sweep as the remover.
start=$(date +%s%N)
(umask 077; "$S" run scenarios/joblib/permission-shm.toml scenarios/joblib/small-shm.toml --trials 1 --seed 5 \
  --keep-passing --max-kept 0 --out "$SCRATCH/umask077" >"$SCRATCH/umask077.log" 2>&1) || true
"$PY" - "$SCRATCH/umask077" <<'EOF2' || { tail -20 "$SCRATCH/umask077.log"; fail "under umask 077 resource.private did not hold with everything created private"; }
import glob, json, sys
checks = [c for v in glob.glob(sys.argv[1] + '/*/trial-*/verdict.json') for c in json.load(open(v))['checks']
          if c['invariant'] == 'resource.private']
ok = len(checks) == 2 and all(c['verdict'] == 'valid' and 'resource-created-private' in c.get('reached', [])
                              for c in checks)
sys.exit(0 if ok else f'resource.private under umask 077: {checks}')
EOF2
set +e
SHMSTRESS_JOBLIB_CLEAN=sweep "$S" run scenarios/joblib/sweep-while-live.toml --trials 1 --seed 5 --keep-passing \
  --max-kept 0 --out "$SCRATCH/sweep" >"$SCRATCH/sweep.log" 2>&1
rc=$?
set -e
"$PY" - "$SCRATCH/sweep" <<'EOF2' || { tail -20 "$SCRATCH/sweep.log"; fail "the users' sweep removed a live pool's folder and cleanup.safety did not say so (exit $rc)"; }
import glob, json, sys
(v,) = glob.glob(sys.argv[1] + '/*/trial-*/verdict.json')
(c,) = [c for c in json.load(open(v))['checks'] if c['invariant'] == 'cleanup.safety']
ok = c['verdict'] == 'invalid' and 'witness-saw-removal' in c.get('reached', []) and \
    any('its pool still running' in p and 'the cleanup by job 1 rank 0' in p for p in c['problems'])
sys.exit(0 if ok else f'cleanup.safety with the sweep: {c}')
EOF2
echo "controls: umask 077 keeps resource.private; the users' sweep breaks cleanup.safety ($((($(date +%s%N) - start) / 1000000)) ms)"

# The same files against shmcoord: nothing of joblib's (no pool, no mapped
# event, no pool worker to kill) - every invariant must hold and none may time
# out. The joblib states the files expect to reach are never reached by
# shmcoord, so the run is inconclusive (exit 4) with a valid verdict.
start=$(date +%s%N)
set +e
"$S" run "${files[@]}" --subject native --trials 1 --seed 5 --parallel 4 --keep-passing --max-kept 0 \
  --out "$SCRATCH/native" >"$SCRATCH/native.log" 2>&1
rc=$?
set -e
verdict=$(json "$SCRATCH/native/summary.json" "j['verdict']")
((rc == 0 || rc == 4)) && [[ $verdict == valid ]] \
  || { tail -30 "$SCRATCH/native.log"; fail "shmcoord did not pass scenarios/joblib (exit $rc, verdict $verdict)"; }
no_timeouts "$SCRATCH/native" || fail "shmcoord: a trial of scenarios/joblib ran into its timeout"
echo "shmcoord passes all of scenarios/joblib ($(json "$SCRATCH/native/summary.json" "j['trials']") trials) in $((($(date +%s%N) - start) / 1000000)) ms"
