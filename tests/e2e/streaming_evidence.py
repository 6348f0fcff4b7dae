#!/usr/bin/python3
"""Judges the trials of one scenarios/streaming scenario by the failure it names.

    streaming_evidence.py SCENARIO.toml RUN_DIR  ->  "<mode> <hit> <wrong> <trials> <timeouts>", details
    streaming_evidence.py --expect SCENARIO.toml ->  expected invariants, expected evidence (2 lines)

A scenario states what it reproduces, either with the harness's keys

    expect_violation = ["barrier.liveness"]
    expect_evidence = ["barrier-hang-after-death", "fault:signal-on-event"]

or with two comment lines (each read only when its key is absent; evidence
states this file derives itself stay in the comment):

    # expect-violation: barrier.liveness ...   ("none": no invariant breaks)
    # expect-evidence: <state> ...             ("none"; a|b = either)

A trial reproduces it when it breaks one of the expected invariants (none at
all, when none is expected) AND reached every evidence state, read from the trial's own
verdict.json and history.jsonl: the checkers' reached states,
error:<op>:<code> from the subject's fail events, fault:<kind>, and the states
derived() reads from the events. mode is "control" when nothing is expected
(the scenario must pass outright), else "reproduce"; hit counts trials that
reproduced it, wrong those that broke an invariant without its evidence,
timeouts those the harness had to end at the scenario's timeout.
Shared by tests/e2e/streaming.sh and scripts/streaming-table.
"""
import glob
import json
import os
import re
import sys
import tomllib


def expectations(path):
    """The harness's keys win where given; evidence states the harness does not
    derive itself (this file does) stay in the "# expect-evidence:" comment."""
    with open(path, 'rb') as f:
        doc = tomllib.load(f)
    exp = {}
    for line in open(path, encoding='utf-8'):
        m = re.match(r'#\s*expect-(violation|evidence):\s*(.*?)\s*$', line)
        if m:
            words = m.group(2).split()
            exp[m.group(1)] = [] if words == ['none'] else words
    if 'expect_violation' in doc:
        exp['violation'] = list(doc['expect_violation'])
    if 'expect_evidence' in doc:
        exp['evidence'] = list(doc['expect_evidence'])
    if set(exp) != {'violation', 'evidence'}:
        sys.exit(f'{path}: needs expect_violation/expect_evidence, or both '
                 '"# expect-violation:" and "# expect-evidence:" lines')
    return exp


def events(d):
    out = []
    for line in open(os.path.join(d, 'history.jsonl'), 'rb'):
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict):
            out.append(e)
    return out


def says(path, text):
    with open(path, encoding='utf-8', errors='replace') as f:
        return text in f.read()


