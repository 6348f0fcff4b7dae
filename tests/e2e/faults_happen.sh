#!/usr/bin/env bash
# Every fault kind really happens, shown by what the subject saw (the errno in
# its failed ops, a lock it had to keep, a stopped process) in the history, and
# the real shmcoord still passes each scenario.
source "$(dirname "$0")/lib.sh"
S=$1
run() {  # run SCENARIO [FILE] -> trial histories under $SCRATCH/<scenario>
  local rc=0
  "$S" run "${2:-scenarios/$1.toml}" --trials "${TRIALS:-2}" --seed 11 --keep-passing --out "$SCRATCH/$1" \
    >"$SCRATCH/$1.log" 2>&1 || rc=$?
  (( rc == 0 )) || { cat "$SCRATCH/$1.log"; fail "$1: shmcoord did not pass (exit $rc)"; }
}
hasnt() {  # hasnt SCENARIO PYTHON-PREDICATE-ON-EVENT DESCRIPTION: the control
  local n
  n=$(count "$1" "$2")
  (( n == 0 )) || fail "$1: saw $3 ($n events) in the control"
  echo "$1: no $3 (control)"
}
count() {
  "$PY" - "$SCRATCH/$1" "$2" <<'PYEOF'
import glob, json, sys
root, pred = sys.argv[1], sys.argv[2]
n = 0
for f in glob.glob(root + "/*/trial-*/history.jsonl"):
    ev = [json.loads(line) for line in open(f)]
    for e in ev:
        if eval(pred, {"e": e, "ev": ev}):
            n += 1
print(n)
PYEOF
}
has() {  # has SCENARIO PYTHON-PREDICATE-ON-EVENT DESCRIPTION (e: the event, ev: its trial's events)
  local n
  n=$(count "$1" "$2")
  (( n > 0 )) || fail "$1: never saw $3"
  echo "$1: $3 ($n events)"
}
run permission-fiu
has permission-fiu "e.get('type')=='fail' and e.get('error',{}).get('errno')==13" "EACCES (errno 13) injected at a shmcoord call site"
run permission-uid
has permission-uid "e.get('type')=='fail' and e.get('op')=='acquire' and e['error']['code']=='permission' and e['error']['errno']==13" "a real EACCES seen by an unprivileged worker"
run foreign-segments
has foreign-segments "e.get('type')=='ok' and e.get('op')=='clean' and any('000000_locals' in n for n in e['value']['skipped'])" "cleanup skipping another user's segment"
run stale-segments
has stale-segments "e.get('type')=='fault' and e.get('kind')=='stale-segment' and e['detail'].get('content')=='zero-length'" "a zero-length segment seeded"
has stale-segments "e.get('type')=='ok' and e.get('op')=='acquire' and e['value']['prefix']==0" "prefix 0 granted despite the dead job's leftovers"
run stale-locks
has stale-locks "e.get('type')=='ok' and e.get('op')=='clean' and any('000005_barrier_filelock' in n for n in e['value']['kept'])" "cleanup keeping the lock a stopped process holds"
has stale-locks "e.get('type')=='ok' and e.get('op')=='clean' and any('000006_barrier_filelock' in n for n in e['value']['kept'])" "cleanup keeping the lock an inherited fd holds"
has stale-locks "e.get('type')=='ok' and e.get('op')=='clean' and any('000000_barrier_filelock' in n for n in e['value']['removed'])" "cleanup removing a dead owner's lock"
run pause-subset
has pause-subset "e.get('type')=='fault' and e.get('kind')=='sigstop' and e.get('phase')=='start'" "a rank stopped"
run stop-owner
has stop-owner "e.get('type')=='ok' and e.get('op')=='clean' and any('000000_shard_states' in n for n in e['value']['kept'])" "cleanup keeping a stopped owner's segment"
run exhaustion-emfile
has exhaustion-emfile "e.get('type')=='fail' and e.get('error',{}).get('errno')==24" "EMFILE (errno 24)"
run exhaustion-enospc
has exhaustion-enospc "e.get('type')=='fail' and e.get('error',{}).get('errno')==28" "ENOSPC (errno 28)"
run misconfig
has misconfig "e.get('type')=='fail' and e.get('op')=='barrier_attach' and e['error']['code']=='mismatch'" "a process-count mismatch reported"
run permission-preload
has permission-preload "e.get('type')=='fail' and 'mmap(' in e.get('error',{}).get('message','') and e['error']['errno']==13" "mmap failing with EACCES under libfiu's POSIX preload"
[[ -z $(ls /tmp | grep '^fiu-ctrl-') ]] || fail "libfiu left remote-control FIFOs in /tmp"
run kill-after-acquire
n=$("$PY" - "$SCRATCH/kill-after-acquire" <<'PYEOF'
import glob, json, sys
hits = 0
for f in glob.glob(sys.argv[1] + "/*/trial-*/history.jsonl"):
    ev = [json.loads(l) for l in open(f)]
    for e in ev:
        if e.get("type") == "fault" and e.get("kind") == "signal-on-event" and e.get("phase") == "instant":
            acq = [x for x in ev if x.get("pid") == e.get("pid") and x.get("type") == "ok" and x.get("op") == "acquire"]
            if acq and 0 <= e["t"] - acq[0]["t"] < 50_000_000:
                hits += 1
print(hits)
PYEOF
)
(( n > 0 )) || fail "kill-after-acquire: no kill within 50 ms of the killed rank's acquire"
echo "kill-after-acquire: a rank killed right after it logged its acquire ($n trials)"

# Whole-job kill: each rank's process group dies (the worker and its resource
# tracker), so nothing of job 0 removes its segments; the restart's cleanup
# finds them. The control kills only the pids: the trackers remove them first.
run whole-job-kill
has whole-job-kill "e.get('type')=='fault' and e.get('kind')=='sigkill' and e.get('tree') and len(e['tree_pids'])>=2 and e['pid'] in e['tree_pids']" "a worker killed with its tracker (tree_pids)"
has whole-job-kill "e.get('type')=='ok' and e.get('op')=='clean' and e['job']==1 and any(n.endswith('000000_shard_states') for n in e['value']['removed'])" "the restart's cleanup removing the dead job's segment"
sed -e 's/^tree = true/tree = false/' scenarios/whole-job-kill.toml >"$SCRATCH/whole-job-kill-pids.toml"
run whole-job-kill-pids "$SCRATCH/whole-job-kill-pids.toml"
has whole-job-kill-pids "e.get('type')=='fault' and e.get('kind')=='sigkill' and not e.get('tree')" "the workers killed alone"
hasnt whole-job-kill-pids "e.get('type')=='ok' and e.get('op')=='clean' and e['job']==1 and any(n.endswith('000000_shard_states') for n in e['value']['removed'])" "dead job's segment left for the restart"
