// report.html: one self-contained page for a whole run — the verdict, a
// scenario x invariant table, every violation with its reproduce command and a
// link to its trial's timeline, faults and reached states, and latency
// distributions drawn as inline SVG. No scripts, no network: it opens from a
// CI artifact as is.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "reports/reports.h"

namespace reports {
namespace {

using harness::Verdict;

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string fmt(double v, const char* f = "%.2f") {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

const char* css_class(Verdict v) {
  return v == Verdict::kInvalid ? "invalid" : v == Verdict::kUnknown ? "unknown" : "valid";
}

// A histogram of values (ms) on a log scale, as an SVG of bars with
// quantiles. From the run's sketch: exact up to QuantileSketch::kExact
// samples, then within its relative error.
std::string histogram_svg(const std::string& title, const harness::QuantileSketch& v) {
  if (v.count() == 0) return "<p class=muted>" + esc(title) + ": no samples</p>";
  const int kBins = 40;
  double lo = std::log10(std::max(1e-3, v.min())), hi = std::log10(std::max(1e-3, v.max())) + 1e-9;
  if (hi - lo < 1) hi = lo + 1;
  std::vector<std::uint64_t> bins(kBins, 0);
  v.for_each([&](double x, std::uint64_t n) {
    int b = static_cast<int>((std::log10(std::max(1e-3, x)) - lo) / (hi - lo) * kBins);
    bins[std::clamp(b, 0, kBins - 1)] += n;
  });
  std::uint64_t peak = *std::max_element(bins.begin(), bins.end());
  std::string s = "<figure><figcaption>" + esc(title) + " — " + std::to_string(v.count()) + " samples, p50 " +
                  fmt(v.quantile(0.5)) + " ms, p90 " + fmt(v.quantile(0.9)) + " ms, p99 " + fmt(v.quantile(0.99)) +
                  " ms, max " + fmt(v.max()) + " ms</figcaption><svg viewBox=\"0 0 420 120\" width=\"420\" height=\"120\">";
  for (int b = 0; b < kBins; ++b) {
    double h = peak ? 100.0 * static_cast<double>(bins[b]) / static_cast<double>(peak) : 0;
    s += "<rect x=\"" + fmt(10 + b * 10, "%.0f") + "\" y=\"" + fmt(105 - h, "%.1f") + "\" width=\"9\" height=\"" +
         fmt(h, "%.1f") + "\"><title>" + std::to_string(bins[b]) + "</title></rect>";
  }
  s += "<text x=\"10\" y=\"118\">" + fmt(std::pow(10, lo), "%.3g") + " ms</text><text x=\"410\" y=\"118\" "
       "text-anchor=\"end\">" + fmt(std::pow(10, hi), "%.3g") + " ms</text></svg></figure>";
  return s;
}

// A trial dir relative to the page's dir (report.html sits in out_dir), so
// links work from a CI artifact; empty if there is no such path.
std::string relative_dir(const std::string& dir, const std::string& out_dir) {
  namespace fs = std::filesystem;
  if (dir.empty() || out_dir.empty()) return "";
  if (dir.rfind(out_dir + "/", 0) == 0) return dir.substr(out_dir.size() + 1);
  const fs::path d(dir), o(out_dir);
  if (!d.is_absolute() || !o.is_absolute()) return "";
  return d.lexically_relative(o).string();
}

std::string links(const std::string& dir, const std::string& out_dir) {
  const std::string rel = relative_dir(dir, out_dir);
  if (rel.empty()) return "";
  return " · <a href=\"" + esc(rel) + "/timeline.html\">timeline</a> · <a href=\"" + esc(rel) + "/\">trial dir</a>";
}

// Triage: one row per bucket, new ones first; the baseline's entries that did not recur.
std::string buckets_html(const harness::RunResult& r) {
  const auto& bt = r.tally.buckets();
  const auto buckets = buckets_in_order(r);
  std::string h = "<h2>Buckets</h2>";
  if (buckets.empty() && !bt.baseline()) return h + "<p class=muted>no violations</p>";
  h += "<p>" + std::to_string(bt.count(false)) + " new, " + std::to_string(bt.count(true)) +
       " known" + (bt.baseline() ? " (baseline " + esc(bt.baseline()->file) + ")" : " (no baseline: every bucket is new)") +
       ". A bucket is every violation with the same fingerprint: invariant, scenario and the shape of the problem "
       "(pids, times, paths and numbers stripped).</p>";
  if (!buckets.empty()) {
    h += "<table><tr><th>status</th><th class=s>fingerprint</th><th>trials</th><th>first..last</th><th class=s>example</th></tr>";
    std::size_t shown = 0;
    for (const auto* b : buckets) {
      if (shown++ >= 200) break;
      h += std::string("<tr><td class=\"") + (b->known ? "unknown" : "invalid") + "\">" + (b->known ? "known" : "new") +
           "</td><td class=s><code>" + esc(b->fingerprint) + "</code></td><td>" + std::to_string(b->trials) +
           "</td><td>" + std::to_string(b->first_trial) + ".." + std::to_string(b->last_trial) + "</td><td class=s>" +
           esc(b->example_problem) + "<br>trial " + std::to_string(b->example_trial) + links(b->example_dir, r.out_dir) +
           "<br><code>" + esc(b->reproduce) + "</code>";
      if (b->known) h += "<br>known: " + esc(b->known_reason);
      if (!b->shrunk.empty()) h += "<br>shrunk: <code>" + esc(b->shrunk) + "</code>";
      h += "</td></tr>";
    }
    h += "</table>";
    if (buckets.size() > 200) h += "<p>(" + std::to_string(buckets.size() - 200) + " more in summary.json)</p>";
  }
  if (bt.overflow() > 0)
    h += "<p>" + std::to_string(bt.overflow()) + " violations past the cap of " +
         std::to_string(harness::BucketTally::kMaxBuckets) + " buckets: counted, not bucketed.</p>";
  if (bt.baseline()) {
    const auto gone = r.known_not_recurred();
    if (!gone.empty()) {
      h += "<p>Known, did not recur:</p><ul>";
      for (const auto* k : gone) h += "<li><code>" + esc(k->fingerprint) + "</code>: " + esc(k->reason) + "</li>";
      h += "</ul>";
    }
    for (const auto& k : bt.baseline()->expired)
      h += "<p class=unknown>baseline entry expired " + harness::day_text(*k.expires) + ", counts as new again: <code>" +
           esc(k.fingerprint) + "</code> (" + esc(k.reason) + ")</p>";
  }
  return h;
}

}  // namespace

std::string report_html(const harness::RunResult& r) {
  const auto table = scenario_table(r);
  const auto faults = r.tally.faults(), reached = r.tally.reached();
  std::set<std::string> invariants;
  for (const auto& [s, row] : table) {
    for (const auto& [inv, cell] : row.invariants) invariants.insert(inv);
  }
  const Verdict v = r.verdict();
  std::string h =
      "<!doctype html><html><head><meta charset=\"utf-8\"><title>shmstress run " + esc(r.run_id) +
      "</title><style>"
      "body{font:14px system-ui,sans-serif;margin:24px;color:#222}h1{font-size:20px}h2{font-size:16px;margin-top:28px}"
      "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:center}"
      "th.s,td.s{text-align:left}.valid{background:#dff3e0}.unknown{background:#fff2c6}.invalid{background:#f8d2d2}"
      ".badge{display:inline-block;padding:2px 10px;border-radius:10px;font-weight:600}code{font-size:12px;"
      "background:#f4f4f4;padding:2px 4px}li{margin:6px 0}.muted{color:#888}svg rect{fill:#4a78c2}"
      "svg text{font-size:10px;fill:#555}figure{margin:8px 0 16px}</style></head><body>";
  h += "<h1>shmstress run " + esc(r.run_id) + " <span class=\"badge " + css_class(v) + "\">" +
       harness::verdict_name(v) + "</span></h1>";
  h += "<p>" + std::to_string(r.tally.trials()) + " trials in " + fmt(r.elapsed, "%.1f") + " s · seed " +
       std::to_string(r.seed) + " · subject " + esc(r.subject) + " · shard " + std::to_string(r.shard_index) + "/" +
       std::to_string(r.shard_count) + " · exit code " + std::to_string(r.exit_code()) +
       (r.interrupted ? " · interrupted" : "") + "</p>";
  h += "<h2>Scenarios and invariants</h2><div style=\"overflow-x:auto\"><table><tr><th class=s>scenario</th><th>trials</th>";
  for (const auto& inv : invariants) h += "<th>" + esc(inv) + "</th>";
  h += "</tr>";
  for (const auto& [s, row] : table) {
    h += "<tr><td class=s>" + esc(s) + "</td><td>" + std::to_string(row.trials) + "</td>";
    for (const auto& inv : invariants) {
      auto it = row.invariants.find(inv);
      if (it == row.invariants.end()) {
        h += "<td class=muted>–</td>";
      } else {
        const bool excused = !it->second.excused.empty();
        h += std::string("<td class=\"") + (excused ? "muted" : css_class(it->second.worst)) + "\"" +
             (excused ? " title=\"" + esc(it->second.excused) + "\"" : std::string()) + ">" + cell_label(it->second) +
             (it->second.failing ? " (" + std::to_string(it->second.failing) + ")" : "") + "</td>";
      }
    }
    h += "</tr>";
  }
  h += "</table></div>";
  {
    std::string notes;
    for (const auto& [name, st] : r.tally.scenarios()) {
      for (const auto& [inv, cell] : st.invariants) {
        if (!cell.excused.empty()) {
          notes += "<li>excused: <b>" + esc(inv) + "</b> in " + esc(name) + " (" + harness::verdict_name(cell.worst) +
                   " in " + std::to_string(cell.not_valid()) + " trials, not counted): " + esc(cell.excused) + "</li>";
        }
      }
      if (st.history_error_trials > 0) {
        notes += "<li class=unknown>history errors in " + std::to_string(st.history_error_trials) + " of " +
                 std::to_string(st.trials) + " trials of " + esc(name) + " (each at best unknown), first: " +
                 esc(st.first_history_error) + "</li>";
      }
      if (!st.expected.empty()) {
        notes += std::string("<li class=") + (st.expectation_met() ? "valid" : "unknown") + ">expectation " + esc(name) +
                 ": " + esc(expectation_line(st)) + "</li>";
      }
    }
    if (!notes.empty()) h += "<h2>Excuses, history errors, expectations</h2><ul>" + notes + "</ul>";
  }
  h += buckets_html(r);
  h += "<h2>Violations and inconclusive trials</h2>";
  // The first 200 (trial, invariant) lines of the listed failing trials; the
  // rest, and those past the --max-kept cap, are counted.
  std::uint64_t shown = 0;
  std::string items;
  for (const auto& t : r.listed) {
    for (const auto& c : t.checks) {
      if (c.verdict == Verdict::kValid || !c.excused.empty() || shown >= 200) continue;
      ++shown;
      const std::string link = t.kept ? links(t.dir, r.out_dir) : "";
      items += std::string("<li><span class=\"badge ") + css_class(c.verdict) + "\">" + harness::verdict_name(c.verdict) +
               "</span> <b>" + esc(c.invariant) + "</b> in " + esc(t.scenario) + " trial " + std::to_string(t.trial) +
               link + "<br>";
      for (std::size_t i = 0; i < c.problems.size() && i < 3; ++i) items += esc(c.problems[i]) + "<br>";
      items += "<code>" + esc(t.reproduce) + "</code></li>";
    }
  }
  const std::uint64_t lines = r.tally.not_valid_checks();
  h += lines ? "<ul>" + items + "</ul>" + (lines > shown ? "<p>(" + std::to_string(lines - shown) + " more in summary.json)</p>" : "")
             : "<p class=muted>none</p>";
  h += "<h2>Faults injected</h2><table><tr><th class=s>kind</th><th>count</th></tr>";
  for (const auto& [k, n] : faults) h += "<tr><td class=s>" + esc(k) + "</td><td>" + std::to_string(n) + "</td></tr>";
  h += "</table><h2>Reached states</h2><table><tr><th class=s>state</th><th>trials</th></tr>";
  for (const auto& [k, n] : reached) h += "<tr><td class=s>" + esc(k) + "</td><td>" + std::to_string(n) + "</td></tr>";
  h += "</table>";
  for (const auto& m : r.missing_reached()) h += "<p class=unknown>never reached: " + esc(m) + "</p>";
  h += "<h2>Latency</h2>" + histogram_svg("acquire", r.tally.acquire_ms()) +
       histogram_svg("barrier round", r.tally.barrier_ms()) +
       histogram_svg("recovery (fault end to the next completed round)", r.tally.recovery_ms());
  h += "</body></html>\n";
  return h;
}

std::optional<harness::OutputError> write_report_html(const harness::RunResult& r, const std::string& path) {
  return harness::write_output(path, report_html(r), harness::OutputOrigin::kDerived);
}

}  // namespace reports
