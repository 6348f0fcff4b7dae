// report.html: one self-contained page for a whole run, in the order a person
// reads it (docs/reports.md, "report.html"):
//
//   1. verdict   the run's verdict and exit code, and why: violations, new and
//                known buckets, inconclusive checks, states never reached;
//   2. violations  the buckets, new ones first, each with an example and the
//                commands to reproduce, replay and shrink it; every violating
//                and inconclusive trial (folded when long); excuses, history
//                errors, expectations;
//   3. coverage  a heat map, one row per scenario: its expected states (how
//                many of its trials reached each) and its faults per kind;
//   4. latency   acquire, barrier round and recovery histograms, side by side;
//   5. invariants  the scenario x invariant matrix cut down to the pairs that
//                were not valid (none: one sentence, no table of "valid").
//
// Nothing on it is wider than a 1280 px window: long names and commands wrap,
// column headings of the heat maps stand upright. No scripts, no network: it
// opens from a CI artifact as is. Every text that comes from the run, its
// scenarios or its subject is escaped.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

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
      case '\'': o += "&#39;"; break;
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

std::string num(std::uint64_t v) { return std::to_string(v); }

// "1 trial", "3 trials".
std::string count_of(std::uint64_t n, const char* one, const char* many) {
  return num(n) + " " + (n == 1 ? one : many);
}

const char* css_class(Verdict v) {
  return v == Verdict::kInvalid ? "invalid" : v == Verdict::kUnknown ? "unknown" : "valid";
}

// A word for a POSIX shell, quoted as harness/run.cc quotes reproduce commands.
std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_of(" \t\n'\"$\\`;&|<>()*?[]#~{}!") == std::string::npos) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The binary as a reproduce command spells it: its first shell word, quotes
// and all ("build/shmstress", "'/opt/my tools/shmstress'"), so the replay and
// shrink commands run the same binary from the same place.
std::string invocation(const std::string& reproduce) {
  std::size_t i = 0;
  bool quoted = false;
  for (; i < reproduce.size(); ++i) {
    const char c = reproduce[i];
    if (c == '\'') quoted = !quoted;
    else if (!quoted && c == '\\') ++i;
    else if (!quoted && (c == ' ' || c == '\t')) break;
  }
  std::string w = reproduce.substr(0, std::min(i, reproduce.size()));
  return w.empty() ? "shmstress" : w;
}

// A latency for a caption, to three significant digits or more ("0.0712 ms",
// "12.8 ms", "1055 ms"); summary.json has the exact values.
std::string ms(double v) {
  return fmt(v, v >= 100 ? "%.0f ms" : v >= 10 ? "%.1f ms" : v >= 1 ? "%.2f ms" : "%.3g ms");
}

