#!/usr/bin/env bash
# A failing trial's timeline.html (docs/reports.md) in a real browser: headless
# Chromium renders it to a PNG that is not blank, the page's script runs
# without a console message (the page logs nothing when all is well) and draws
# what only the script creates: one lane per rank, the op spans, the violating
# span and lane, the verdict badge. A copy of the page with a script error is
# rendered too, to show that this check would notice one.
#   timeline_render.sh SHMSTRESS KNOWN_BAD_WORKER   (known bad: cleanup-no-liveness)
source "$(dirname "$0")/lib.sh"
S=$1 W=$2
command -v chromium >/dev/null || fail "chromium missing (scripts/setup installs it)"

set +e
"$S" run scenarios/basic.toml --worker-bin "$W" --trials 6 --stop-on-violation --seed 3 --out "$SCRATCH/run" >"$SCRATCH/run.log" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || { cat "$SCRATCH/run.log"; fail "run exited $rc, expected 1 (a violation)"; }
trial=$(json "$SCRATCH/run/summary.json" "[v['trial_dir'] for v in j['violations']][0]")
page=$trial/timeline.html
[[ -s $page ]] || fail "no timeline.html in $trial"

# chromium MODE OUT PAGE: MODE is --screenshot=FILE or --dump-dom (to OUT);
# its log (console messages included) goes to OUT.log; the window is
# $WINDOW (default 1400,900). Its own profile dir in the scratch dir; run in
# the foreground under a deadline, so nothing outlives it.
chromium_run() {
  local mode=$1 out=$2 url=file://$3
  local profile
  profile=$(mktemp -d "$SCRATCH/profile.XXXXXX")
  timeout -k 5 60 chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" \
    --enable-logging=stderr --v=0 --window-size="${WINDOW:-1400,900}" "$mode" "$url" >"$out" 2>"$out.log" ||
    { tail -20 "$out.log" >&2; fail "chromium $mode exited $?"; }
}
# Console lines: Chromium logs the page's console calls and uncaught errors as
# ":CONSOLE" (every level, console.error included, as INFO), so any is one too many.
console_lines() { grep -E ':CONSOLE[:(]|Uncaught' "$1" || true; }

chromium_run "--screenshot=$SCRATCH/timeline.png" "$SCRATCH/screenshot.out" "$page"
[[ -f $SCRATCH/timeline.png ]] || fail "chromium wrote no screenshot"
size=$(stat -c %s "$SCRATCH/timeline.png")
# A blank 1400x900 page compresses to a few KB; the drawn timeline is far more.
((size > 30000)) || fail "the screenshot is nearly blank ($size bytes)"
"$PY" - "$SCRATCH/timeline.png" <<'EOF' || fail "the screenshot is not a 1400x900 PNG"
import struct, sys
head = open(sys.argv[1], "rb").read(24)
assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
w, h = struct.unpack(">II", head[16:24])
assert (w, h) == (1400, 900), (w, h)
EOF
[[ -z $(console_lines "$SCRATCH/screenshot.out.log") ]] ||
  fail "console messages while rendering: $(console_lines "$SCRATCH/screenshot.out.log")"

chromium_run --dump-dom "$SCRATCH/dom.html" "$page"
[[ -z $(console_lines "$SCRATCH/dom.html.log") ]] ||
  fail "console messages while rendering: $(console_lines "$SCRATCH/dom.html.log")"
D=$SCRATCH/dom.html
count() { grep -o "$1" "$D" | wc -l; }
ranks=$(json "$trial/timeline.json" "sum(1 for e in j['traceEvents'] if e.get('ph') == 'M' and e.get('name') == 'thread_name' and e['args']['name'].startswith(('job ', 'cleanup')))")
lanes=$(count 'class="row lane"')
((lanes == ranks)) || fail "$lanes lanes drawn for $ranks ranks"
spans=$(count 'class="span op-')
ops=$(json "$trial/timeline.json" "sum(1 for e in j['traceEvents'] if e.get('ph') == 'X' and e.get('tid') != 1)")
((spans >= 1)) || fail "no op spans drawn"
((spans <= ops)) || fail "$spans spans for $ops ops"
(($(count 'class="span op-[a-z_]* *[a-z ]*violation') >= 1)) || fail "no violating span marked"
(($(count 'class="label violating"') >= 1)) || fail "no lane marked as running a violating op"
grep -q 'id="badge" class="badge invalid"' "$D" || fail "the verdict badge was not set"
echo "ok: $size-byte screenshot, $lanes lanes, $spans spans, no console messages"

