#!/usr/bin/env bash
# The live Prometheus outputs against the real thing (docs/reports.md): Debian's
# prometheus scrapes a run's --listen endpoint and (honor_labels) a real
# prometheus-pushgateway that the runs push to; a green soak in two shards
# (each pushes into its own group, instance="shard-i-of-2", and both must be
# queryable), then runs of a known-bad worker, the second against a baseline
# written from the first (new and known failures); the values are read back
# through Prometheus' HTTP API, and every panel query of
# reports/grafana/shmstress.json must return data.
#   prometheus.sh SHMSTRESS KNOWN_BAD_WORKER   (known bad: cleanup-no-liveness)
# Both daemons listen on 127.0.0.1 only, on free ports, with their storage in
# the scratch dir; only the pids this script started are stopped (on EXIT).
source "$(dirname "$0")/lib.sh"
S=$1 W=$2
DASHBOARD=reports/grafana/shmstress.json
for bin in prometheus prometheus-pushgateway; do
  command -v $bin >/dev/null || fail "$bin missing (scripts/setup installs it)"
done
t0=$SECONDS

pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$SCRATCH"
}
trap cleanup EXIT

# Three free loopback ports (held together so they differ, then released).
read -r PROM PGW LISTEN < <("$PY" -c '
import socket
s = [socket.socket() for _ in range(3)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')

"$S" --help >/dev/null  # the binary runs at all
prometheus-pushgateway --web.listen-address="127.0.0.1:$PGW" --persistence.file="" \
  --log.level=warn >"$SCRATCH/pushgateway.log" 2>&1 &
pids+=($!)
cat >"$SCRATCH/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: shmstress-live        # a run's --listen endpoint, while it runs
    static_configs: [{targets: ["127.0.0.1:$LISTEN"]}]
  - job_name: pushgateway           # keeps the job="shmstress" the runs push with
    honor_labels: true
    static_configs: [{targets: ["127.0.0.1:$PGW"]}]
EOF
(cd "$SCRATCH" && exec prometheus --config.file="$SCRATCH/prometheus.yml" \
  --storage.tsdb.path="$SCRATCH/tsdb" --web.listen-address="127.0.0.1:$PROM" \
  --log.level=warn >"$SCRATCH/prometheus.log" 2>&1) &
pids+=($!)
API="http://127.0.0.1:$PROM/api/v1"

# q EXPR -> the instant query's result list as JSON (fails on an API error).
q() {
  "$PY" - "$API" "$1" <<'EOF'
import json, sys, urllib.parse, urllib.request
api, expr = sys.argv[1], sys.argv[2]
with urllib.request.urlopen(api + "/query?" + urllib.parse.urlencode({"query": expr}), timeout=10) as r:
    j = json.load(r)
if j.get("status") != "success":
    sys.exit(f"query failed: {expr}: {j}")
print(json.dumps(j["data"]["result"]))
EOF
}
# value EXPR -> the single sample's value, or "" if the result is empty.
value() { q "$1" | "$PY" -c 'import json,sys; r=json.load(sys.stdin); print(r[0]["value"][1] if r else "")'; }
debug() {
  echo "--- prometheus.log"; tail -20 "$SCRATCH/prometheus.log"
  echo "--- pushgateway.log"; tail -20 "$SCRATCH/pushgateway.log"
} >&2
# wait_for SECONDS EXPR: until the query returns something.
wait_for() {
  local until=$((SECONDS + $1))
  while ((SECONDS < until)); do
    [[ -n $(value "$2" 2>/dev/null) ]] && return 0
    sleep 0.5
  done
  debug
  fail "after $1 s, still nothing for: $2"
}

# Prometheus up, and scraping the gateway (its first scrape comes a few seconds in).
wait_for 30 'up{job="pushgateway"} == 1'
echo "prometheus and pushgateway up after $((SECONDS - t0)) s"

# A green soak in two shards at once (same seed), shard 0 served live; both push at the end.
green_start=$(date +%s.%N)
set +e
"$S" run scenarios/basic.toml scenarios/kill-holder.toml --duration 15s --seed 7 --shard 0/2 --out "$SCRATCH/green" \
  --listen "127.0.0.1:$LISTEN" --pushgateway "http://127.0.0.1:$PGW" >"$SCRATCH/green.log" 2>&1 &
shard0=$!
"$S" run scenarios/basic.toml scenarios/kill-holder.toml --duration 15s --seed 7 --shard 1/2 --out "$SCRATCH/green1" \
  --pushgateway "http://127.0.0.1:$PGW" >"$SCRATCH/green1.log" 2>&1
rc1=$?
wait $shard0
rc=$?
set -e
[[ $rc -eq 0 ]] || { tail -30 "$SCRATCH/green.log"; fail "the green run (shard 0/2) exited $rc"; }
[[ $rc1 -eq 0 ]] || { tail -30 "$SCRATCH/green1.log"; fail "the green run (shard 1/2) exited $rc1"; }
grep -q "^metrics: serving http://127.0.0.1:$LISTEN/metrics" "$SCRATCH/green.log" || fail "no 'serving' line"
for i in 0 1; do
  log=$SCRATCH/green.log; [[ $i -eq 1 ]] && log=$SCRATCH/green1.log
  grep -q "^pushgateway: pushed to http://127.0.0.1:$PGW/metrics/job/shmstress/subject/native/instance/shard-$i-of-2" "$log" ||
    { tail "$log"; fail "shard $i/2 did not push into its own group"; }
done
wait_for 15 'count(shmstress_last_success_timestamp_seconds{job="shmstress",instance=~"shard-[01]-of-2"}) == 2'
echo "green run (2 shards) done after $((SECONDS - t0)) s"

# A known-bad worker: a first run, a baseline written from it (plus an entry
# that will not recur), then a run against it with one more scenario: its
# buckets are new, basic's known. Violations live and pushed; the green
# shards' last success must stay.
red_start=$(date +%s.%N)
set +e
"$S" run scenarios/basic.toml --duration 5s --seed 8 --worker-bin "$W" --out "$SCRATCH/red0" >"$SCRATCH/red0.log" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || { tail -30 "$SCRATCH/red0.log"; fail "the first known-bad run exited $rc, expected 1"; }
"$S" baseline "$SCRATCH/red0" -o "$SCRATCH/known.txt" --reason "the known-bad worker of this test" 2>/dev/null
echo "cleanup.safety/basic/0123456789ab  never  an entry that does not recur" >>"$SCRATCH/known.txt"
set +e
"$S" run scenarios/basic.toml scenarios/kill-holder.toml --duration 6s --seed 9 --worker-bin "$W" \
  --baseline "$SCRATCH/known.txt" --out "$SCRATCH/red" \
  --listen "127.0.0.1:$LISTEN" --pushgateway "http://127.0.0.1:$PGW" >"$SCRATCH/red.log" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || { tail -30 "$SCRATCH/red.log"; fail "the known-bad run exited $rc, expected 1 (new buckets in kill-holder)"; }
grep -q "^pushgateway: pushed to .*/instance/shard-0-of-1" "$SCRATCH/red.log" || fail "the known-bad run did not push"
grep -q "^known, did not recur: cleanup.safety/basic/0123456789ab" "$SCRATCH/red.log" ||
  { grep -A3 '^buckets' "$SCRATCH/red.log"; fail "the console does not name the known failure that did not recur"; }
wait_for 15 'shmstress_run_exit_code{job="shmstress",instance="shard-0-of-1"} == 1'
echo "known-bad runs done after $((SECONDS - t0)) s"

check() {  # check DESCRIPTION PYTHON-CONDITION-ON-v EXPR
  local v
  v=$(value "$3")
  "$PY" -c "import sys; v = float(sys.argv[1]) if sys.argv[1] else None; sys.exit(0 if v is not None and ($2) else 1)" "$v" ||
    fail "$1: $3 = '${v}'"
  echo "ok: $1 ($v)"
}
# Pushed (job="shmstress", kept by honor_labels).
check "trials pushed" 'v > 0' 'sum(shmstress_trials_total{job="shmstress"})'
check "violations pushed" 'v > 0' \
  'shmstress_violations_total{job="shmstress",scenario="basic",invariant="cleanup.safety",subject="native",instance="shard-0-of-1"}'
# Shards: each in its own group, both queryable, each with its own last success.
check "both shards pushed" 'v == 2' \
  'count(count by (instance) (shmstress_trials_total{job="shmstress",instance=~"shard-[01]-of-2"}))'
check "trials of shard 1/2" 'v > 0' 'sum(shmstress_trials_total{job="shmstress",instance="shard-1-of-2"})'
for i in 0 1; do
  check "last success of shard $i/2 kept from the green run" "$green_start - 1 <= v <= $red_start" \
    "shmstress_last_success_timestamp_seconds{job=\"shmstress\",subject=\"native\",instance=\"shard-$i-of-2\"}"
done
check "shard progress at the end" 'v == 1' 'min(shmstress_run_progress_ratio{job="shmstress",instance=~"shard-[01]-of-2"})'
check "no last success for the known-bad group" 'v == 0' \
  'count(shmstress_last_success_timestamp_seconds{job="shmstress",instance="shard-0-of-1"}) or vector(0)'
check "last run is the known-bad one" "v >= $red_start" \
  'shmstress_last_run_timestamp_seconds{job="shmstress",subject="native",instance="shard-0-of-1"}'
# New vs known (the baseline): basic's buckets known, kill-holder's new.
check "known violations pushed" 'v > 0' \
  'sum(shmstress_triaged_violations_total{job="shmstress",scenario="basic",status="known"})'
check "new violations pushed" 'v > 0' \
  'sum(shmstress_triaged_violations_total{job="shmstress",scenario="kill-holder",status="new"})'
check "new buckets" 'v > 0' 'shmstress_buckets{job="shmstress",instance="shard-0-of-1",status="new"}'
check "known buckets" 'v > 0' 'shmstress_buckets{job="shmstress",instance="shard-0-of-1",status="known"}'
check "known buckets that did not recur" 'v >= 1' \
  'shmstress_buckets{job="shmstress",instance="shard-0-of-1",status="not_recurred"}'
# Scraped live during the runs (the target is down again now, so over time).
check "live endpoint scraped in progress" 'v == 1' 'max(max_over_time(shmstress_run_in_progress{job="shmstress-live"}[5m]))'
check "live trials" 'v > 0' 'max(max_over_time(shmstress_trials_total{job="shmstress-live",scenario="kill-holder"}[5m]))'
check "live faults" 'v > 0' 'max(max_over_time(shmstress_faults_total{job="shmstress-live",fault="sigkill"}[5m]))'
check "live violations" 'v > 0' \
  'max(max_over_time(shmstress_violations_total{job="shmstress-live",invariant="cleanup.safety"}[5m]))'
check "live recovery histogram" 'v > 0' \
  'max(max_over_time(shmstress_recovery_seconds_count{job="shmstress-live",scenario="kill-holder"}[5m]))'

# Low cardinality: no label beyond the catalog's (and Prometheus' job/instance).
"$PY" - "$API" <<'EOF' || fail "a high-cardinality label reached Prometheus"
import json, sys, urllib.parse, urllib.request
api = sys.argv[1]
url = api + "/series?" + urllib.parse.urlencode({"match[]": '{__name__=~"shmstress_.+"}'})
series = json.load(urllib.request.urlopen(url, timeout=10))["data"]
allowed = {"__name__", "job", "instance", "scenario", "invariant", "fault", "state", "status", "subject", "le"}
labels = {k for s in series for k in s}
if labels - allowed:
    sys.exit(f"unexpected labels: {sorted(labels - allowed)}")
print(f"ok: {len(series)} shmstress series, labels {sorted(labels)}")
EOF

# Every panel query of the dashboard returns data from this Prometheus, asked
# as Grafana asks it: graphs (range: true) over the span of the two runs,
# stats and the table (instant) at the end.
"$PY" - "$API" "$DASHBOARD" "$green_start" <<'EOF' || fail "a dashboard query returned no data"
import json, math, sys, time, urllib.parse, urllib.request
api, path, start = sys.argv[1], sys.argv[2], float(sys.argv[3]) - 5
end = time.time()
d = json.load(open(path))
assert d.get("schemaVersion", 0) >= 36, "schemaVersion < 36"
variables = {v["name"]: v for v in d["templating"]["list"]}
assert variables["datasource"]["type"] == "datasource", "no datasource variable"
# Grafana's own variables, and the dashboard's at "All".
subst = {"$__rate_interval": "1m", "$__interval": "15s", "$__range": "1h"}
for name, v in variables.items():
    if v["type"] == "query":
        subst["${%s}" % name] = subst["$" + name] = v.get("allValue") or ".*"
def expand(expr):
    for k in sorted(subst, key=len, reverse=True):
        expr = expr.replace(k, subst[k])
    assert "$" not in expr, f"unsubstituted variable in {expr}"
    return expr
def query(expr, graph):
    if graph:
        args = {"query": expr, "start": start, "end": end, "step": 1}
    else:
        args = {"query": expr}
    url = api + ("/query_range?" if graph else "/query?") + urllib.parse.urlencode(args)
    j = json.load(urllib.request.urlopen(url, timeout=10))
    assert j["status"] == "success", j
    return j["data"]["result"]
def finite(series):
    values = series.get("values") or [series["value"]]
    return any(math.isfinite(float(v[1])) for v in values)
def panels(ps):
    for p in ps:
        yield p
        yield from panels(p.get("panels", []))
failed = 0
n = 0
ids = set()
for p in panels(d["panels"]):
    if p["type"] == "row":
        continue
    assert p["id"] not in ids, f"duplicate panel id {p['id']}"
    ids.add(p["id"])
    assert p["datasource"]["uid"] == "${datasource}", f"panel {p['title']} has its own datasource"
    for t in p.get("targets", []):
        n += 1
        expr = expand(t["expr"])
        graph = not t.get("instant", False)
        result = query(expr, graph)
        good = [s for s in result if finite(s)]
        failed += not good
        print(f"{'ok' if good else 'NO DATA'}: [{p['title']}] {'range' if graph else 'instant'}, "
              f"{len(result)} series, {len(good)} with values: {expr}")
# The variables' label_values() queries, as Grafana runs them (the series API).
for name, v in variables.items():
    if v["type"] != "query":
        continue
    metric_sel, label = v["definition"][len("label_values("):-1].rsplit(",", 1)
    url = api + "/label/" + label.strip() + "/values?" + urllib.parse.urlencode({"match[]": expand(metric_sel)})
    values = json.load(urllib.request.urlopen(url, timeout=10))["data"]
    n += 1
    failed += not values
    print(f"{'ok' if values else 'NO DATA'}: variable ${name} = {values}")
print(f"{n - failed} of {n} dashboard queries returned data")
sys.exit(1 if failed else 0)
EOF

# Nothing of ours left listening once the daemons are stopped.
cleanup_pids=("${pids[@]}")
trap - EXIT
cleanup
for p in "${cleanup_pids[@]}"; do
  ! kill -0 "$p" 2>/dev/null || fail "pid $p still running"
done
echo "prometheus e2e passed in $((SECONDS - t0)) s"
