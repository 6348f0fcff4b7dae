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
count() {  # count SCENARIO PREDICATE: events (e) or, with "trial:" in front, trials (ev) it holds for
  "$PY" - "$SCRATCH/$1" "$2" <<'PYEOF'
import glob, json, sys
root, pred = sys.argv[1], sys.argv[2]


def ops(ev):
    """Operations, each invoke joined with its ok/fail: dicts with invoke_t, t (completion or None)."""
    out, open_ = [], {}
    for e in ev:
        k = (e.get("pid"), e.get("job"), e.get("rank"), e.get("id"))
        if e.get("type") == "invoke":
            open_[k] = dict(e, invoke_t=e["t"], t=None, outcome=None)
            out.append(open_[k])
        elif e.get("type") in ("ok", "fail") and k in open_:
            open_[k].update(t=e["t"], outcome=e["type"], value=e.get("value"), error=e.get("error"))
    return out


def windows(ev, kind):
    """Fault windows of a kind: (start event, end event or None), matched by job and rank."""
    out, open_ = [], {}
    for e in ev:
        if e.get("type") != "fault" or e.get("kind") != kind:
            continue
        k = (e.get("job"), e.get("rank"))
        if e.get("phase") == "start":
            open_[k] = [e, None]
            out.append(open_[k])
        elif e.get("phase") == "end" and k in open_:
            open_.pop(k)[1] = e
    return out


per_trial = pred.startswith("trial:")
n = 0
for f in glob.glob(root + "/*/trial-*/history.jsonl"):
    ev = [json.loads(line) for line in open(f)]
    if per_trial:
        n += bool(eval(pred[len("trial:"):], {"ev": ev, "ops": ops, "windows": windows}))
        continue
    for e in ev:
        if eval(pred, {"e": e, "ev": ev, "ops": ops, "windows": windows}):
            n += 1
print(n)
PYEOF
}
has() {  # has SCENARIO PREDICATE DESCRIPTION (see count)
  local n
  n=$(count "$1" "$2")
  (( n > 0 )) || fail "$1: never saw $3"
  echo "$1: $3 ($n)"
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
# A worker with no fd left for the gate's FIFO still waits at the gate.
hasnt exhaustion-emfile "trial:any(e.get('type')=='invoke' and e['t'] < min([g['t'] for g in ev if g.get('type')=='gate' and g.get('phase')=='open'] or [0]) for e in ev)" "an operation invoked before the start gate opened"
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

# Pause at a point inside a critical section: while one rank is stopped there
# with the registry or a barrier mutex held, another process's operation runs
# into the window and completes only after the stopped one was resumed.
TRIALS=8 run mutex-held-stopped
has mutex-held-stopped "trial:any(o['pid'] != w[0]['pid'] and w[1] and w[0]['t'] < o['invoke_t'] < w[1]['t'] < (o['t'] or 0) for w in windows(ev, 'pause-at-point') for o in ops(ev))" "an operation of another process held up inside a pause window"
TRIALS=12 run pause-points
has pause-points "e.get('type')=='fault' and e.get('kind')=='pause-at-point' and e.get('phase')=='end' and e.get('effect')=='continued'" "a rank resumed after stopping itself at a failpoint"
# A list of passes (nth = [1, ..., 8]) stops one rank at several of them,
# each its own window, each seen resumed; the rank finishes a round between
# two of them.
TRIALS=6 run barrier-release
has barrier-release "trial:any(len(ws) >= 2 and all(w[1] and w[1].get('effect') == 'continued' for w in ws) and any(o['pid'] == ws[0][0]['pid'] and o['op'] == 'barrier' and ws[0][1]['t'] < (o['t'] or 0) < ws[1][0]['t'] for o in ops(ev)) for ws in [[w for w in windows(ev, 'pause-at-point') if w[0]['rank'] == r] for r in range(6)])" "a rank stopped and resumed at several passes of one point, leaving a round between"
# A rank that stops again microseconds after its SIGCONT was still resumed:
# the supervisor sees that by the new stop, not by spinning 100 ms on /proc.
hasnt barrier-release "e.get('type')=='fault' and e.get('phase')=='end' and e.get('effect')!='continued'" "resume the supervisor could not confirm"
# Crash points inside critical sections: the rank announces the point and dies
# there (SIGKILL it raised itself); the others carry on past it.
TRIALS=8 run crash-points
has crash-points "trial:any(p.get('type')=='point' and any(x.get('type')=='exit' and x.get('pid')==p['pid'] and x.get('signal')==9 for x in ev) and any(o['pid']!=p['pid'] and o['outcome']=='ok' and o['invoke_t']>p['t'] for o in ops(ev)) for p in ev)" "a rank dead at a crash point and others succeeding after it"
# Shmcoord's own init lock held by a stopped process / an inherited fd: an
# operation that needs it starts before the holder goes and ends after.
for s in init-lock-stopped init-lock-inherited; do
  run $s
  has $s "trial:any(w[1] and o['invoke_t'] < w[1]['t'] < (o['t'] or 0) for w in windows(ev, 'init-lock') for o in ops(ev))" "an operation waiting for the held init lock"
done
# Reused pids in the subject's own records.
run reused-pid-records
has reused-pid-records "trial:any(k['detail'].get('reused') and any(o['op']=='acquire' and o['outcome']=='ok' and o['value']['prefix']==k['detail']['prefix'] and o['invoke_t']>k['t'] for o in ops(ev)) for k in ev if k.get('type')=='fault' and k.get('kind')=='reused-pid' and k.get('phase')=='instant')" "the dead job's prefix granted again while its pid names a live process"
TRIALS=4 run reused-pid-peer
has reused-pid-peer "trial:any(w[0]['detail'].get('reused') and any(o['outcome']=='fail' and o['error']['code']=='broken' and ('pid %d' % w[0]['detail']['reused_pid']) in o['error']['message'] for o in ops(ev)) for w in windows(ev, 'reused-pid') if w[0]['job']==-1)" "peers told of the death of a participant whose pid is alive again"
# Containers sharing /dev/shm: the same pid in two jobs (separate pid
# namespaces), one registry (distinct prefixes).
run containers-shared-shm
has containers-shared-shm "trial:len({(a['job'], a['pid']) for a in ops(ev) if a['op']=='acquire'}) > len({a['pid'] for a in ops(ev) if a['op']=='acquire'}) and len({a['value']['prefix'] for a in ops(ev) if a['op']=='acquire' and a['outcome']=='ok'}) > 1" "one pid number in two containers, one shared registry"
# Mixed remotes, both orders: the later job is refused "in use".
run mixed-remotes
has mixed-remotes "e.get('type')=='fail' and e['job']==1 and e['error']['code']=='in-use'" "a job without a remote refused a dir a job with one holds"
has mixed-remotes "e.get('type')=='fail' and e['job']==3 and e['error']['code']=='in-use'" "a job with a remote refused a dir a job without one holds"
# A replacement participant: the dead one's successor completes rounds after it.
run replacement
# A subject may take the newcomer into the dead one's seat or refuse it clearly
# (shmcoord refuses: seats are fixed); either way it tried, mid-round.
has replacement "trial:any(w[1] and any(o['pid']==w[1]['detail']['replacement_pid'] and o['op']=='barrier_attach' and o['outcome'] in ('ok', 'fail') and o['invoke_t']>w[1]['t'] for o in ops(ev)) for w in windows(ev, 'replacement'))" "a replacement attaching in a dead participant's place, mid-round"
# Another user's registry: root's cleanup skips it, the harness marks it foreign.
run unprivileged-creator
has unprivileged-creator "e.get('type')=='ok' and e.get('op')=='clean' and any(n.endswith('registry') for n in e['value']['skipped'])" "root's cleanup skipping the other user's registry"
has unprivileged-creator "e.get('type')=='fault' and e.get('kind')=='unprivileged' and e['detail'].get('foreign') and 'shmstress.registry' in e['detail']['names']" "the registry marked as another user's"
# The misconfig fault's own lock dir is healed, not a leak.
hasnt misconfig "e.get('type')=='audit' and any('elsewhere' in p for p in e['leftover_locks'])" "misconfig's lock dir left behind"
# The process model (docs/scenarios.md [job.loader], [job.launcher]): loader
# workers forked from their rank enter the barrier; a loader worker ends while
# its rank lives on; a rank retries its barrier wait; exhaustion in the
# cleaning process; pid twins across containers; a real torchrun agent that
# restarts its ranks and forwards a SIGTERM.
run loader-workers
has loader-workers "trial:any(s.get('type')=='start' and s.get('role')=='loader' and any(r.get('type')=='start' and r.get('role')=='rank' and r['pid']==s['ppid'] and r['job']==s['job'] for r in ev) for s in ev)" "loader workers forked from their rank"
has loader-workers "e.get('type')=='ok' and e.get('op')=='barrier' and e.get('worker') is not None" "barrier rounds completed by loader workers"
run loader-fork-handles
has loader-fork-handles "trial:any(x.get('type')=='exit' and x.get('worker') is not None and any(y.get('type')=='exit' and y.get('worker') is None and y.get('job')==x['job'] and y.get('rank')==x['rank'] and y['t']>x['t'] for y in ev) for x in ev)" "a loader worker gone while its rank lived on"
run barrier-retry
has barrier-retry "e.get('type')=='invoke' and e.get('op')=='barrier' and (e.get('args') or {}).get('retry',0)>=1" "a barrier wait retried after a failure"
run exhaustion-cleaning
has exhaustion-cleaning "e.get('type')=='fail' and e.get('op')=='clean' and e['error']['code']=='exhausted'" "a cleanup out of fds beside a live job"
run containers-pid-twin-lock
has containers-pid-twin-lock "trial:any(x.get('type')=='exit' and x.get('signal')==9 and any(o['pid']==x['pid'] and o['job']!=x['job'] for o in ops(ev)) for x in ev)" "a process killed while its pid twin in another container ran"
# Ctrl-C (interrupt): SIGINT to every rank's group at one instant; both ranks
# die of it (the signal the harness sent: no crash), and the restart completes.
run interrupt-restart
has interrupt-restart "trial:all(any(x.get('type')=='exit' and x.get('job')==0 and x.get('rank')==r and x.get('worker') is None and x.get('signal')==2 and x.get('by_harness') and any(f.get('type')=='fault' and f.get('kind')=='interrupt' and f.get('rank')==r and f['t']<x['t'] for f in ev) for x in ev) for r in (0, 1)) and sum(e.get('type')=='ok' and e.get('op')=='release' and e.get('job')==1 for e in ev)==2" "both ranks dead of the Ctrl-C's SIGINT, the restart released"
TRIALS=1 run launcher-restart
has launcher-restart "trial:len({s['pid'] for s in ev if s.get('type')=='start' and s.get('role')=='rank' and s.get('job')==0 and s.get('rank')==0})>=2" "a rank run again by its torchrun agent"
TRIALS=1 run launcher-sigterm
# (a rank the agent reaps first may end with its status unknown: its exit after the SIGTERM counts)
has launcher-sigterm "trial:any(f.get('type')=='fault' and f.get('kind')=='sigterm' and f.get('launcher') and all(any(x.get('type')=='exit' and x.get('role')=='rank' and x.get('job')==0 and x.get('rank')==r and x['t']>f['t'] for x in ev) for r in (0, 1)) for f in ev)" "both ranks ended after their agent's SIGTERM"
