#!/usr/bin/python3
"""Judges the trials of one scenarios/joblib scenario by the outcome it states.

    joblib_evidence.py SCENARIO.toml RUN_DIR  ->  "<mode> <hit> <wrong> <trials> <timeouts>", details
    joblib_evidence.py --expect SCENARIO.toml ->  expected invariants, expected evidence (2 lines)
    joblib_evidence.py --facts TRIAL_DIR      ->  one JSON line: what the trial shows (for the table)

The judging is tests/e2e/streaming_evidence.py's, unchanged (the harness's keys or the two
"# expect-" comment lines; a trial counts only if it breaks an expected invariant - none at all
when none is expected - and reached every evidence state). This file adds the states a joblib
scenario names that it reads from the trial's own events:

- killed-with-file-mapped: a SIGKILL aimed at a parent landed while its last live witness showed
  a pool worker mapping one of its files (its workers were busy with the memmapped array);
- killed-with-pool-idle: it landed after the parent's pool call returned, its workers alive;
- leftover-joblib-folder / leftover-loky-semaphore: the audit found a joblib_memmapping_folder_*
  (in /dev/shm or the lock dir) / a loky named semaphore (sem.loky-*) left;
- folder-in-dev-shm / folder-in-temp-dir: where joblib put a folder it created;
- pool-ok-after-kill: a pool call invoked after a kill of another job's parent succeeded;
- clean-during-live-pool: a job's clean ran wholly inside another job's pool call;
- own-files-removed-after-worker-death: after a pool-worker-kill, the parent's own delete removed
  one of its memmapped files.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import streaming_evidence as judge  # noqa: E402  pylint: disable=wrong-import-position

_streaming_derived = judge.derived


def kills(evs):
    """Kill faults aimed at a rank, as (job, rank, t)."""
    return [(e.get('job'), e.get('rank'), e['t']) for e in evs
            if e.get('type') == 'fault' and e.get('signal') == 9 and (e.get('job') or 0) >= 0
            and e.get('phase') in ('instant', 'start')]


def ops(evs):
    """Completed ops as dicts {op, job, rank, pid, invoke_t, t (completion), type, args, value}."""
    invokes, out = {}, []
    for e in evs:
        key = (e.get('job'), e.get('rank'), e.get('pid'), e.get('id'))
        if e.get('type') == 'invoke':
            invokes[key] = e
        elif e.get('type') in ('ok', 'fail') and key in invokes:
            i = invokes[key]
            out.append({'op': e.get('op'), 'job': e.get('job'), 'rank': e.get('rank'), 'pid': e.get('pid'),
                        'invoke_t': i['t'], 't': e['t'], 'type': e['type'], 'args': i.get('args') or {},
                        'value': e.get('value') or {}})
    return out


def joblib_states(evs):
    st = set()
    done = ops(evs)
    for job, rank, t in kills(evs):
        mine = [o for o in done if o['job'] == job and o['rank'] == rank]
        live = [o for o in mine if o['op'] == 'witness' and o['args'].get('when') == 'live' and o['t'] <= t]
        if live and any(s.get('mapped_by') and s.get('name', '').endswith('.pkl')
                        for s in live[-1]['value'].get('segments', [])):
            st.add('killed-with-file-mapped')
        pools = [o for o in mine if o['op'] == 'pool' and o['type'] == 'ok' and o['t'] <= t]
        if pools and pools[-1]['value'].get('alive'):
            st.add('killed-with-pool-idle')
        for o in done:
            if o['op'] == 'pool' and o['type'] == 'ok' and o['job'] != job and o['invoke_t'] > t:
                st.add('pool-ok-after-kill')
    for o in done:
        if o['op'] == 'folder' and o['type'] == 'ok':
            st.add('folder-in-dev-shm' if o['value'].get('shared_mem') else 'folder-in-temp-dir')
    pools = [o for o in done if o['op'] == 'pool']
    for o in done:
        if o['op'] == 'clean' and o['job'] >= 0 and any(
                p['job'] != o['job'] and p['invoke_t'] < o['invoke_t'] and o['t'] < p['t'] for p in pools):
            st.add('clean-during-live-pool')
    deaths = [e['t'] for e in evs if e.get('type') == 'fault' and e.get('kind') == 'pool-worker-kill']
    for o in done:
        if o['op'] == 'remove' and deaths and o['t'] > min(deaths) and \
                any(n.endswith('.pkl') for n in o['value'].get('removed', [])):
            st.add('own-files-removed-after-worker-death')
    for e in evs:
        if e.get('type') != 'audit':
            continue
        for n in (e.get('leftover_shm') or []) + (e.get('leftover_locks') or []):
            base = os.path.basename(n)
            if base.startswith('joblib_memmapping_folder_'):
                st.add('leftover-joblib-folder')
            if base.startswith('sem.loky-'):
                st.add('leftover-loky-semaphore')
    return st


def derived(d, evs):
    return _streaming_derived(d, evs) | joblib_states(evs)


judge.derived = derived


def facts(trial_dir):
    """What one trial shows, for docs/joblib.md's table."""
    evs = judge.events(trial_dir)
    violated, states = judge.facts(trial_dir)
    start = next((e['t'] for e in evs if e.get('type') == 'trial' and e.get('phase') == 'start'), 0)
    # The eventual cleanup after a parent's kill (not a whole tree's: nothing is left to clean then).
    kill = min([e['t'] for e in evs if e.get('type') == 'fault' and e.get('signal') == 9
                and (e.get('job') or 0) >= 0 and not (e.get('detail') or {}).get('tree')], default=None)
    audit = next((e for e in evs if e.get('type') == 'audit'), {})
    out = {'violated': sorted(violated), 'states': sorted(states)}
    if kill is not None and audit.get('settled_t'):
        out['settled_after_kill_s'] = round((audit['settled_t'] - kill) / 1e9, 1)
    out['leftovers'] = len(audit.get('leftover_shm') or []) + len(audit.get('leftover_locks') or [])
    out['duration_s'] = round((max(e['t'] for e in evs) - start) / 1e9, 1) if evs else 0
    return out


if __name__ == '__main__':
    if sys.argv[1] == '--expect':
        exp = judge.expectations(sys.argv[2])
        print(' '.join(exp['violation']))
        print(' '.join(exp['evidence']))
        sys.exit(0)
    if sys.argv[1] == '--facts':
        print(json.dumps(facts(sys.argv[2])))
        sys.exit(0)
    mode, hit, wrong, n, timeouts, lines = judge.judge(sys.argv[1], sys.argv[2])
    print(f'{mode} {hit} {wrong} {n} {timeouts}')
    print('\n'.join(lines[:3]))
