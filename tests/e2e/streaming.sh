#!/usr/bin/env bash
# The external-subject path end to end. Every scenario in scenarios/streaming/
# states, in two machine-readable comment lines, the failure it reproduces:
#
#   # expect-violation: <invariant> ...   (or "none": no invariant breaks)
#   # expect-evidence: <state> ...        (or "none"; a|b = either)
#
# Against the stand-in package (which keeps the original's flaws), driven by
# subjects/streaming/adapter.py exactly as a user's installed Streaming is, a
# scenario counts as reproduced only by a trial that breaks one of its expected
# invariants AND reached every evidence state, read from the trial's own
# verdict.json and history.jsonl: the checkers' reached states,
# error:<op>:<code> from the subject's fail events, fault:<kind>, and a few
# states read from the events (barrier-hang-after-death, granted-below/above-
# live-holder, leftover-<kind>, leftover-lock-files, acquired-prefix-<p>,
# file-exists-above-0). A scenario that breaks its invariant another way fails
# this test. Controls (none/none) must pass outright: 0 adapter-caused hangs.
# Finally the native shmcoord must pass every one of them.
#
# With torch importable (scripts/setup installs python3-torch) each multi-rank
# job forms a real torch.distributed gloo group; without it the stand-in's
# emulated group, which fails like gloo on a dead peer.
source "$(dirname "$0")/lib.sh"
S=$1
export SHMSTRESS_STREAMING_PATH=$PWD/tests/streaming_standin
if "$PY" -c 'import torch.distributed' 2>/dev/null; then group=gloo; else group=emulated; fi
export SHMSTRESS_PROCESS_GROUP=$group
cat >"$SCRATCH/evidence.py" <<'PYEOF'
import glob, json, os, re, sys

def expectations(path):
    exp = {}
    for line in open(path, encoding='utf-8'):
        m = re.match(r'#\s*expect-(violation|evidence):\s*(.*?)\s*$', line)
        if m:
            words = m.group(2).split()
            exp[m.group(1)] = [] if words == ['none'] else words
    if set(exp) != {'violation', 'evidence'}:
        sys.exit(f'{path}: needs both "# expect-violation:" and "# expect-evidence:" lines')
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

def derived(d, evs):
    st = set()
    plan = json.load(open(os.path.join(d, 'schedule.json')))
    dirs = {w['job']: {x['path'] for x in json.loads(w['env'].get('SHMSTRESS_DIRS', '[]')) if x.get('remote')}
            for w in plan.get('workers', [])}
    timed_out = any(e.get('type') == 'trial' and e.get('phase') == 'timeout' for e in evs)
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
    for e in evs:
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
    violated = {c['invariant'] for c in v.get('checks', []) if c['verdict'] == 'invalid'}
    states = {s for c in v.get('checks', []) for s in c.get('reached', [])}
    evs = events(d)
    for e in evs:
        if e.get('type') == 'fail' and isinstance(e.get('error'), dict):
            states.add(f"error:{e.get('op')}:{e['error'].get('code')}")
        elif e.get('type') == 'fault':
            states.add(f"fault:{e.get('kind')}")
    return violated, states | derived(d, evs)

toml, run = sys.argv[1], sys.argv[2]
exp = expectations(toml)
name = os.path.basename(toml)[:-5]
trials = sorted(glob.glob(os.path.join(run, name, 'trial-*')), key=lambda p: int(p.rsplit('-', 1)[1]))
lines, hit, wrong = [], 0, 0
for d in trials:
    if not os.path.exists(os.path.join(d, 'verdict.json')):
        continue
    violated, states = facts(d)
    expected = set(exp['violation'])
    ok = (not expected or violated & expected) and all(any(a in states for a in w.split('|')) for w in exp['evidence'])
    hit += bool(ok)
    if violated and not ok:
        wrong += 1
        lines.append(f'  {os.path.basename(d)}: violated {sorted(violated)}, reached {sorted(states)}')
mode = 'control' if not exp['violation'] and not exp['evidence'] else 'reproduce'
print(f'{mode} {hit} {wrong}')
print('\n'.join(lines[:3]))
PYEOF
[[ -n ${SHMSTRESS_STREAMING_SCENARIOS:-} ]] && files=($SHMSTRESS_STREAMING_SCENARIOS) || files=(scenarios/streaming/*.toml)
total_start=$(date +%s%N)
for f in "${files[@]}"; do
  n=$(basename "$f" .toml)
  grep -q '^# expect-violation: none' "$f" && stop=() || stop=(--stop-on-violation)
  start=$(date +%s%N)
  set +e
  "$S" run "$f" "${stop[@]}" --seed 5 --keep-passing --max-kept 0 --out "$SCRATCH/$n" >"$SCRATCH/$n.log" 2>&1
  rc=$?
  set -e
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  read -r mode hit wrong < <("$PY" "$SCRATCH/evidence.py" "$f" "$SCRATCH/$n" | head -1)
  details=$("$PY" "$SCRATCH/evidence.py" "$f" "$SCRATCH/$n" | tail -n +2)
  want=$(sed -n 's/^# expect-//p' "$f" | tr '\n' ';')
  if [[ $mode == control ]]; then
    [[ $rc -eq 0 ]] || { tail -20 "$SCRATCH/$n.log"; fail "$n (control): exit $rc against the stand-in ($group), expected 0: a failure the scenario does not inject"; }
    echo "streaming/$n: control passed ($group) in ${ms} ms"
    continue
  fi
  grep -q '^# expect-violation: none' "$f" && want_rc=0 || want_rc=1
  [[ $rc -eq $want_rc ]] || { tail -20 "$SCRATCH/$n.log"; echo "$details"; fail "$n: exit $rc against the stand-in ($group), expected $want_rc ($want)"; }
  (( wrong == 0 )) || { echo "$details"; fail "$n: a trial broke an invariant by another path than the one named ($want)"; }
  (( hit > 0 )) || { echo "$details"; fail "$n: no trial reproduced the named failure with its evidence ($want)"; }
  echo "streaming/$n: reproduced ($group) in ${ms} ms [$want]"
done
echo "stand-in: all of scenarios/streaming in $(( ($(date +%s%N) - total_start) / 1000000 )) ms"
unset SHMSTRESS_PROCESS_GROUP
"$S" run "${files[@]}" --subject native --trials 3 --seed 5 --out "$SCRATCH/native" >"$SCRATCH/native.log" 2>&1 \
  || { tail -30 "$SCRATCH/native.log"; fail "shmcoord did not pass scenarios/streaming"; }
echo "shmcoord passes all of scenarios/streaming ($(json "$SCRATCH/native/summary.json" "j['trials']") trials)"
