#!/usr/bin/env bash
# The external-subject path end to end. Every scenario in scenarios/streaming/
# states the failure it reproduces (expect_violation / expect_evidence, or the
# two "# expect-" comment lines; tests/e2e/streaming_evidence.py reads either).
#
# Against the stand-in package (which keeps the original's flaws), driven by
# subjects/streaming/adapter.py exactly as a user's installed Streaming is, a
# scenario counts as reproduced only by a trial that breaks one of its expected
# invariants AND reached every evidence state, read from the trial's own
# verdict.json and history.jsonl. A scenario that breaks its invariant another
# way fails this test. Controls (nothing expected) must pass outright with no
# trial ended by the timeout: 0 adapter-caused hangs, even where the harness
# would call a timed-out trial valid. Finally the native shmcoord must pass
# every one of them.
#
# The process group: a real torch.distributed gloo group (scripts/setup installs
# python3-torch) for the scenarios whose failure or timing goes through torch:
# the group itself (report-824-nccl-hang, barrier-death, race), a Ctrl-C timed
# against ranks that imported torch before the gate (report-781-ctrl-c, which
# does not reproduce otherwise: its DataLoader would import torch inside the
# op), and a DataLoader forked from such a rank (loader-workers). The rest run
# in the stand-in's emulated group, which fails like gloo on a dead peer (the
# stand-in's unit tests pin that): torch's import costs each process ~1.7 s of
# CPU, and with every scenario under gloo this test took 330 s of a 13-minute
# suite. Every scenario under gloo, each reproduction asserted, is
# scripts/streaming-table's standin column (label "soak", nightly). Without
# torch, all run emulated. A scenario that names subject streaming-nccl runs in
# the NCCL-like group (a dead peer is not noticed) and is run once more under
# its job's group (--subject streaming) as its control.
#
# Budget: ~3.5 min on 2 cores (reproducing scenarios stop at their first
# violation; hang scenarios end once every live rank is past its deadline).
source "$(dirname "$0")/lib.sh"
S=$1
EVIDENCE=$(dirname "$0")/streaming_evidence.py
export SHMSTRESS_STREAMING_PATH=$PWD/tests/streaming_standin
if "$PY" -c 'import torch.distributed' 2>/dev/null; then torch_group=gloo; else torch_group=emulated; fi
GLOO=" report-824-nccl-hang barrier-death race report-781-ctrl-c loader-workers "
group_of() { if [[ $GLOO == *" $1 "* ]]; then echo "$torch_group"; else echo emulated; fi; }
for n in $GLOO; do [[ -f scenarios/streaming/$n.toml ]] || fail "the gloo list names $n, which scenarios/streaming does not hold"; done
[[ -n ${SHMSTRESS_STREAMING_SCENARIOS:-} ]] && files=($SHMSTRESS_STREAMING_SCENARIOS) || files=(scenarios/streaming/*.toml)
total_start=$(date +%s%N)
for f in "${files[@]}"; do
  n=$(basename "$f" .toml)
  group=$(group_of "$n")
  export SHMSTRESS_PROCESS_GROUP=$group
  # Two lines: the expected invariants, the expected evidence (empty: none).
  "$PY" "$EVIDENCE" --expect "$f" >"$SCRATCH/$n.exp"
  viol=$(sed -n 1p "$SCRATCH/$n.exp") evid=$(sed -n 2p "$SCRATCH/$n.exp")
  want="violation: ${viol:-none}; evidence: ${evid:-none}"
  # Nothing expected to break: every trial runs; else stop at the first violation.
  if [[ -z $viol ]]; then want_rc=0 stop=(); else want_rc=1 stop=(--stop-on-violation); fi
  start=$(date +%s%N)
  set +e
  "$S" run "$f" "${stop[@]}" --seed 5 --keep-passing --max-kept 0 --out "$SCRATCH/$n" >"$SCRATCH/$n.log" 2>&1
  rc=$?
  set -e
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  "$PY" "$EVIDENCE" "$f" "$SCRATCH/$n" >"$SCRATCH/$n.judged"
  read -r mode hit wrong trials timeouts < "$SCRATCH/$n.judged"
  details=$(tail -n +2 "$SCRATCH/$n.judged")
  if [[ $mode == control ]]; then
    [[ $rc -eq 0 ]] || { tail -20 "$SCRATCH/$n.log"; fail "$n (control): exit $rc against the stand-in ($group), expected 0: a failure the scenario does not inject"; }
    (( timeouts == 0 )) || fail "$n (control): $timeouts of $trials trials ran into the timeout against the stand-in ($group): a hang the scenario does not inject"
    echo "streaming/$n: control passed ($group, $trials trials, none timed out) in ${ms} ms"
    continue
  fi
  [[ $rc -eq $want_rc ]] || { tail -20 "$SCRATCH/$n.log"; echo "$details"; fail "$n: exit $rc against the stand-in ($group), expected $want_rc ($want)"; }
  (( wrong == 0 )) || { echo "$details"; fail "$n: a trial broke an invariant by another path than the one named ($want)"; }
  (( hit > 0 )) || { echo "$details"; fail "$n: no trial of $trials reproduced the named failure with its evidence ($want)"; }
  label=$group
  grep -q '^subject *= *"streaming-nccl"' "$f" && label="nccl-like over $group"
  echo "streaming/$n: reproduced in $hit of $trials trials ($label) in ${ms} ms [$want]"
  # A scenario of the NCCL-like group (subject streaming-nccl) has its control in the same file run
  # under gloo (--subject streaming), same seed: no trial may show its failure, none may hang.
  if grep -q '^subject *= *"streaming-nccl"' "$f"; then
    set +e
    "$S" run "$f" --subject streaming --seed 5 --keep-passing --max-kept 0 --out "$SCRATCH/$n.gloo" >"$SCRATCH/$n.gloo.log" 2>&1
    set -e
    "$PY" "$EVIDENCE" "$f" "$SCRATCH/$n.gloo" >"$SCRATCH/$n.gloo.judged"
    read -r _ ghit _ gtrials gtimeouts < "$SCRATCH/$n.gloo.judged"
    (( gtrials > 0 )) || { tail -20 "$SCRATCH/$n.gloo.log"; fail "$n under $group (--subject streaming): no trial ran"; }
    (( ghit == 0 && gtimeouts == 0 )) || { tail -n +2 "$SCRATCH/$n.gloo.judged"; fail "$n under $group (--subject streaming): $ghit of $gtrials trials showed its NCCL-like failure, $gtimeouts timed out: the hang is not the group's"; }
    echo "streaming/$n: not under $group (--subject streaming, $gtrials trials, none timed out)"
  fi
done
echo "stand-in: all of scenarios/streaming in $(( ($(date +%s%N) - total_start) / 1000000 )) ms"
# A hang of an external subject ends once every live rank is past its
# deadline + grace + margin, as a native one does (supervisor_hang.cc), not at
# the scenario's timeout: process-count's ranks (emulated group, a 2 s barrier
# deadline: ended about 5.7 s in, against a 12 s timeout). Not barrier-death
# under gloo: its ranks import torch for ~5 s first, and the end comes within
# a second of its timeout.
if [[ -d $SCRATCH/process-count ]]; then
  grep -q '"hung"' "$SCRATCH"/process-count/process-count/trial-*/history.jsonl \
    || fail "process-count: no trial of the stand-in ended early by the hang watcher: its hung ranks ran to the timeout"
  echo "streaming/process-count: the hung trial ended before its timeout"
fi
unset SHMSTRESS_PROCESS_GROUP
start=$(date +%s%N)
"$S" run "${files[@]}" --subject native --trials 3 --seed 5 --keep-passing --max-kept 0 --out "$SCRATCH/native" >"$SCRATCH/native.log" 2>&1 \
  || { tail -30 "$SCRATCH/native.log"; fail "shmcoord did not pass scenarios/streaming"; }
no_timeouts "$SCRATCH/native" || fail "shmcoord: a trial of scenarios/streaming ran into its timeout"
echo "shmcoord passes all of scenarios/streaming ($(json "$SCRATCH/native/summary.json" "j['trials']") trials) in $(( ($(date +%s%N) - start) / 1000000 )) ms"

# replay re-runs the subject the trial ran, not the scenario's own: a trial of
# `--subject native` of a scenario that says subject = "streaming" replays
# against shmcoord (no adapter "subject" event in the replay's history), and a
# failing stand-in trial replays against the stand-in and fails again.
t=$(ls -d "$SCRATCH"/native/barrier-death/trial-* | head -1)
"$S" replay "$t" --times 1 --keep >"$SCRATCH/replay-native.log" 2>&1 || true
[[ $(json "$t/replays/0/barrier-death/trial-${t##*-}/schedule.json" "j.get('subject')") == native ]] \
  || { cat "$SCRATCH/replay-native.log"; fail "replay of a --subject native trial did not run native"; }
! grep -q '"type": *"subject"' "$t/replays/0/barrier-death/trial-${t##*-}/history.jsonl" \
  || fail "replay of a --subject native trial ran the Streaming adapter"
SHMSTRESS_PROCESS_GROUP=$(group_of cleanup-while-live) && export SHMSTRESS_PROCESS_GROUP
t=$(grep -l '"verdict": *"invalid"' "$SCRATCH"/cleanup-while-live/*/trial-*/verdict.json | head -1)
[[ -n $t ]] || fail "no failing cleanup-while-live trial to replay"
t=$(dirname "$t")
"$S" replay "$t" --times 2 >"$SCRATCH/replay-standin.log" 2>&1 \
  || { cat "$SCRATCH/replay-standin.log"; fail "a failing stand-in trial did not fail again on replay"; }
grep -q '^subject: streaming' "$SCRATCH/replay-standin.log" || fail "replay did not say it replays the trial's subject"
echo "replay runs the trial's own subject (native and stand-in)"