// A histogram of values (ms) on a log scale, as an SVG of bars with
// quantiles. From the run's sketch: exact up to QuantileSketch::kExact
// samples, then within its relative error.
std::string histogram_svg(const std::string& title, const harness::QuantileSketch& v) {
  if (v.count() == 0) return "<figure><figcaption><b>" + esc(title) + "</b>: no samples</figcaption></figure>";
  const int kBins = 40;
  double lo = std::log10(std::max(1e-3, v.min())), hi = std::log10(std::max(1e-3, v.max())) + 1e-9;
  if (hi - lo < 1) hi = lo + 1;
  std::vector<std::uint64_t> bins(kBins, 0);
  v.for_each([&](double x, std::uint64_t n) {
    int b = static_cast<int>((std::log10(std::max(1e-3, x)) - lo) / (hi - lo) * kBins);
    bins[std::clamp(b, 0, kBins - 1)] += n;
  });
  std::uint64_t peak = *std::max_element(bins.begin(), bins.end());
  std::string s = "<figure><figcaption><b>" + esc(title) + "</b> — " + std::to_string(v.count()) + " samples<br>p50 " +
                  ms(v.quantile(0.5)) + " · p90 " + ms(v.quantile(0.9)) + " · p99 " + ms(v.quantile(0.99)) +
                  " · max " + ms(v.max()) + "</figcaption><svg viewBox=\"0 0 420 120\" width=\"380\" height=\"109\">";
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

// --- what the page counts -------------------------------------------------------

// An expected state of a scenario ("a|b": either will do) and how many of
// its trials reached it (for "a|b", the better of the two: a lower bound).
struct ExpectedState {
  std::string state;
  std::uint64_t trials = 0;  // trials of the scenario that reached it
  bool reached = false;
};

std::vector<ExpectedState> expected_states(const harness::RunResult& r, const std::string& scenario) {
  std::vector<ExpectedState> out;
  auto e = r.expect_reached.find(scenario);
  if (e == r.expect_reached.end()) return out;
  auto it = r.tally.scenarios().find(scenario);
  for (const auto& s : e->second) {
    ExpectedState x{s};
    for (std::size_t at = 0; it != r.tally.scenarios().end();) {
      const std::size_t bar = s.find('|', at);
      auto n = it->second.reached.find(s.substr(at, bar == std::string::npos ? std::string::npos : bar - at));
      if (n != it->second.reached.end() && n->second > 0) {
        x.reached = true;
        x.trials = std::max(x.trials, n->second);
      }
      if (bar == std::string::npos) break;
      at = bar + 1;
    }
    out.push_back(std::move(x));
  }
  return out;
}

struct Counts {
  std::uint64_t scenarios = 0, violating = 0, unknown_checks = 0, unavailable = 0, history_error_trials = 0;
  std::uint64_t expected = 0, expected_reached = 0, faults = 0;
  std::set<std::string> invariants;
};

Counts counts(const harness::RunResult& r) {
  Counts c;
  std::set<std::string> scenarios;
  for (const auto& [name, st] : r.tally.scenarios()) {
    scenarios.insert(name);
    c.violating += st.violating;
    c.unavailable += st.unavailable;
    c.history_error_trials += st.history_error_trials;
    for (const auto& [inv, cell] : st.invariants) {
      c.invariants.insert(inv);
      if (cell.excused.empty()) c.unknown_checks += cell.unknown;
    }
    for (const auto& [k, n] : st.faults) c.faults += n;
  }
  for (const auto& [name, states] : r.expect_reached) {
    scenarios.insert(name);
    for (const auto& s : expected_states(r, name)) {
      ++c.expected;
      if (s.reached) ++c.expected_reached;
    }
  }
  c.scenarios = scenarios.size();
  return c;
}

// --- 1. verdict ------------------------------------------------------------------

std::string tile(const std::string& value, const std::string& label, const char* cls) {
  return std::string("<div class=\"tile ") + cls + "\"><b>" + value + "</b><span>" + label + "</span></div>";
}

const char* exit_meaning(int code) {
  switch (code) {
    case 0: return "passed";
    case 1: return "new violations";
    case 3: return "the harness failed";
    case 4: return "inconclusive";
    default: return "exit code";
  }
}

std::string verdict_html(const harness::RunResult& r, const Counts& c) {
  const Verdict v = r.verdict();
  const auto& bt = r.tally.buckets();
  const std::size_t new_b = bt.count(false), known_b = bt.count(true);
  std::string h = "<header id=\"verdict\"><h1>shmstress run " + esc(r.run_id) + " <span class=\"badge " + css_class(v) +
                  "\">" + harness::verdict_name(v) + "</span></h1>";
  h += "<p class=meta>" + num(r.tally.trials()) + " trials in " + fmt(r.elapsed, "%.1f") + " s · seed " +
       num(r.seed) + " · subject " + esc(r.subject) + " · shard " + std::to_string(r.shard_index) + "/" +
       std::to_string(r.shard_count) + " · exit code " + std::to_string(r.exit_code()) +
       (r.interrupted ? " · interrupted" : "") + "</p>";

  const int code = r.exit_code();
  h += "<div class=tiles>";
  h += tile("exit " + std::to_string(code), exit_meaning(code),
            code == 0 ? "valid" : code == 4 ? "unknown" : "invalid");
  h += tile(num(r.tally.trials()), "trials, " + count_of(c.scenarios, "scenario", "scenarios"), "plain");
  h += tile(num(c.violating), "violating trials", c.violating ? "invalid" : "valid");
  h += tile(num(new_b) + " / " + num(known_b), "new / known buckets", new_b ? "invalid" : known_b ? "unknown" : "valid");
  h += tile(num(c.unknown_checks), "inconclusive checks", c.unknown_checks ? "unknown" : "valid");
  if (r.harness_failed()) h += tile(num(r.tally.harness_errors()), "harness errors", "invalid");
  if (c.expected > 0)
    h += tile(num(c.expected_reached) + " / " + num(c.expected), "expected states reached",
              c.expected_reached < c.expected ? "unknown" : "valid");
  h += tile(num(c.faults), "faults injected", "plain");
  h += "</div>";

  // Why the exit code is what it is, most serious first.
  std::string why;
  if (c.violating > 0) {
    why += "<li class=invalid>" + count_of(c.violating, "trial", "trials") + " of " + num(r.tally.trials()) +
           " violated an invariant: " + count_of(new_b, "new bucket", "new buckets") + ", " +
           count_of(known_b, "known bucket", "known buckets") +
           (new_b == 0 && known_b > 0 ? " (only known failures: they do not fail the run)" : "") +
           (bt.overflow() > 0 ? ", " + num(bt.overflow()) + " violations past the bucket cap" : "") + "</li>";
  }
  if (r.harness_failed()) {
    std::string first;
    for (const auto& [name, st] : r.tally.scenarios())
      if (first.empty() && !st.first_harness_error.empty()) first = name + ": " + st.first_harness_error;
    why += "<li class=invalid>the harness failed in " + count_of(r.tally.harness_errors(), "trial", "trials") +
           (first.empty() ? "" : "; first: " + esc(first)) + "</li>";
  }
  if (c.unavailable > 0)
    why += "<li class=unknown>the subject could not run " + count_of(c.unavailable, "trial", "trials") + "</li>";
  if (c.unknown_checks > 0)
    why += "<li class=unknown>" + count_of(c.unknown_checks, "check was", "checks were") +
           " inconclusive (unknown)" +
           (c.history_error_trials ? ", " + count_of(c.history_error_trials, "trial", "trials") + " with history errors"
                                   : std::string()) +
           "</li>";
  const auto missing = r.missing_reached();
  if (!missing.empty()) {
    why += "<li class=unknown>" + count_of(missing.size(), "expected state", "expected states") + " never reached: ";
    for (std::size_t i = 0; i < missing.size() && i < 10; ++i) why += (i ? ", " : "") + std::string("<b>") + esc(missing[i]) + "</b>";
    if (missing.size() > 10) why += " and " + num(missing.size() - 10) + " more (see coverage)";
    why += "</li>";
  }
  if (r.interrupted) why += "<li class=unknown>interrupted before the end</li>";
  if (why.empty()) {
    why = "<li class=valid>every invariant held in all " + count_of(r.tally.trials(), "trial", "trials") + " of " +
          count_of(c.scenarios, "scenario", "scenarios") +
          (c.expected ? ", and every expected state was reached" : "") + "</li>";
  }
  h += "<ul class=why>" + why + "</ul>";
  h += "<nav><a href=\"#violations\">violations</a> · <a href=\"#coverage\">coverage</a> · <a href=\"#latency\">latency</a>"
       " · <a href=\"#invariants\">invariants</a></nav></header>";
  return h;
}

// --- 2. violations ---------------------------------------------------------------

// A fingerprint ("inv/scenario/hash"), escaped, that may wrap after its slashes.
std::string breakable(const std::string& s) {
  std::string o;
  for (char c : s) o += c == '/' ? std::string("/<wbr>") : esc(std::string(1, c));
  return o;
}

std::string command_row(const char* what, const std::string& cmd) {
  return std::string("<div class=cmd><span>") + what + "</span><code>" + esc(cmd) + "</code></div>";
}

// One row per bucket, new ones first, each with what to run next; the
// baseline's entries that did not recur.
std::string buckets_html(const harness::RunResult& r) {
  const auto& bt = r.tally.buckets();
  const auto buckets = buckets_in_order(r);
  std::string h;
  if (buckets.empty() && !bt.baseline()) return h;
  h += "<p>Buckets: <b>" + num(bt.count(false)) + " new</b>, " + num(bt.count(true)) + " known" +
       (bt.baseline() ? " (baseline " + esc(bt.baseline()->file) + ")" : " (no baseline: every bucket is new)") +
       ". A bucket is every violation with the same fingerprint: invariant, scenario and the shape of the problem "
       "(pids, times, paths and numbers stripped). Run the commands from where the run was started.</p>";
  if (!buckets.empty()) {
    // The first kOpen in view, the rest (to 200) folded, so the coverage
    // heat map stays near the top however many buckets there are.
    constexpr std::size_t kOpen = 10, kListed = 200;
    const std::string head = "<table class=buckets><tr><th>status</th><th class=s>bucket</th><th>trials</th><th class=s>"
                             "example, and what to run next</th></tr>";
    h += head;
    std::size_t shown = 0;
    for (const auto* b : buckets) {
      if (shown == kListed) break;
      if (shown++ == kOpen)
        h += "</table><details><summary>" + num(std::min(buckets.size(), kListed) - kOpen) + " more buckets</summary>" + head;
      const std::string inv = invocation(b->reproduce);
      h += std::string("<tr><td class=\"") + (b->known ? "unknown" : "invalid") + "\">" + (b->known ? "known" : "<b>new</b>") +
           "</td><td class=\"s name\"><b>" + esc(b->invariant) + "</b><br>in " + esc(b->scenario) + "<br><code class=fp>" +
           breakable(b->fingerprint) + "</code></td><td>" + num(b->trials) + "<br><span class=muted>trials " +
           std::to_string(b->first_trial) + ".." + std::to_string(b->last_trial) + "</span></td><td class=s>" +
           "<div class=problem>" + esc(b->example_problem) + "</div>trial " + std::to_string(b->example_trial) +
           links(b->example_dir, r.out_dir);
      if (b->known) {
        h += "<div>known: " + esc(b->known_reason) +
             (b->known_expires ? " (until " + harness::day_text(*b->known_expires) + ")" : std::string()) + "</div>";
      }
      if (!b->reproduce.empty()) h += command_row("reproduce", b->reproduce);
      if (!b->example_dir.empty()) {
        h += command_row("replay", inv + " replay " + shell_quote(b->example_dir) + " --times 10");
        if (b->shrunk.empty()) h += command_row("shrink", inv + " shrink " + shell_quote(b->example_dir));
      }
      if (!b->shrunk.empty()) h += command_row("shrunk", b->shrunk);
      h += "</td></tr>";
    }
    h += shown > kOpen ? "</table></details>" : "</table>";
    if (buckets.size() > kListed) h += "<p>(" + num(buckets.size() - kListed) + " more buckets in summary.json)</p>";
  }
  if (bt.overflow() > 0)
    h += "<p>" + num(bt.overflow()) + " violations past the cap of " + num(harness::BucketTally::kMaxBuckets) +
         " buckets: counted, not bucketed.</p>";
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

// Every (trial, invariant) that was not valid, the first 200; folded unless
// short or the buckets do not cover them (inconclusive trials have none).
std::string trials_html(const harness::RunResult& r) {
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
      for (std::size_t i = 0; i < c.problems.size() && i < 3; ++i) items += "<div class=problem>" + esc(c.problems[i]) + "</div>";
      items += "<code>" + esc(t.reproduce) + "</code></li>";
    }
  }
  const std::uint64_t lines = r.tally.not_valid_checks();
  if (lines == 0) return "";
  const bool open = shown <= 8 || r.tally.buckets().buckets().empty();
  std::string h = std::string("<details") + (open ? " open" : "") + "><summary>Every violating and inconclusive trial (" +
                  count_of(lines, "line", "lines") + ", one per trial and invariant)</summary><ul class=trials>" +
                  items + "</ul>";
  if (lines > shown) h += "<p>(" + num(lines - shown) + " more in summary.json)</p>";
  return h + "</details>";
}

