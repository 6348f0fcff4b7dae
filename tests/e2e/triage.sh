#!/usr/bin/env bash
# Triage of a nightly in shards (docs/triage.md): two shards of one seed against
# a known-bad worker merge into one run (counts added, buckets merged by
# fingerprint, a missing or repeated shard refused); `shmstress baseline` writes
# the merged buckets as known; classified against it the same failures exit 0,
# and with one bucket taken out of the baseline that bucket is new again (exit 1).
#   triage.sh SHMSTRESS KNOWN_BAD_WORKER   (known bad: cleanup-no-liveness)
source "$(dirname "$0")/lib.sh"
S=$1 W=$2
scen=(scenarios/basic.toml scenarios/kill-holder.toml)

for i in 0 1; do
  set +e
  "$S" run "${scen[@]}" --trials 6 --seed 8 --shard "$i/2" --worker-bin "$W" --out "$SCRATCH/s$i" >"$SCRATCH/s$i.log" 2>"$SCRATCH/s$i.err"
  rc=$?
  set -e
  [[ $rc -eq 1 ]] || { tail -20 "$SCRATCH/s$i.log" "$SCRATCH/s$i.err"; fail "shard $i/2 exited $rc, expected 1 (violations)"; }
done
# A run with violations shows the verdict, then each violation's bucket with
# its reproduce command (docs/reports.md).
"$PY" - "$SCRATCH/s0.log" <<'EOF' || { cat "$SCRATCH/s0.log"; fail "the console of a failing run is not verdict, then buckets with reproduce commands"; }
import sys
lines = [l for l in open(sys.argv[1]).read().splitlines() if l]
assert lines[0].startswith("verdict invalid: "), lines[0]
assert lines[1].startswith("buckets: "), lines[1]
assert "NEW" in lines[2], lines[2]
assert lines[3].strip().startswith("reproduce: ") and "--seed 8" in lines[3], lines[3]
EOF

# Merge: one run of both shards.
set +e
"$S" merge "$SCRATCH/s0" "$SCRATCH/s1" --out "$SCRATCH/m" --junit "$SCRATCH/m/junit.xml" >"$SCRATCH/m.log" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || { cat "$SCRATCH/m.log"; fail "merge exited $rc, expected 1 (the shards' violations, no baseline)"; }
"$PY" - "$SCRATCH" <<'EOF' || fail "the merged summary does not add up"
import json, sys, collections
d = sys.argv[1]
s = [json.load(open(f"{d}/s{i}/summary.json")) for i in (0, 1)]
m = json.load(open(f"{d}/m/summary.json"))
assert m["trials"] == s[0]["trials"] + s[1]["trials"] == 12, (m["trials"], s[0]["trials"], s[1]["trials"])
assert m["shard"] == "0/1" and m["seed"] == 8, (m["shard"], m["seed"])
want = collections.Counter()
for r in s:
    for b in r["buckets"]:
        want[b["fingerprint"]] += b["trials"]
got = {b["fingerprint"]: b["trials"] for b in m["buckets"]}
assert got == dict(want), (got, dict(want))
assert m["new_buckets"] == len(got) > 0 and m["known_buckets"] == 0, (m["new_buckets"], m["known_buckets"])
# Each bucket's trial range spans both shards' trials of it.
for b in m["buckets"]:
    parts = [x for r in s for x in r["buckets"] if x["fingerprint"] == b["fingerprint"]]
    assert b["first_trial"] == min(x["first_trial"] for x in parts), b
    assert b["last_trial"] == max(x["last_trial"] for x in parts), b
print(f"merged: {m['trials']} trials, {len(got)} buckets")
EOF
# JUnit: one testcase per bucket, named invariant/hash under its scenario.
for fp in $(json "$SCRATCH/m/summary.json" "' '.join(b['fingerprint'] for b in j['buckets'])"); do
  IFS=/ read -r inv _ hash <<<"$fp"
  grep -q "name=\"$inv/$hash\"" "$SCRATCH/m/junit.xml" || fail "no JUnit testcase for bucket $fp"
