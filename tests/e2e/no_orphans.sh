#!/usr/bin/env bash
# harness.no-orphans cannot be escaped: a worker that forks a child which
# starts its own session and forks a grandchild, then exits, leaves both
# behind. The audit must name both (the trial runs in its own pid namespace,
# so everything of it is in its /proc), the run must report the violation,
# and neither may be alive anywhere on the machine once the run is over.
source "$(dirname "$0")/lib.sh"
S=$1
TOKEN="shmstress-orphan-$$-$RANDOM"
cat >"$SCRATCH/orphans.toml" <<'TOML'
description = "A worker double-forks and exits (tests/e2e/no_orphans.sh)."
trials = 2
timeout = "10s"
final_cleanup = false
[[job]]
ranks = 1
[job.workload]
acquire = false
TOML
set +e
SHMSTRESS_TEST_TOKEN=$TOKEN "$S" run "$SCRATCH/orphans.toml" --trials 2 --seed 5 \
  --subject "exec:/usr/bin/python3 $PWD/tests/e2e/subjects/double_fork.py" \
  --out "$SCRATCH/out" >"$SCRATCH/run.log" 2>&1
rc=$?
set -e
alive=$("$PY" - "$TOKEN" <<'PYEOF'
import os, sys
n = 0
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) != os.getpid():
        try:
            if sys.argv[1].encode() in open(f"/proc/{p}/cmdline", "rb").read():
                n += 1
        except OSError:
            pass
print(n)
PYEOF
)
(( alive == 0 )) || fail "$alive processes of the trial outlived it"
[[ $rc == 1 ]] || { cat "$SCRATCH/run.log"; fail "expected exit 1 (a harness.no-orphans violation), got $rc"; }
"$PY" - "$SCRATCH/out" <<'PYEOF' || fail "the audit did not name both left-behind processes"
import glob, json, sys
trials = glob.glob(sys.argv[1] + "/*/trial-*/history.jsonl")
assert len(trials) == 2, trials
for f in trials:
    ev = [json.loads(l) for l in open(f)]
    start = next(e for e in ev if e.get("type") == "trial" and e.get("phase") == "start")
    assert start.get("pid_namespace") is True, "trial did not run in its own pid namespace"
    left = next(e["value"]["left_behind"] for e in ev if e.get("type") == "ok" and e.get("op") == "clean")
    audit = next(e for e in ev if e.get("type") == "audit")
    assert sorted(map(int, left)) == sorted(audit["orphans"]), (left, audit["orphans"])
    verdict = json.load(open(f.replace("history.jsonl", "verdict.json")))
    assert "harness.no-orphans" in json.dumps(verdict), verdict
print("audit named", audit["orphans"], "in each of", len(trials), "trials")
PYEOF
echo "no process outlived the trial"