std::string notes_html(const harness::RunResult& r) {
  std::string notes;
  for (const auto& [name, st] : r.tally.scenarios()) {
    for (const auto& [inv, cell] : st.invariants) {
      if (!cell.excused.empty()) {
        notes += "<li>excused: <b>" + esc(inv) + "</b> in " + esc(name) + " (" + harness::verdict_name(cell.worst) +
                 " in " + num(cell.not_valid()) + " trials, not counted): " + esc(cell.excused) + "</li>";
      }
    }
    if (st.history_error_trials > 0) {
      notes += "<li class=unknown>history errors in " + num(st.history_error_trials) + " of " + num(st.trials) +
               " trials of " + esc(name) + " (each at best unknown), first: " + esc(st.first_history_error) + "</li>";
    }
    if (!st.expected.empty()) {
      notes += std::string("<li class=") + (st.expectation_met() ? "valid" : "unknown") + ">expectation " + esc(name) +
               ": " + esc(expectation_line(st)) + "</li>";
    }
  }
  return notes.empty() ? "" : "<h3>Excuses, history errors, expectations</h3><ul class=notes>" + notes + "</ul>";
}

std::string violations_html(const harness::RunResult& r, const Counts& c) {
  std::string h = "<section id=\"violations\"><h2>Violations</h2>";
  const std::string buckets = buckets_html(r), trials = trials_html(r);
  if (buckets.empty() && trials.empty())
    h += "<p class=muted>none: no trial violated an invariant" +
         std::string(c.unknown_checks ? "" : " and no check was inconclusive") + "</p>";
  h += buckets + trials + notes_html(r);
  return h + "</section>";
}

