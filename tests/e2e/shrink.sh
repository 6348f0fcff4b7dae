#!/usr/bin/env bash
# shrink turns a failing trial of a known-bad variant into a smaller scenario
# that still violates the same invariant, and its reproduce command fails again;
# --save writes it as a regression scenario named by the failure's fingerprint
# (one of the run's buckets) that loads, and holds against the native subject.
source "$(dirname "$0")/lib.sh"
S=$1 W=$2
"$S" run scenarios/kill-holder.toml --trials 4 --seed 8 --worker-bin "$W" --out "$SCRATCH/run" >/dev/null 2>&1 || true
# A trial of the variant's own flaw (cleanup.safety), shrunk for that: a trial may also
# break barrier.liveness on the way (a barrier the variant's cleanup removed), less reliably.
cleanup_safety_trial() {  # RUN_DIR -> the first trial dir its summary lists as breaking cleanup.safety
  json "$1/summary.json" "next((v['trial_dir'] for v in j['violations'] if v['invariant'] == 'cleanup.safety'), '')"
}
trial=$(cleanup_safety_trial "$SCRATCH/run")
[[ -n $trial ]] || fail "the known-bad variant produced no cleanup.safety trial to shrink"
"$S" shrink "$trial" --allow-stored-command --invariant cleanup.safety --retries 3 --save "$SCRATCH/regress" >"$SCRATCH/shrink.txt" 2>&1 || { cat "$SCRATCH/shrink.txt"; fail "shrink failed"; }
cat "$SCRATCH/shrink.txt"
[[ -f $trial/minimal.toml ]] || fail "no minimal.toml"
orig=$(grep '^  original:' "$SCRATCH/shrink.txt" | grep -o '[0-9]* ranks' | cut -d' ' -f1)
min=$(grep '^  minimal:' "$SCRATCH/shrink.txt" | grep -o '[0-9]* ranks' | cut -d' ' -f1)
(( min < orig )) || fail "nothing was removed ($orig -> $min ranks)"
inv=$(grep 'still fails with' "$SCRATCH/shrink.txt" | cut -d' ' -f1)
saved=$(ls "$SCRATCH"/regress/regress-kill-holder-*.toml 2>/dev/null | head -1)
[[ -n $saved ]] || fail "--save wrote no regress-kill-holder-<hash>.toml"
hash=$(basename "$saved" .toml); hash=${hash##*-}
grep -q "^description = .*$inv/kill-holder/$hash" "$saved" || { cat "$saved"; fail "the regression's description names no fingerprint $inv/kill-holder/$hash"; }
buckets=$(json "$SCRATCH/run/summary.json" "' '.join(b['fingerprint'] for b in j['buckets'])")
[[ " $buckets " == *" $inv/kill-holder/$hash "* ]] || fail "$inv/kill-holder/$hash is not one of the run's buckets [$buckets]"
"$S" run "$saved" --trials 3 --seed 1 --out "$SCRATCH/regress-run" >"$SCRATCH/regress.log" 2>&1 ||
  { tail -20 "$SCRATCH/regress.log"; fail "the regression scenario does not hold against the native subject"; }
echo "saved $(basename "$saved"); it holds against the native subject"
# Every candidate runs the trial's own subject: the known-bad worker given only
# as `--subject exec:` (the scenario's own subject, the stock worker, would
# never fail again, and shrink would give up as not reproducible).
"$S" run scenarios/kill-holder.toml --trials 6 --seed 8 --subject "exec:$W" --out "$SCRATCH/ext" >/dev/null 2>&1 || true
ext=$(cleanup_safety_trial "$SCRATCH/ext")
[[ -n $ext ]] || fail "the known-bad variant as an exec: subject produced no cleanup.safety trial to shrink"
"$S" shrink "$ext" --allow-stored-command --invariant cleanup.safety --retries 3 --budget 4 >"$SCRATCH/shrink-ext.txt" 2>&1 ||
  { cat "$SCRATCH/shrink-ext.txt"; fail "shrink of an exec: subject's trial did not reproduce it (ran another subject?)"; }
grep '^reproduce:' "$SCRATCH/shrink-ext.txt" | grep -qF -- "--subject" ||
  { cat "$SCRATCH/shrink-ext.txt"; fail "the shrunk reproduce command does not name the trial's subject"; }
echo "shrink ran the trial's exec: subject"
repro=$(grep '^reproduce:' "$SCRATCH/shrink.txt" | cut -d' ' -f2-)
# The minimal scenario may keep no fault (the flaw then needs a ~1 ms race):
# its own trial alone fails again only now and then, so each attempt runs
# 20 trials of it (with the run's seed) and any one failing counts.
repro=$(sed -E 's/ --trial [0-9]+//' <<<"$repro")
for i in 1 2 3 4 5; do
  set +e
  eval "$repro --trials 20 --out $SCRATCH/again$i" >/dev/null 2>&1
  rc=$?
  set -e
  if [[ $rc -eq 1 ]] && grep -q "\"$inv\"" "$SCRATCH/again$i/summary.json"; then
    echo "the minimal scenario fails $inv again (attempt $i)"
    exit 0
  fi
done
fail "the minimal scenario did not fail $inv again in 5 attempts"