def derived(d, evs):
    st = set()
    plan = json.load(open(os.path.join(d, 'schedule.json')))
    dirs = {w['job']: {x['path'] for x in json.loads(w['env'].get('SHMSTRESS_DIRS', '[]')) if x.get('remote')}
            for w in plan.get('workers', [])}
    timed_out = any(e.get('type') == 'trial' and e.get('phase') == 'timeout' for e in evs)
    if timed_out:
        st.add('timed-out')
    invokes, done = {}, {}
    for e in evs:
        key = (e.get('pid'), e.get('id'))
        if e.get('type') == 'invoke':
            invokes[key] = e
        elif e.get('type') in ('ok', 'fail'):
            done[key] = e
    exits = [e for e in evs if e.get('type') == 'exit']
    # A barrier round still open at the trial timeout in a job a fault killed a rank of, whose rounds
    # were still completing until 100 ms before the kill: the hang began with the death.
    for k in (e for e in exits if e.get('signal') and not e.get('teardown')):
        oks = [e['t'] for e in done.values() if e.get('op') == 'barrier' and e.get('type') == 'ok' and e.get('job') == k.get('job')]
        hung = [i for key, i in invokes.items() if i.get('op') == 'barrier' and i.get('job') == k.get('job')
                and key not in done and i.get('rank') != k.get('rank')]
        if timed_out and hung and oks and max(oks) >= k['t'] - 100_000_000:
            st.add('barrier-hang-after-death')
    # An acquire still open at the trial timeout in a job another rank of which had failed its own
    # acquire and exited before: the survivor sits in get_shm_prefix's dist.barrier() waiting for a
    # peer that is gone (a group without peer-death detection, as NCCL's: #824).
    for key, i in invokes.items():
        if not timed_out or key in done or i.get('op') != 'acquire':
            continue
        failed = {e.get('pid') for e in done.values()
                  if e.get('type') == 'fail' and e.get('op') == 'acquire' and e.get('job') == i.get('job')
                  and e.get('rank') != i.get('rank')}
        if any(x.get('pid') in failed and not x.get('teardown') for x in exits):
            st.add('acquire-hang-after-peer-failed')
    holds = []
    for e in done.values():
        if e.get('op') == 'acquire' and e.get('type') == 'ok':
            p = e.get('value', {}).get('prefix')
            st.add(f'acquired-prefix-{p}')
            end = min([x['t'] for x in done.values() if x.get('pid') == e.get('pid') and x.get('op') == 'release'] +
                      [x['t'] for x in exits if x.get('pid') == e.get('pid')] + [float('inf')])
            holds.append((e.get('job'), p, e['t'], end))
    for ja, pa, sa, ea in holds:
        for jb, pb, sb, _ in holds:
            if ja != jb and dirs.get(ja, set()) & dirs.get(jb, set()) and sa < sb < ea and pa != pb:
                st.add('granted-below-live-holder' if pb < pa else 'granted-above-live-holder')
    for e in done.values():
        err = e.get('error') or {}
        m = re.search(r'(\d{6})_locals', err.get('message', '')) if err.get('code') == 'file-exists' else None
        if m and int(m.group(1)) > 0:
            st.add('file-exists-above-0')
        # Which kind of segment a File exists names: "File exists: '/000000_epoch_shape'" (#767).
        m = re.search(r"\d{6}_(\w+)'", err.get('message', '')) if err.get('code') == 'file-exists' else None
        if m:
            st.add(f'file-exists-{m.group(1)}')
    # Ctrl-C (the `interrupt` fault): the job's barrier rounds were completing before it, and a rank
    # it hit died of SIGINT after Python raised KeyboardInterrupt (its traceback in the rank's log,
    # or in the launcher's per-rank logs): the adapter left SIGINT to Python, so exit handlers ran.
    interrupts = [e for e in evs if e.get('type') == 'fault' and e.get('kind') == 'interrupt']
    for f in interrupts:
        if any(e.get('op') == 'barrier' and e.get('type') == 'ok' and e.get('job') == f.get('job') and e['t'] < f['t']
               for e in done.values()):
            st.add('rounds-before-interrupt')
        died = any(x.get('job') == f.get('job') and x.get('rank', -1) >= 0 and 'worker' not in x and
                   x.get('signal') == 2 and x.get('by_harness') and x['t'] > f['t'] for x in exits)
        logs = glob.glob(os.path.join(d, f"job{f.get('job')}-rank*", 'stderr.log')) + \
            glob.glob(os.path.join(d, f"job{f.get('job')}-launcher", 'logs', '*', 'attempt_*', '*', 'stderr.log'))
        if died and any(says(x, 'KeyboardInterrupt') for x in logs):
            st.add('keyboard-interrupt')
    # F6: a rank whose SharedBarrier constructor created the segment (barrier_attach's value says so) was
    # killed alone, and the audit — in a trial with no cleanup at all — no longer finds that barrier though
    # the job's lock file is there: the dead creator's resource tracker unlinked it (a teardown's kill of
    # a whole tree leaks it).
    # F21: ranks of one job attached the same barrier segment (dev, ino) through different lock files
    # (their TMPDIRs differ): the counters' read-modify-writes have no mutual exclusion.
    locks = {}
    for e in done.values():
        v = e.get('value') or {}
        if e.get('op') == 'barrier_attach' and e.get('type') == 'ok' and 'ino' in v and 'lock' in v:
            locks.setdefault((e.get('job'), v.get('dev'), v['ino']), set()).add(v['lock'])
    if any(len(x) > 1 for x in locks.values()):
        st.add('barrier-lock-split')
    # F20: one barrier segment (dev, ino) attached by processes of two jobs: a spawned loader worker bound
    # by name after its job's prefix was reused joined the other job's barrier.
    jobs_of = {}
    for (job, dev, ino) in locks:
        jobs_of.setdefault((dev, ino), set()).add(job)
    if any(len(x) > 1 for x in jobs_of.values()):
        st.add('barrier-shared-across-jobs')
    audits = [e for e in evs if e.get('type') == 'audit']
    cleaned = any(i.get('op') == 'clean' for i in invokes.values()) or any(e.get('role') == 'cleanup' for e in evs)
    prefixes = {e.get('pid'): e.get('value', {}).get('prefix') for e in done.values()
                if e.get('op') == 'acquire' and e.get('type') == 'ok'}
    for e in done.values():
        if e.get('op') != 'barrier_attach' or e.get('type') != 'ok' or (e.get('value') or {}).get('created') is not True:
            continue
        p = prefixes.get(e.get('pid'))
        killed = any(x.get('pid') == e.get('pid') and x.get('signal') == 9 and not x.get('teardown') for x in exits)
        if p is None or not killed or cleaned or not audits:
            continue
        shm = {n.lstrip('/') for a in audits for n in a.get('leftover_shm') or []}
        locks = [n for a in audits for n in a.get('leftover_locks') or [] if n.endswith(f'{p:06}_barrier_filelock')]
        if locks and not any(n.endswith(f'{p:06}_barrier') for n in shm):
            st.add('barrier-unlinked-after-creator-killed')
    for e in audits:
        if e.get('type') == 'audit':
            if e.get('leftover_locks'):
                st.add('leftover-lock-files')
            for n in e.get('leftover_shm') or []:
                m = re.search(r'\d{6}_(\w+)$', n)
                if m:
                    st.add(f'leftover-{m.group(1)}')
    return st