// --- 3. coverage -----------------------------------------------------------------

// Heat of a share of trials (0..1): 0 is its own colour (never reached).
const char* share_class(double share) {
  if (share <= 0) return "r0";
  if (share < 0.25) return "r1";
  if (share < 0.5) return "r2";
  if (share < 0.75) return "r3";
  return "r4";
}

// Heat of faults per trial.
const char* rate_class(double per_trial) {
  if (per_trial <= 0) return "f0";
  if (per_trial < 0.5) return "f1";
  if (per_trial < 1) return "f2";
  if (per_trial < 2) return "f3";
  if (per_trial < 4) return "f4";
  return "f5";
}

std::string coverage_html(const harness::RunResult& r, const Counts& c) {
  std::string h = "<section id=\"coverage\"><h2>Coverage</h2>";
  const auto faults = r.tally.faults();
  std::set<std::string> scenarios;
  for (const auto& [name, st] : r.tally.scenarios()) scenarios.insert(name);
  for (const auto& [name, states] : r.expect_reached) scenarios.insert(name);
  if (scenarios.empty()) return h + "<p class=muted>no trials</p></section>";
  // `report DIR` re-checks stored trials only and records no expectations: no column then.
  const bool expects = !r.expect_reached.empty();
  h += std::string("<p class=legend>Per scenario: ") +
       (expects ? "each state it expects to reach (<code>expect_reached</code>) as a square, by the share of its "
                  "trials that reached it <span class=\"sq r1\"></span><span class=\"sq r2\"></span>"
                  "<span class=\"sq r3\"></span><span class=\"sq r4\"></span> (under ¼ … ¾ and more), "
                  "<span class=\"sq r0\"></span> never; then "
                : "(no expected states, <code>expect_reached</code>, recorded for this run) ") +
       "the faults injected per kind, shaded by faults per trial "
       "<span class=\"sq f1\"></span><span class=\"sq f2\"></span><span class=\"sq f3\"></span>"
       "<span class=\"sq f4\"></span><span class=\"sq f5\"></span> (under ½, 1, 2, 4, and more). "
       "Hover a square or a cell for its numbers.</p>";
  h += "<table class=heat><thead><tr><th class=s>scenario</th><th>trials</th>";
  if (expects) h += "<th class=s>expected states reached</th>";
  for (const auto& [k, n] : faults) h += "<th class=v><span>" + esc(k) + "</span></th>";
  h += "</tr></thead><tbody><tr class=total><td class=s>all scenarios</td><td>" + num(r.tally.trials()) + "</td>";
  if (expects) h += "<td class=s>" + num(c.expected_reached) + " of " + num(c.expected) + "</td>";
  for (const auto& [k, n] : faults) {
    const double rate = r.tally.trials() ? static_cast<double>(n) / static_cast<double>(r.tally.trials()) : 0;
    h += std::string("<td class=\"h ") + rate_class(rate) + "\" title=\"" + esc(k) + ": " + num(n) + " in " +
         num(r.tally.trials()) + " trials\">" + num(n) + "</td>";
  }
  h += "</tr>";
  for (const auto& name : scenarios) {
    auto it = r.tally.scenarios().find(name);
    const std::uint64_t trials = it == r.tally.scenarios().end() ? 0 : it->second.trials;
    h += "<tr><td class=\"s name\">" + esc(name) + "</td><td>" + num(trials) + "</td>";
    const auto states = expected_states(r, name);
    if (expects && states.empty()) {
      h += "<td class=s><span class=muted>none named</span></td>";
    } else if (expects) {
      h += "<td class=s>";
      std::size_t reached = 0;
      std::string missing;
      for (const auto& s : states) {
        const double share = trials ? static_cast<double>(s.trials) / static_cast<double>(trials) : 0;
        h += std::string("<span class=\"sq ") + (s.reached ? share_class(std::max(share, 1e-9)) : "r0") + "\" title=\"" +
             esc(s.state) + ": reached in " + num(s.trials) + " of " + num(trials) + " trials\"></span>";
        if (s.reached) ++reached;
        else missing += (missing.empty() ? "" : ", ") + esc(s.state);
      }
      h += " " + num(reached) + "/" + num(states.size());
      if (!missing.empty()) h += " <span class=miss>never: " + missing + "</span>";
      h += "</td>";
    }
    for (const auto& [k, total] : faults) {
      std::uint64_t n = 0;
      if (it != r.tally.scenarios().end()) {
        auto f = it->second.faults.find(k);
        if (f != it->second.faults.end()) n = f->second;
      }
      if (n == 0) {
        h += "<td class=\"h f0\"></td>";
        continue;
      }
      const double rate = trials ? static_cast<double>(n) / static_cast<double>(trials) : 0;
      h += std::string("<td class=\"h ") + rate_class(rate) + "\" title=\"" + esc(name) + ", " + esc(k) + ": " + num(n) +
           " in " + num(trials) + " trials (" + fmt(rate, "%.1f") + " per trial)\">" + num(n) + "</td>";
    }
    h += "</tr>";
  }
  h += "</tbody></table>";
  if (faults.empty()) h += "<p class=muted>no faults injected</p>";
  const auto reached = r.tally.reached();
  if (!reached.empty()) {
    h += "<details><summary>Every state reached (" + num(reached.size()) +
         "), with the trials that reached it</summary><ul class=states>";
    for (const auto& [k, n] : reached) h += "<li>" + esc(k) + " <span class=muted>" + num(n) + "</span></li>";
    h += "</ul></details>";
  }
  return h + "</section>";
}

