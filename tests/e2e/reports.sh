#!/usr/bin/env bash
# The reports of a run that finds a violation (docs/reports.md): JUnit XML valid
# for the schema CI servers use, a Prometheus textfile counting the violation,
# a timeline for the failing trial, `report` regenerating them from the run
# dir, and `replay` reproducing the trial.
#   reports.sh SHMSTRESS KNOWN_BAD_WORKER   (known bad: cleanup-no-liveness)
source "$(dirname "$0")/lib.sh"
S=$1 W=$2
XSD=tests/junit/junit.xsd
command -v xmllint >/dev/null || fail "xmllint missing (scripts/setup installs libxml2-utils)"

set +e
"$S" run scenarios/basic.toml --worker-bin "$W" --trials 6 --stop-on-violation --seed 3 --out "$SCRATCH/run" \
  --junit "$SCRATCH/ci/junit.xml" --metrics-file "$SCRATCH/textfile/shmstress.prom" >"$SCRATCH/run.log" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || { cat "$SCRATCH/run.log"; fail "run exited $rc, expected 1 (a violation)"; }

# JUnit: schema-valid, the violated invariant is a <failure> with its reproduce command
# (one testcase per bucket, named invariant/hash: docs/triage.md).
xmllint --noout --schema "$XSD" "$SCRATCH/ci/junit.xml" 2>"$SCRATCH/xmllint.log" ||
  { cat "$SCRATCH/xmllint.log"; fail "junit.xml does not validate against $XSD"; }
failures=$(xmllint --xpath 'count(//testcase[@classname="basic"][starts-with(@name,"cleanup.safety/")]/failure)' "$SCRATCH/ci/junit.xml")
[[ $failures -ge 1 ]] || fail "no <failure> for basic/cleanup.safety"
message=$(xmllint --xpath 'string(//testcase[starts-with(@name,"cleanup.safety/")][failure][1]/failure/@message)' "$SCRATCH/ci/junit.xml")
[[ $message == *"--seed 3 --trial "* ]] || fail "failure message lacks the reproduce command: $message"
seed=$(xmllint --xpath 'string(//testsuite[@name="basic"]/properties/property[@name="seed"]/@value)' "$SCRATCH/ci/junit.xml")
[[ $seed == 3 ]] || fail "seed property is '$seed'"

# Metrics: the textfile counts the violation, and nothing but it is left in its directory.
M="$SCRATCH/textfile/shmstress.prom"
line=$(grep '^shmstress_violations_total{' "$M" | grep 'scenario="basic"' | grep 'invariant="cleanup.safety"') ||
  fail "no shmstress_violations_total series for cleanup.safety"
"$PY" -c "import sys; v = float(sys.argv[1].rsplit(' ', 1)[1]); sys.exit(0 if v > 0 else 1)" "$line" ||
  fail "violations_total for cleanup.safety is not > 0: $line"
grep -q '^shmstress_last_run_timestamp_seconds{subject="native"} ' "$M" || fail "no last_run_timestamp"
! grep -q '^shmstress_last_success_timestamp_seconds' "$M" || fail "last_success written for a failing run"
! grep -Eq 'seed=|pid=|trial=' "$M" || fail "a high-cardinality label in the textfile"
[[ $(ls -A "$SCRATCH/textfile") == shmstress.prom ]] || fail "temp files left: $(ls -A "$SCRATCH/textfile")"
if command -v promtool >/dev/null; then
  promtool check metrics <"$M" || fail "promtool rejects the textfile"
fi

# Timeline of the failing trial: Chrome trace JSON with the violating op marked, and the page.
trial=$(json "$SCRATCH/run/summary.json" "[v['trial_dir'] for v in j['violations'] if v['invariant'] == 'cleanup.safety'][0]")
[[ -s $trial/timeline.html ]] || fail "no timeline.html in $trial"
marked=$(json "$trial/timeline.json" "sum(1 for e in j['traceEvents'] if e.get('args', {}).get('violation'))")
(( marked >= 1 )) || fail "timeline.json marks no violating op"
grep -q 'id="trace"' "$trial/timeline.html" || fail "timeline.html does not embed the trace"

# `report` regenerates timelines and the CI files from the stored trial dirs.
rm "$trial/timeline.html" "$trial/timeline.json"
set +e
"$S" report "$SCRATCH/run" --junit "$SCRATCH/ci/again.xml" >"$SCRATCH/report.log" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || { cat "$SCRATCH/report.log"; fail "report exited $rc, expected 1 (the stored trials violate)"; }
[[ -s $trial/timeline.html && -s $trial/timeline.json ]] || fail "report did not regenerate the timeline"
xmllint --noout --schema "$XSD" "$SCRATCH/ci/again.xml" 2>/dev/null || fail "report's junit does not validate"

# `replay` re-runs the trial's schedule (with the run's worker binary) and reproduces it.
set +e
"$S" replay "$trial" --times 3 --allow-stored-command >"$SCRATCH/replay.log" 2>&1
rc=$?
set -e
grep -v "^trials " "$SCRATCH/replay.log" || true
[[ $rc -eq 0 ]] || fail "replay exited $rc, expected 0 (reproduced)"
grep -Eq '^  cleanup\.safety: [1-3]/3' "$SCRATCH/replay.log" || fail "replay did not count cleanup.safety over 3 replays"
[[ ! -e $trial/replays ]] || fail "replay left its trial dirs without --keep"
echo "reports: ok ($marked violating ops marked in $(basename "$trial")'s timeline)"