def facts(d):
    v = json.load(open(os.path.join(d, 'verdict.json')))
    violated = {c['invariant'] for c in v.get('checks', []) if c['verdict'] == 'invalid' and 'excused' not in c}
    states = {s for c in v.get('checks', []) for s in c.get('reached', [])}
    evs = events(d)
    for e in evs:
        if e.get('type') == 'fail' and isinstance(e.get('error'), dict):
            states.add(f"error:{e.get('op')}:{e['error'].get('code')}")
        elif e.get('type') == 'fault':
            states.add(f"fault:{e.get('kind')}")
    return violated, states | derived(d, evs)


def judge(toml, run):
    """(mode, hit, wrong, trials, timed-out trials, details) for the scenario's trials under run."""
    exp = expectations(toml)
    name = os.path.basename(toml)[:-5]
    trials = sorted(glob.glob(os.path.join(run, name, 'trial-*')), key=lambda p: int(p.rsplit('-', 1)[1]))
    lines, hit, wrong, n, timeouts = [], 0, 0, 0, 0
    for d in trials:
        if not os.path.exists(os.path.join(d, 'verdict.json')):
            continue
        n += 1
        violated, states = facts(d)
        timeouts += 'timed-out' in states
        expected = set(exp['violation'])
        # "none" expected means none broken: a trial that broke an invariant on the way to its
        # evidence reproduced something else.
        broke_as_named = bool(violated & expected) if expected else not violated
        ok = broke_as_named and all(any(a in states for a in w.split('|')) for w in exp['evidence'])
        hit += bool(ok)
        if violated and not ok:
            wrong += 1
            lines.append(f'  {os.path.basename(d)}: violated {sorted(violated)}, reached {sorted(states)}')
    mode = 'control' if not exp['violation'] and not exp['evidence'] else 'reproduce'
    return mode, hit, wrong, n, timeouts, lines


if __name__ == '__main__':
    if sys.argv[1] == '--expect':  # two lines: the expected invariants, the expected evidence
        exp = expectations(sys.argv[2])
        print(' '.join(exp['violation']))
        print(' '.join(exp['evidence']))
        sys.exit(0)
    mode, hit, wrong, n, timeouts, lines = judge(sys.argv[1], sys.argv[2])
    print(f'{mode} {hit} {wrong} {n} {timeouts}')
    print('\n'.join(lines[:3]))