// --- 4. latency ------------------------------------------------------------------

std::string latency_html(const harness::RunResult& r) {
  return "<section id=\"latency\"><h2>Latency</h2><p class=legend>Of the ops that succeeded, on a log scale; recovery "
         "is from a fault's end to the next completed barrier round.</p><div class=lat>" + histogram_svg("acquire", r.tally.acquire_ms()) +
         histogram_svg("barrier round", r.tally.barrier_ms()) +
         histogram_svg("recovery", r.tally.recovery_ms()) + "</div></section>";
}

// --- 5. invariants ---------------------------------------------------------------

// The scenario x invariant matrix, cut down to the rows and columns that hold
// a pair that was not valid; the pairs that held are left blank, and a run in
// which every pair held gets one sentence instead of a table of "valid".
std::string invariants_html(const harness::RunResult& r, const Counts& c) {
  const auto table = scenario_table(r);
  std::set<std::string> rows, cols;
  for (const auto& [s, row] : table) {
    for (const auto& [inv, cell] : row.invariants) {
      if (cell.failing > 0 || cell.worst != Verdict::kValid) {
        rows.insert(s);
        cols.insert(inv);
      }
    }
  }
  std::string h = "<section id=\"invariants\"><h2>Invariants</h2>";
  if (rows.empty()) {
    return h + "<p>Every invariant held in every scenario: " + count_of(c.invariants.size(), "invariant", "invariants") +
           " checked in " + count_of(table.size(), "scenario", "scenarios") + ", " +
           count_of(r.tally.trials(), "trial", "trials") + ". Per scenario and invariant in summary.json.</p></section>";
  }
  h += "<p>The pairs that were not valid: trials that failed the invariant, of the scenario's trials. " +
       count_of(rows.size(), "scenario", "scenarios") + " of " + num(table.size()) + " and " +
       count_of(cols.size(), "invariant", "invariants") + " of " + num(c.invariants.size()) +
       " are shown; every other pair held (blank: held).</p>";
  h += "<table class=matrix><thead><tr><th class=s>scenario</th><th>trials</th>";
  for (const auto& inv : cols) h += "<th class=v><span>" + esc(inv) + "</span></th>";
  h += "</tr></thead><tbody>";
  for (const auto& s : rows) {
    const ScenarioRow& row = table.at(s);
    h += "<tr><td class=\"s name\">" + esc(s) + "</td><td>" + num(row.trials) + "</td>";
    for (const auto& inv : cols) {
      auto it = row.invariants.find(inv);
      if (it == row.invariants.end()) {
        h += "<td class=\"m na\" title=\"not checked\">–</td>";
        continue;
      }
      const InvariantCell& cell = it->second;
      if (cell.failing == 0 && cell.worst == Verdict::kValid) {
        h += "<td class=m></td>";
        continue;
      }
      const bool excused = !cell.excused.empty();
      std::string title = esc(inv) + " in " + esc(s) + ": " + cell_label(cell) + " in " + num(cell.failing) + " of " +
                          num(row.trials) + " trials";
      if (auto st = r.tally.scenarios().find(s); st != r.tally.scenarios().end()) {
        if (auto t = st->second.invariants.find(inv); t != st->second.invariants.end() && t->second.invalid > 0)
          title += " (" + num(t->second.invalid_new) + " new, " + num(t->second.invalid_known) + " known)";
      }
      if (excused) title += "; excused: " + esc(cell.excused);
      h += std::string("<td class=\"m ") + (excused ? "excused" : css_class(cell.worst)) + "\" title=\"" + title + "\">" +
           num(cell.failing) + (excused ? " exc." : "") + "</td>";
    }
    h += "</tr>";
  }
  h += "</tbody></table><p class=legend><span class=\"sq invalid\"></span> invalid <span class=\"sq unknown\"></span> "
       "unknown <span class=\"sq excused\"></span> excused (counts for nothing) – not checked</p>";
  return h + "</section>";
}