# The check notices a broken page: the same page whose script throws first.
sed 's|const trace = JSON.parse|null.x; const trace = JSON.parse|' "$page" >"$SCRATCH/broken.html"
grep -q 'null.x;' "$SCRATCH/broken.html" || fail "could not break a copy of the page (its script changed?)"
chromium_run --dump-dom "$SCRATCH/broken.dom" "$SCRATCH/broken.html"
[[ -n $(console_lines "$SCRATCH/broken.dom.log") ]] || fail "a script error in the page went unnoticed"
! grep -q 'class="row lane"' "$SCRATCH/broken.dom" || fail "the broken page drew lanes anyway?"
echo "ok: a page whose script throws is caught: $(console_lines "$SCRATCH/broken.dom.log" | head -1 | sed 's/^.*CONSOLE[^]]*] //')"

# The run's report.html renders too: the verdict, the buckets with their
# commands, a link to the failing trial's timeline.
report=$SCRATCH/run/report.html
[[ -f $report ]] || fail "the run wrote no report.html"
chromium_run "--screenshot=$SCRATCH/report.png" "$SCRATCH/report.out" "$report"
(( $(stat -c %s "$SCRATCH/report.png") > 20000 )) || fail "the report screenshot looks empty"
[[ -z $(console_lines "$SCRATCH/report.out.log") ]] || fail "console messages while rendering report.html"
chromium_run --dump-dom "$SCRATCH/report.dom" "$report"
grep -q 'class="badge invalid">invalid</span></h1>' "$SCRATCH/report.dom" || fail "report.html lacks the run's verdict"
grep -q 'href="basic/trial-[0-9]*/timeline.html"' "$SCRATCH/report.dom" || fail "report.html does not link the failing trial's timeline"
grep -q 'replay [^<]*basic/trial-[0-9]* --times 10' "$SCRATCH/report.dom" || fail "report.html gives no replay command for the bucket"
echo "ok: report.html renders with the verdict and links to the failing timeline"

# At a 1280 px window nothing on report.html sticks out past the window (the
# page has no script: a copy gets one that measures it), and its sections
# come in reading order: verdict, violations, coverage, latency, invariants.
sed 's|</body>|<script>{const w = document.documentElement.clientWidth; const out = [...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > w + 0.5).slice(0, 5).map(e => e.tagName + "." + e.className); document.body.insertAdjacentHTML("beforeend", "<pre id=measure>width " + w + " scroll " + document.documentElement.scrollWidth + " out [" + out.join(" ") + "]</pre>")}</script></body>|' \
  "$report" >"$SCRATCH/report-measured.html"
WINDOW=1280,900 chromium_run --dump-dom "$SCRATCH/report-measured.dom" "$SCRATCH/report-measured.html"
[[ -z $(console_lines "$SCRATCH/report-measured.dom.log") ]] || fail "console messages while measuring report.html"
measure=$(grep -o '<pre id="measure">[^<]*' "$SCRATCH/report-measured.dom" | sed 's/^.*">//')
[[ -n $measure ]] || fail "the measuring copy of report.html did not run"
[[ $measure == *"out []" ]] || fail "report.html is wider than a 1280 px window: $measure"
"$PY" - "$SCRATCH/report.dom" <<'EOF' || fail "report.html's sections are missing or out of order"
import sys
dom = open(sys.argv[1]).read()
at = [dom.find('id="%s"' % s) for s in ("verdict", "violations", "coverage", "latency", "invariants")]
assert -1 not in at and at == sorted(at), at
EOF
echo "ok: report.html fits a 1280 px window ($measure), sections in order"