done

# Shards that do not add up are refused, saying why.
set +e
"$S" merge "$SCRATCH/s0" --out "$SCRATCH/bad1" >"$SCRATCH/bad1.log" 2>&1
rc1=$?
"$S" merge "$SCRATCH/s0" "$SCRATCH/s0" --out "$SCRATCH/bad2" >"$SCRATCH/bad2.log" 2>&1
rc2=$?
set -e
[[ $rc1 -eq 2 ]] && grep -q "incomplete: shard 1/2 missing" "$SCRATCH/bad1.log" ||
  { cat "$SCRATCH/bad1.log"; fail "a missing shard: exit $rc1"; }
[[ $rc2 -eq 2 ]] && grep -q "shard 0/2 is given twice" "$SCRATCH/bad2.log" ||
  { cat "$SCRATCH/bad2.log"; fail "a repeated shard: exit $rc2"; }

# A baseline of the merged run: every bucket known, so the same failures exit 0.
"$S" baseline "$SCRATCH/m" -o "$SCRATCH/known.txt" --reason "known flaw of the test's worker" >"$SCRATCH/b.log" 2>&1 ||
  { cat "$SCRATCH/b.log"; fail "baseline failed"; }
for fp in $(json "$SCRATCH/m/summary.json" "' '.join(b['fingerprint'] for b in j['buckets'])"); do
  grep -q "^$fp  *never  *known flaw of the test's worker$" "$SCRATCH/known.txt" || { cat "$SCRATCH/known.txt"; fail "$fp not in the baseline"; }
done
echo "cleanup.safety/basic/0123456789ab  never  an entry that does not recur" >>"$SCRATCH/known.txt"
echo "cleanup.safety/basic/fedcba987654  2000-01-01  an entry that has expired" >>"$SCRATCH/known.txt"
set +e
"$S" merge "$SCRATCH/s0" "$SCRATCH/s1" --baseline "$SCRATCH/known.txt" --out "$SCRATCH/k" >"$SCRATCH/k.log" 2>&1
rc=$?
set -e
[[ $rc -eq 0 ]] || { cat "$SCRATCH/k.log"; fail "only known failures recurred, yet exit $rc (expected 0)"; }
grep -q "only known failures: they do not fail the run" "$SCRATCH/k.log" || { cat "$SCRATCH/k.log"; fail "the console does not say the failures are known"; }
grep -q "^known, did not recur: cleanup.safety/basic/0123456789ab" "$SCRATCH/k.log" || fail "a known entry that did not recur is not named"
grep -q "^baseline entry expired 2000-01-01, counts as new again: cleanup.safety/basic/fedcba987654" "$SCRATCH/k.log" ||
  fail "an expired entry is not named"
[[ $(json "$SCRATCH/k/summary.json" "j['new_buckets']") -eq 0 ]] || fail "new buckets against a baseline of the same run"

# One bucket taken out of the baseline: that bucket alone is new, and fails the run.
gone=$(json "$SCRATCH/m/summary.json" "j['buckets'][0]['fingerprint']")
grep -v "^$gone " "$SCRATCH/known.txt" >"$SCRATCH/known-1.txt"
set +e
"$S" merge "$SCRATCH/s0" "$SCRATCH/s1" --baseline "$SCRATCH/known-1.txt" --out "$SCRATCH/n" >"$SCRATCH/n.log" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || { cat "$SCRATCH/n.log"; fail "a new bucket, yet exit $rc (expected 1)"; }
new=$(json "$SCRATCH/n/summary.json" "' '.join(b['fingerprint'] for b in j['buckets'] if b['status'] == 'new')")
[[ $new == "$gone" ]] || fail "new buckets [$new], expected [$gone]"
grep -q "NEW .* $gone" "$SCRATCH/n.log" || { cat "$SCRATCH/n.log"; fail "the console does not mark $gone NEW"; }
echo "triage: merged 2 shards, baseline of $(grep -c '^[a-z]' "$SCRATCH/known.txt") entries; known -> 0, one new -> 1"
