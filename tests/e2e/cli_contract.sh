#!/usr/bin/env bash
# The CLI's contract (DESIGN.md §8 and §3): exit codes, file:line errors,
# offline re-checking, SIGINT within 2 s with a summary, and a harness killed by
# SIGKILL leaving no worker alive.
source "$(dirname "$0")/lib.sh"
S=$1

# Bad usage and bad scenarios: exit 2 with the file and line.
set +e
"$S" run --trials 0 scenarios/basic.toml >/dev/null 2>&1; rc=$?
[[ $rc -eq 2 ]] || fail "bad usage exited $rc, expected 2"
printf 'name = "x"\n[[job]]\nranks = 2\nbogus = 1\n' >"$SCRATCH/bad.toml"
msg=$("$S" run "$SCRATCH/bad.toml" 2>&1); rc=$?
[[ $rc -eq 2 ]] || fail "bad scenario exited $rc, expected 2"
[[ $msg == *"bad.toml:4:"*"bogus"* ]] || fail "bad scenario message lacks file:line: $msg"
printf 'name = "y"\n[[job]]\nranks = 2\n[[fault]]\nkind = "sigkill"\nat = "soon"\n' >"$SCRATCH/badfault.toml"
msg=$("$S" run "$SCRATCH/badfault.toml" 2>&1); rc=$?
[[ $rc -eq 2 && $msg == *"badfault.toml:6:"* ]] || fail "bad fault param: rc=$rc msg=$msg"
set -e

# list names every invariant and fault kind.
"$S" list >"$SCRATCH/list.txt"
for inv in prefix.unique prefix.agreement prefix.exclusive-local prefix.progress barrier.safety barrier.liveness \
           cleanup.no-leak cleanup.safety worker.clean-exit harness.no-orphans sigkill sigstop crash-point; do
  grep -q "$inv" "$SCRATCH/list.txt" || fail "list lacks $inv"
done

# A passing run exits 0; --keep-passing keeps trial dirs that `check` re-checks offline.
"$S" run scenarios/basic.toml --trials 3 --seed 5 --keep-passing --out "$SCRATCH/keep" >/dev/null 2>&1 || fail "basic run failed"
[[ -f "$SCRATCH/keep/basic/trial-0/history.jsonl" ]] || fail "no history kept"
"$S" check "$SCRATCH/keep" >"$SCRATCH/check.txt" || fail "offline check of a passing run did not exit 0"

# SIGINT stops a long run within 2 s and still writes the summary. Interrupted
# with no violation is inconclusive, exit 4 (a CI timeout's SIGTERM must not
# look green). Sent once the run has finished a trial: a soak rewrites
# summary.json after every trial.
"$S" run scenarios/many-rounds.toml --duration 60s --out "$SCRATCH/int" >"$SCRATCH/int.log" 2>&1 &
pid=$!
for _ in $(seq 300); do [[ -f $SCRATCH/int/summary.json ]] && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
[[ -f $SCRATCH/int/summary.json ]] || { cat "$SCRATCH/int.log"; fail "no trial finished within 30 s (no live summary.json)"; }
(( $(json "$SCRATCH/int/summary.json" "j['trials']") >= 1 )) || fail "the live summary counts no trial"
t0=$(date +%s%N)
kill -INT $pid
set +e
wait $pid; rc=$?
set -e
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
(( ms < 2000 )) || fail "SIGINT took ${ms} ms to stop the run"
[[ $rc -eq 4 ]] || { cat "$SCRATCH/int.log"; fail "an interrupted run with no violation exited $rc, expected 4"; }
[[ $(json "$SCRATCH/int/summary.json" "j['interrupted']") == True ]] || fail "summary does not say interrupted"
[[ $(json "$SCRATCH/int/summary.json" "j['exit_code']") == 4 ]] || fail "summary.json's exit_code is not 4"
grep -q '(interrupted)' "$SCRATCH/int.log" || fail "the console summary does not say interrupted"

# SIGKILL of the harness leaves no worker of it alive.
"$S" run scenarios/many-rounds.toml --duration 60s --out "$SCRATCH/kill" >/dev/null 2>&1 &
pid=$!
sleep 2
mapfile -t kids < <(ps -o pid= --ppid $pid)
kill -KILL $pid
wait $pid 2>/dev/null || true
sleep 1
for k in "${kids[@]}"; do
  [[ -z $k ]] && continue
  if [[ -n $(ps -o pid= -g "$k" 2>/dev/null) ]]; then fail "process group $k survived the harness"; fi
done
# Without a mount namespace, a harness killed by SIGKILL leaves named
# segments; `shmstress clean` reclaims every one of them.
"$S" run scenarios/many-rounds.toml --no-mount-ns --duration 60s --out "$SCRATCH/named" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 50); do [[ -n $(ls /dev/shm | grep "^shmstress\.$pid-") ]] && break; sleep 0.1; done
left_before=$(ls /dev/shm | grep -c "^shmstress\.$pid-" || true)
kill -KILL $pid
wait $pid 2>/dev/null || true
sleep 1
"$S" clean >"$SCRATCH/clean.txt"
left_after=$(ls /dev/shm | grep -c "^shmstress\.$pid-" || true)
(( left_after == 0 )) || fail "shmstress clean left $left_after segments of the killed run"
echo "cli contract: ok (SIGINT stop took ${ms} ms; clean reclaimed $(grep -c '^removed' "$SCRATCH/clean.txt" || true) entries, $left_before seen before the kill)"