const char* kStyle =
    "body{font:14px system-ui,sans-serif;margin:24px;color:#222;max-width:1232px}"
    "h1{font-size:20px;margin:0 0 6px}h2{font-size:17px;margin:32px 0 8px;padding-bottom:4px;border-bottom:1px solid #ddd}"
    "h3{font-size:14px;margin:18px 0 6px}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:center}"
    "th.s,td.s{text-align:left}.name{max-width:240px;overflow-wrap:anywhere}"
    ".valid{background:#dff3e0}.unknown{background:#fff2c6}.invalid{background:#f8d2d2}.excused{background:#d8eef2}"
    ".badge{display:inline-block;padding:2px 10px;border-radius:10px;font-weight:600}"
    "code{font-size:12px;background:#f4f4f4;padding:2px 4px;white-space:pre-wrap;overflow-wrap:anywhere}"
    "code.fp{font-size:11px;color:#555}li{margin:6px 0}.muted{color:#888}.meta{margin:0 0 12px;color:#444}"
    ".tiles{display:flex;flex-wrap:wrap;gap:8px;margin:8px 0}"
    ".tile{border:1px solid #ccc;border-radius:6px;padding:6px 12px;min-width:110px}"
    ".tile b{display:block;font-size:20px}.tile span{font-size:12px;color:#444}.tile.plain{background:#f7f7f7}"
    "ul.why{margin:8px 0;padding-left:0;list-style:none}ul.why li{padding:4px 10px;border-radius:4px}"
    "nav{font-size:13px;margin-top:6px}"
    "table.buckets{width:100%}table.buckets td{vertical-align:top}table.buckets td.name{width:220px}"
    ".problem{margin:2px 0 4px}.cmd{display:flex;gap:6px;margin:3px 0;align-items:baseline}"
    ".cmd span{flex:0 0 64px;color:#555;font-size:12px;text-align:right}.cmd code{flex:1}"
    "details{margin:12px 0}summary{cursor:pointer;font-weight:600}ul.trials li{margin:10px 0}"
    "ul.notes li{padding:2px 6px}"
    ".legend{font-size:12px;color:#444}"
    ".sq{display:inline-block;width:11px;height:11px;margin:0 1px;vertical-align:-1px;border:1px solid #0002}"
    ".r0{background:#d64541}.r1{background:#d5efd6}.r2{background:#a8dcaa}.r3{background:#6fc073}.r4{background:#2f8f36}"
    ".f0{background:#fff}.f1{background:#e8f0fb}.f2{background:#c6d9f3}.f3{background:#9dbde9}"
    ".f4{background:#5f8fd3;color:#fff}.f5{background:#2f5fa8;color:#fff}"
    "table.heat td,table.heat th,table.matrix td,table.matrix th{padding:2px 5px;font-size:12px}"
    "td.h{min-width:22px;font-size:11px;border-color:#ddd}tr.total td{font-weight:600;border-bottom:2px solid #999}"
    "th.v{vertical-align:bottom;padding:4px 2px}"
    "th.v span{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;font-weight:normal}"
    ".miss{color:#b00;font-weight:600}td.m{min-width:30px}td.m.na{color:#aaa}"
    "ul.states{columns:4;font-size:12px;padding-left:18px}ul.states li{margin:1px 0;break-inside:avoid;overflow-wrap:anywhere}"
    ".lat{display:flex;flex-wrap:wrap;gap:16px}figure{margin:0;width:380px}figcaption{font-size:12px;min-height:34px}"
    "svg rect{fill:#4a78c2}svg text{font-size:10px;fill:#555}";

}  // namespace

std::string report_html(const harness::RunResult& r) {
  const Counts c = counts(r);
  std::string h = "<!doctype html><html><head><meta charset=\"utf-8\"><title>shmstress run " + esc(r.run_id) +
                  "</title><style>" + kStyle + "</style></head><body>";
  h += verdict_html(r, c);
  h += violations_html(r, c);
  h += coverage_html(r, c);
  h += latency_html(r);
  h += invariants_html(r, c);
  h += "</body></html>\n";
  return h;
}

std::optional<harness::OutputError> write_report_html(const harness::RunResult& r, const std::string& path) {
  return harness::write_output(path, report_html(r), harness::OutputOrigin::kDerived);
}

}  // namespace reports
