// The timeline page: timeline.json rendered by inline JS, so the page is one
// file that opens from a CI artifact or a mail attachment with no network.
// The trace is embedded verbatim (with '<', '>' and '&' as \u escapes, so no
// byte of a worker's error message can close the <script> element), and the
// script draws only with textContent / escaped text.
#include <string>

#include "reports/reports.h"

namespace reports {
namespace {

constexpr const char* kHead = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>shmstress timeline</title>
<style>
:root { --label-w: 230px; --row-h: 28px; --ink: #1d2433; --muted: #5b6475; --line: #e3e6ec; --bad: #d62728; }
* { box-sizing: border-box; }
body { margin: 0; font: 13px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: var(--ink); background: #f6f7f9; }
header { padding: 14px 20px 10px; background: #fff; border-bottom: 1px solid var(--line); }
h1 { font-size: 18px; margin: 0 8px 6px 0; display: inline-block; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 600; font-size: 12px; vertical-align: 3px; color: #fff; background: #2ca02c; }
.badge.invalid { background: var(--bad); } .badge.unknown { background: #d08c00; }
.facts { color: var(--muted); margin: 2px 0 6px; }
.facts b { color: var(--ink); font-weight: 600; }
.repro { font: 12px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; background: #f0f2f5; border: 1px solid var(--line); border-radius: 4px; padding: 4px 8px; white-space: pre-wrap; word-break: break-all; margin: 4px 0; }
details.problems { margin-top: 6px; }
details.problems summary { cursor: pointer; font-weight: 600; }
details.problems ul { margin: 4px 0 0; padding-left: 20px; max-height: 180px; overflow: auto; }
details.problems li { font: 12px/1.45 ui-monospace, "DejaVu Sans Mono", monospace; }
.inv { color: var(--bad); font-weight: 600; }
.toolbar { display: flex; flex-wrap: wrap; align-items: center; gap: 6px 14px; padding: 8px 20px; background: #fff; border-bottom: 1px solid var(--line); position: sticky; top: 0; z-index: 20; }
.toolbar button { font: inherit; padding: 2px 9px; border: 1px solid #c8cdd6; background: #fff; border-radius: 4px; cursor: pointer; }
.toolbar button:hover { background: #eef1f6; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 12px; color: var(--muted); }
.legend span { display: inline-flex; align-items: center; gap: 4px; }
.sw { display: inline-block; width: 18px; height: 11px; border-radius: 2px; border: 1px solid rgba(0,0,0,.25); }
.chart { display: flex; margin: 12px 20px 20px; background: #fff; border: 1px solid var(--line); border-radius: 6px; overflow: hidden; }
.labels { flex: 0 0 var(--label-w); border-right: 1px solid var(--line); background: #fbfbfc; }
.label { height: var(--row-h); line-height: var(--row-h); padding: 0 10px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; border-bottom: 1px solid var(--line); }
.label.axis { color: var(--muted); font-size: 11px; }
.label.faults { color: #8a5a00; font-weight: 600; }
.label.involved { border-left: 4px solid #f0a030; padding-left: 6px; font-weight: 600; }
.label.violating { border-left: 4px solid var(--bad); padding-left: 6px; color: var(--bad); font-weight: 700; }
.scroll { flex: 1 1 auto; overflow-x: auto; overflow-y: hidden; position: relative; }
.canvas { position: relative; overflow: hidden; }
.row { position: relative; height: var(--row-h); border-bottom: 1px solid var(--line); }
.row.axis { background: #fbfbfc; }
.tick { position: absolute; top: 0; bottom: 0; border-left: 1px solid #d7dbe2; font-size: 11px; color: var(--muted); padding-left: 3px; line-height: var(--row-h); white-space: nowrap; }
.grid { position: absolute; top: 0; bottom: 0; border-left: 1px dashed #eceef2; pointer-events: none; }
.span { position: absolute; top: 3px; height: calc(var(--row-h) - 11px); border-radius: 3px; border: 1px solid rgba(0,0,0,.28); font-size: 11px; line-height: calc(var(--row-h) - 13px); padding: 0 4px; overflow: hidden; white-space: nowrap; color: #14202e; cursor: default; min-width: 2px; z-index: 2; }
.span:hover { filter: brightness(0.92); z-index: 6; }
.span.narrow, .fault-span.narrow { color: transparent; padding: 0; }
.span.fail { background-image: repeating-linear-gradient(135deg, rgba(214,39,40,.55) 0 3px, transparent 3px 7px) !important; border-color: #a31f1f; }
.span.info { opacity: .6; border-style: dashed; border-color: #333; }
.span.cited { outline: 2px dashed #e08a00; outline-offset: 1px; z-index: 4; }
.span.violation { outline: 2px solid var(--bad); outline-offset: 1px; box-shadow: 0 0 0 4px rgba(214,39,40,.28); z-index: 5; font-weight: 700; }
.op-acquire { background: #7aa6d8; } .op-release { background: #b9d4ee; } .op-segment { background: #c9a9dc; }
.op-barrier_attach { background: #b3e0ac; } .op-barrier { background: #63b36b; } .op-barrier_detach { background: #d3ead0; }
.op-clean { background: #f6ab62; } .op-other { background: #cfcfcf; }
.shade { position: absolute; top: 0; bottom: 0; background: repeating-linear-gradient(45deg, rgba(255,190,0,.22) 0 6px, rgba(255,190,0,.10) 6px 12px); border-left: 1px solid rgba(200,140,0,.6); border-right: 1px solid rgba(200,140,0,.6); z-index: 1; }
.fault-span { position: absolute; top: 5px; height: calc(var(--row-h) - 11px); background: rgba(255,180,0,.55); border: 1px solid #c08000; border-radius: 3px; font-size: 11px; line-height: calc(var(--row-h) - 13px); padding: 0 4px; white-space: nowrap; overflow: hidden; z-index: 3; }
.bolt { position: absolute; top: 0; bottom: 0; width: 0; border-left: 2px solid var(--bad); z-index: 4; }
.bolt::before { content: ""; position: absolute; top: 1px; left: -6px; border: 5px solid transparent; border-top: 7px solid var(--bad); }
.bolt.global { border-left-style: dashed; opacity: .7; }
.hit { position: absolute; top: 0; bottom: 0; width: 12px; margin-left: -6px; z-index: 4; cursor: default; }
.exit { position: absolute; bottom: 1px; width: 7px; height: 7px; margin-left: -4px; border-radius: 50%; background: #7f8792; z-index: 4; }
.exit.signal { background: var(--bad); border-radius: 0; transform: rotate(45deg); }
.exit.nonzero { background: #d08c00; }
#tip { position: fixed; z-index: 50; pointer-events: none; display: none; max-width: 520px; background: #1d2433; color: #f2f4f8; border-radius: 6px; padding: 8px 10px; font-size: 12px; box-shadow: 0 4px 16px rgba(0,0,0,.25); }
#tip .t { font-weight: 700; margin-bottom: 3px; }
#tip .k { color: #9aa5b8; }
#tip pre { margin: 3px 0 0; white-space: pre-wrap; word-break: break-word; font: 11px/1.35 ui-monospace, "DejaVu Sans Mono", monospace; color: #dfe6f0; }
#tip .v { color: #ff8a80; margin-top: 4px; }
#tip .c { color: #ffc870; margin-top: 4px; }
.empty { padding: 20px; color: var(--muted); }
</style>
</head>
<body>
<header>
  <h1 id="title">timeline</h1><span id="badge" class="badge"></span>
  <div class="facts" id="facts"></div>
  <div class="repro" id="repro" hidden></div>
  <div id="problems"></div>
</header>
<div class="toolbar">
  <span><button id="zout" title="zoom out">&minus;</button> <button id="zin" title="zoom in (or ctrl + wheel)">+</button> <button id="zfit">fit</button> <button id="zviol" hidden>first violation</button></span>
  <span class="legend" id="legend"></span>
</div>
<div class="chart" id="chart"><div class="labels" id="labels"></div><div class="scroll" id="scroll"><div class="canvas" id="canvas"></div></div></div>
<div id="tip"></div>
<script type="application/json" id="trace">)HTML";

constexpr const char* kTail = R"HTML(</script>
<script>
(function () {
  "use strict";
  const trace = JSON.parse(document.getElementById("trace").textContent);
  const other = trace.otherData || {};
  const events = trace.traceEvents || [];
  const $ = (id) => document.getElementById(id);
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
  const fmtMs = (us) => (us / 1000).toFixed(3) + " ms";
  const OPS = ["acquire", "segment", "barrier_attach", "barrier", "barrier_detach", "release", "clean"];

  // Header: what trial this is and why it failed.
  const title = (other.scenario || "trial") + " \u00b7 trial " + (other.trial ?? "?");
  document.title = "shmstress timeline: " + title;
  $("title").textContent = title;
  const verdict = other.verdict || "valid";
  $("badge").textContent = verdict;
  $("badge").className = "badge " + verdict;
  const facts = [["seed", other.seed], ["run seed", other.run_seed], ["duration", other.duration_ms != null ? other.duration_ms.toFixed(1) + " ms" : null],
                 ["violating ops", other.violating_ops], ["timed out", other.timed_out ? "yes" : null], ["harness error", other.harness_error],
                 ["trial dir", other.trial_dir]];
  $("facts").innerHTML = facts.filter((f) => f[1] !== undefined && f[1] !== null && f[1] !== "")
      .map((f) => esc(f[0]) + " <b>" + esc(f[1]) + "</b>").join(" &nbsp;\u00b7&nbsp; ");
  if (other.reproduce) { $("repro").hidden = false; $("repro").textContent = other.reproduce; }
  const problems = other.problems || {};
  let ph = "";
  for (const inv of Object.keys(problems)) {
    const p = problems[inv], lines = p.problems || [];
    ph += '<details class="problems" open><summary><span class="inv">' + esc(inv) + "</span> " + esc(p.verdict) + " (" + lines.length + " problem" + (lines.length === 1 ? "" : "s") + ")</summary><ul>" +
          lines.slice(0, 200).map((l) => "<li>" + esc(l) + "</li>").join("") + (lines.length > 200 ? "<li>\u2026 " + (lines.length - 200) + " more in verdict.json</li>" : "") + "</ul></details>";
  }
  $("problems").innerHTML = ph;
  $("legend").innerHTML = OPS.map((o) => '<span><i class="sw op-' + o + '"></i>' + o + "</span>").join("") +
      '<span><i class="sw op-other fail" style="background-image:repeating-linear-gradient(135deg,rgba(214,39,40,.55) 0 3px,transparent 3px 7px)"></i>failed</span>' +
      '<span><i class="sw op-other" style="opacity:.6;border-style:dashed"></i>outcome unknown</span>' +
      '<span><i class="sw op-other" style="outline:2px solid #d62728;outline-offset:1px"></i>violation</span>' +
      '<span><i class="sw op-other" style="outline:2px dashed #e08a00;outline-offset:1px"></i>cited by a problem</span>' +
      '<span><i class="sw" style="background:rgba(255,190,0,.35)"></i>fault window</span>' +
      '<span><i class="sw" style="width:2px;background:#d62728;border:0"></i>instant fault</span>';

  // Lanes: the faults track, then one per (job, rank) as the trace orders them.
  const names = {};
  for (const e of events) if (e.ph === "M" && e.name === "thread_name") names[e.tid] = e.args.name;
  const faultsTid = other.faults_tid;
  const lanes = (other.lanes || []).map((l) => ({tid: l.tid, name: names[l.tid] || "tid " + l.tid, involved: l.involved, violating: false}));
  const laneOf = {};
  lanes.forEach((l, i) => (laneOf[l.tid] = i));
  const ops = events.filter((e) => e.ph === "X" && e.cat === "op");
  for (const o of ops) if (o.args && o.args.violation && laneOf[o.tid] !== undefined) lanes[laneOf[o.tid]].violating = true;
  const faults = events.filter((e) => e.cat === "fault");
  const exits = events.filter((e) => e.cat === "exit");
  let end = (other.duration_ms || 0) * 1000;
  for (const e of events) if (e.ts !== undefined) end = Math.max(end, e.ts + (e.dur || 0));
  end = Math.max(end, 1);
  if (!lanes.length) { $("chart").innerHTML = '<div class="empty">No operations in this trial\'s history.</div>'; return; }

  const labels = $("labels"), canvas = $("canvas"), scroll = $("scroll"), tip = $("tip");
  const label = (cls, text, tipText) => { const d = document.createElement("div"); d.className = "label " + cls; d.textContent = text; d.title = tipText || text; labels.appendChild(d); };
  label("axis", "time since trial start");
  label("faults", "faults");
  for (const l of lanes) label(l.violating ? "violating" : l.involved ? "involved" : "", (l.violating ? "\u26a0 " : "") + l.name,
                               l.name + (l.violating ? " \u2014 ran a violating op" : l.involved ? " \u2014 named by a problem" : ""));

  const row = (cls) => { const d = document.createElement("div"); d.className = "row " + cls; canvas.appendChild(d); return d; };
  const axis = row("axis"), faultRow = row("faultrow"), laneRows = lanes.map(() => row("lane"));
  const placed = [];  // [element, ts, dur] re-laid on zoom
  const items = [];   // tooltip payloads
  const add = (parent, cls, ts, dur, text, info) => {
    const d = document.createElement("div");
    d.className = cls;
    if (text) d.textContent = text;
    if (info) { d.dataset.i = items.length; items.push(info); }
    parent.appendChild(d);
    placed.push([d, ts, dur]);
    return d;
  };
  const opInfo = (o) => ({title: o.name + " \u2014 " + (names[o.tid] || ""), ts: o.ts, dur: o.dur, args: o.args});
  for (const o of ops) {
    const r = laneRows[laneOf[o.tid]];
    if (!r) continue;
    const a = o.args || {};
    const cls = "span op-" + (OPS.includes(o.name) ? o.name : "other") + (a.outcome === "fail" ? " fail" : a.outcome === "info" ? " info" : "") + (a.violation ? " violation" : a.cited ? " cited" : "");
    let text = o.name;
    if (a.value && a.value.prefix !== undefined) text += " " + a.value.prefix;
    else if (a.args && a.args.round !== undefined) text += " " + a.args.round;
    add(r, cls, o.ts, o.dur, text, opInfo(o));
  }
  for (const f of faults) {
    const info = {title: "fault: " + f.name, ts: f.ts, dur: f.dur, args: f.args};
    const onTrack = f.tid === faultsTid;
    const target = onTrack ? faultRow : laneRows[laneOf[f.tid]];
    if (!target) continue;
    if (f.ph === "X") {
      if (onTrack) {
        add(target, "fault-span", f.ts, f.dur, f.name, info);
        if (f.args && f.args.target === "trial") laneRows.forEach((r) => add(r, "shade", f.ts, f.dur, "", info));
      } else {
        add(target, "shade", f.ts, f.dur, "", info);
      }
    } else {
      add(target, "bolt" + (onTrack ? "" : ""), f.ts, 0, "", null);
      add(target, "hit", f.ts, 0, "", info);
      if (onTrack && f.args && f.args.target === "trial") laneRows.forEach((r) => add(r, "bolt global", f.ts, 0, "", null));
    }
  }
  for (const x of exits) {
    const r = laneRows[laneOf[x.tid]];
    if (!r) continue;
    const a = x.args || {};
    add(r, "exit" + (a.signal > 0 ? " signal" : a.exit_code !== 0 ? " nonzero" : ""), x.ts, 0, "", {title: x.name + " \u2014 " + (names[x.tid] || ""), ts: x.ts, args: a});
  }

  // Zoom: pixels per microsecond; "fit" shows the whole trial.
  let scale = 1;
  const fit = () => Math.max(1e-6, (scroll.clientWidth - 24) / end);
  const nice = (x) => { const p = Math.pow(10, Math.floor(Math.log10(x))); const m = x / p; return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p; };
  function layout() {
    const width = Math.ceil(end * scale) + 24;
    canvas.style.width = width + "px";
    for (const [d, ts, dur] of placed) {
      d.style.left = ts * scale + "px";
      if (d.classList.contains("bolt") || d.classList.contains("hit") || d.classList.contains("exit")) continue;
      const w = Math.max(2, dur * scale);
      d.style.width = w + "px";
      if (d.classList.contains("span") || d.classList.contains("fault-span")) d.classList.toggle("narrow", w < 30);
    }
    canvas.querySelectorAll(".tick,.grid").forEach((n) => n.remove());
    const step = nice(90 / scale);  // a labelled tick every >= 90 px
    for (let t = 0; t <= end; t += step) {
      const tk = document.createElement("div");
      tk.className = "tick";
      tk.style.left = t * scale + "px";
      tk.textContent = step >= 1000 ? (t / 1000).toFixed(step >= 10000 ? 0 : 1) + " ms" : (t / 1000).toFixed(3) + " ms";
      axis.appendChild(tk);
      for (const r of [faultRow, ...laneRows]) { const g = document.createElement("div"); g.className = "grid"; g.style.left = t * scale + "px"; r.appendChild(g); }
    }
  }
  function zoom(factor, anchorX) {
    const x = anchorX ?? scroll.clientWidth / 2;
    const at = (scroll.scrollLeft + x) / scale;
    scale = Math.min(Math.max(scale * factor, fit()), 50);
    layout();
    scroll.scrollLeft = at * scale - x;
  }
  scale = fit();
  layout();
  $("zin").onclick = () => zoom(2);
  $("zout").onclick = () => zoom(0.5);
  $("zfit").onclick = () => { scale = fit(); layout(); scroll.scrollLeft = 0; };
  const firstViolation = ops.filter((o) => o.args && o.args.violation).sort((a, b) => a.ts - b.ts)[0];
  if (firstViolation) {
    $("zviol").hidden = false;
    $("zviol").onclick = () => {
      scale = Math.max(scale, Math.min(50, (scroll.clientWidth * 0.4) / Math.max(firstViolation.dur, 1)));
      layout();
      scroll.scrollLeft = firstViolation.ts * scale - scroll.clientWidth / 3;
    };
  }
  scroll.addEventListener("wheel", (e) => {
    if (!e.ctrlKey && !e.metaKey) return;
    e.preventDefault();
    zoom(e.deltaY < 0 ? 1.25 : 0.8, e.clientX - scroll.getBoundingClientRect().left);
  }, {passive: false});
  window.addEventListener("resize", () => { if (scale < fit()) { scale = fit(); layout(); } });

  // Tooltips.
  canvas.addEventListener("mousemove", (e) => {
    const el = e.target.closest("[data-i]");
    if (!el) { tip.style.display = "none"; return; }
    const it = items[+el.dataset.i], a = it.args || {};
    let h = '<div class="t">' + esc(it.title) + "</div>";
    h += '<div><span class="k">at</span> +' + esc(fmtMs(it.ts)) + (it.dur ? ' <span class="k">for</span> ' + esc(fmtMs(it.dur)) : "") + "</div>";
    for (const k of ["outcome", "id", "pid", "kind", "target", "exit_code", "signal", "crash_point"]) {
      if (a[k] !== undefined) h += '<div><span class="k">' + esc(k) + "</span> " + esc(a[k]) + "</div>";
    }
    for (const k of ["args", "value", "error", "detail"]) {
      if (a[k] !== undefined) h += '<div><span class="k">' + esc(k) + "</span><pre>" + esc(JSON.stringify(a[k], null, 1)) + "</pre></div>";
    }
    if (a.involved && !a.violation) h += '<div class="k">this worker is named by a problem</div>';
    if (a.cited) h += '<div class="c">cited as context by:</div>';
    for (const v of a.violations || []) h += '<div class="' + (a.violation ? "v" : "c") + '">\u26a0 ' + esc(v) + "</div>";
    tip.innerHTML = h;
    tip.style.display = "block";
    const w = tip.offsetWidth, hh = tip.offsetHeight;
    tip.style.left = Math.min(e.clientX + 14, window.innerWidth - w - 8) + "px";
    tip.style.top = (e.clientY + 16 + hh > window.innerHeight ? e.clientY - hh - 10 : e.clientY + 16) + "px";
  });
  canvas.addEventListener("mouseleave", () => (tip.style.display = "none"));
})();
</script>
</body>
</html>
)HTML";

// JSON that is safe inside a <script> element: every '<', '>' and '&' (which
// can only occur inside JSON strings) becomes a \u escape.
std::string script_json(const nlohmann::json& j) {
  std::string raw = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(raw.size() + 64);
  for (char c : raw) {
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string timeline_html(const nlohmann::json& trace) {
  return std::string(kHead) + script_json(trace) + kTail;
}

}  // namespace reports
