#include <chrono>
#include <map>

#include "harness/scenario.h"
#include "reports/reports.h"

namespace reports {
namespace {

const char* paint(bool color, const char* code) { return color ? code : ""; }

// Everything a run's files or a subject said (problems, reasons, names a
// subject left, dirs, commands) reaches the terminal through this: an escape
// sequence in it is shown, never obeyed.
std::string screen(std::string_view s) { return harness::printable_text(s); }

std::string fmt_secs(double s) {
  char buf[32];
  if (s < 0) return "?";
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  } else {
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  }
  return buf;
}

}  // namespace

void console_progress(std::FILE* out, const Progress& p, bool tty, bool color) {
  double rate = p.elapsed > 0 ? static_cast<double>(p.done) / p.elapsed : 0;
  char line[256];
  std::string planned = p.planned >= 0 ? std::to_string(p.planned) : "-";
  // "violations 5 (2 new)" once some violation is known to the baseline.
  std::string known = p.new_violations != p.violations
                          ? " (" + std::to_string(p.new_violations) + " new)"
                          : "";
  std::string at_once = p.concurrency > 0 ? "  " + std::to_string(p.concurrency) + " at once" : "";
  std::snprintf(line, sizeof line, "trials %llu/%s  violations %s%llu%s%s  %.1f trials/s%s  elapsed %s  remaining %s",
                static_cast<unsigned long long>(p.done), planned.c_str(), p.new_violations ? paint(color, "\033[31m") : "",
                static_cast<unsigned long long>(p.violations), p.new_violations ? paint(color, "\033[0m") : "",
                known.c_str(), rate, at_once.c_str(), fmt_secs(p.elapsed).c_str(), fmt_secs(p.remaining).c_str());
  if (tty) {
    std::fprintf(out, "\r\033[K%s", line);
  } else {
    std::fprintf(out, "%s\n", line);
  }
  std::fflush(out);
}

namespace {

class ProgressLine : public harness::RunSubscriber {
 public:
  ProgressLine(std::FILE* out, bool tty, bool color) : out_(out), tty_(tty), color_(color) {}
  void progress(const Progress& p) override {
    auto now = std::chrono::steady_clock::now();
    if (!p.final && now - last_ < (tty_ ? std::chrono::milliseconds(200) : std::chrono::milliseconds(5000))) return;
    last_ = now;
    console_progress(out_, p, tty_, color_);
  }
  void run_finished(const harness::RunResult&) override {
    if (tty_) std::fputc('\n', out_);
  }

 private:
  std::FILE* out_;
  bool tty_, color_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now() - std::chrono::hours(1);
};

}  // namespace

std::shared_ptr<harness::RunSubscriber> progress_line(std::FILE* out, bool tty, bool color) {
  return std::make_shared<ProgressLine>(out, tty, color);
}

std::map<std::string, ScenarioRow> scenario_table(const harness::RunResult& r) {
  std::map<std::string, ScenarioRow> table;
  for (const auto& [name, s] : r.tally.scenarios()) {
    ScenarioRow& row = table[name];
    row.trials = s.trials;
    for (const auto& [inv, c] : s.invariants) row.invariants[inv] = InvariantCell{c.not_valid(), c.worst, c.excused};
  }
  return table;
}

std::string cell_label(const InvariantCell& c) {
  return c.excused.empty() ? std::string(harness::verdict_name(c.worst)) : std::string("excused");
}

std::string expectation_line(const harness::ScenarioTally& s) {
  const auto n = [](std::uint64_t v) { return std::to_string(v); };
  if (s.expect_met > 0) {
    return "caught in " + n(s.expect_met) + " of " + n(s.trials) + " trials (" + s.expected + ")";
  }
  std::string why;
  if (s.expect_no_evidence > 0) why += n(s.expect_no_evidence) + " broke it without the expected evidence";
  if (s.expect_other > 0) why += (why.empty() ? "" : ", ") + n(s.expect_other) + " broke only other invariants";
  if (why.empty()) why = "nothing broke";
  return "NOT caught in " + n(s.trials) + " trials: expected " + s.expected + "; " + why;
}

void console_summary(std::FILE* out, const harness::RunResult& r, bool color) {
  using harness::Verdict;
  std::fprintf(out, "\n%-28s %-26s %7s %9s  %s\n", "scenario", "invariant", "trials", "failing", "verdict");
  for (const auto& [s, row] : scenario_table(r)) {
    for (const auto& [inv, cell] : row.invariants) {
      const char* c = !cell.excused.empty()             ? "\033[36m"
                      : cell.worst == Verdict::kInvalid ? "\033[31m"
                      : cell.worst == Verdict::kUnknown ? "\033[33m"
                                                        : "\033[32m";
      std::fprintf(out, "%-28s %-26s %7llu %9llu  %s%s%s\n", screen(s).c_str(), screen(inv).c_str(), static_cast<unsigned long long>(row.trials),
                   static_cast<unsigned long long>(cell.failing), paint(color, c), cell_label(cell).c_str(),
                   paint(color, "\033[0m"));
    }
  }
  // Excuses are part of the result: every one with its reason.
  for (const auto& [s, st] : r.tally.scenarios()) {
    for (const auto& [inv, cell] : st.invariants) {
      if (cell.excused.empty()) continue;
      std::fprintf(out, "\nexcused: %s %s (%s in %llu trials, not counted): %s\n", screen(s).c_str(), screen(inv).c_str(),
                   harness::verdict_name(cell.worst), static_cast<unsigned long long>(cell.not_valid()),
                   screen(cell.excused).c_str());
    }
  }
  // Every (trial, invariant) that was not valid, the first 20 in detail; the
  // rest (and those of trials past the --max-kept cap) are counted.
  std::uint64_t shown = 0;
  for (const auto& t : r.listed) {
    for (const auto& c : t.checks) {
      if (c.verdict == Verdict::kValid || !c.excused.empty() || shown >= 20) continue;
      ++shown;
      std::fprintf(out, "\n%s%s%s %s trial %d (seed %llu): %s\n", paint(color, "\033[1m"), harness::verdict_name(c.verdict),
                   paint(color, "\033[0m"), screen(t.scenario).c_str(), t.trial, static_cast<unsigned long long>(t.seed),
                   screen(c.invariant).c_str());
      for (std::size_t i = 0; i < c.problems.size() && i < 5; ++i) std::fprintf(out, "  %s\n", screen(c.problems[i]).c_str());
      std::fprintf(out, "  trial dir: %s\n  reproduce: %s\n", screen(t.dir).c_str(), screen(t.reproduce).c_str());
    }
  }
  std::uint64_t listed_lines = 0;
  for (const auto& t : r.listed) {
    for (const auto& c : t.checks) listed_lines += c.verdict != Verdict::kValid && c.excused.empty() ? 1 : 0;
  }
  if (const std::uint64_t total = r.tally.not_valid_checks(); total > shown) {
    if (listed_lines == total) {
      std::fprintf(out, "\n(%llu more; see summary.json)\n", static_cast<unsigned long long>(total - shown));
    } else {  // some failing trials were past the --max-kept cap: only counted
      std::fprintf(out, "\n(%llu more; summary.json lists %llu of them and counts the rest)\n",
                   static_cast<unsigned long long>(total - shown), static_cast<unsigned long long>(listed_lines - shown));
    }
  }
  std::uint64_t errors_shown = 0;
  for (const auto& t : r.listed) {
    if (!t.harness_error) continue;
    ++errors_shown;
    std::fprintf(out, "\nharness error in %s trial %d: %s\n", screen(t.scenario).c_str(), t.trial,
                 screen(t.harness_error_text).c_str());
  }
  if (r.tally.harness_errors() > errors_shown) {
    std::fprintf(out, "\n(%llu more harness errors past the --max-kept cap)\n",
                 static_cast<unsigned long long>(r.tally.harness_errors() - errors_shown));
  }
  for (const auto& [s, st] : r.tally.scenarios()) {
    if (st.unavailable > 0) std::fprintf(out, "\nskipped %s: subject not available: %s\n", screen(s).c_str(),
                                     screen(st.last_unavailable).c_str());
  }
  // Events that did not fit the protocol: those trials are at best unknown.
  std::uint64_t history_shown = 0;
  for (const auto& t : r.listed) {
    if (t.history_error_count == 0 || history_shown >= 10) continue;
    ++history_shown;
    std::fprintf(out, "\nhistory errors in %s trial %d (%zu; the trial is at best unknown):\n", screen(t.scenario).c_str(), t.trial,
                 t.history_error_count);
    for (std::size_t i = 0; i < t.history_errors.size() && i < 3; ++i) std::fprintf(out, "  %s\n", screen(t.history_errors[i]).c_str());
    if (!t.dir.empty()) std::fprintf(out, "  trial dir: %s\n", screen(t.dir).c_str());
  }
  for (const auto& [s, st] : r.tally.scenarios()) {
    if (st.history_error_trials > 0) {
      std::fprintf(out, "\n%s: history errors in %llu of %llu trials, first: %s\n", screen(s).c_str(),
                   static_cast<unsigned long long>(st.history_error_trials), static_cast<unsigned long long>(st.trials),
                   screen(st.first_history_error).c_str());
    }
  }
  for (const auto& [s, st] : r.tally.scenarios()) {
    if (st.expected.empty()) continue;
    const char* c = st.expectation_met() ? "\033[32m" : "\033[33m";
    std::fprintf(out, "\nexpectation %s: %s%s%s\n", screen(s).c_str(), paint(color, c), screen(expectation_line(st)).c_str(),
                 paint(color, "\033[0m"));
  }
  for (const auto& m : r.missing_reached()) std::fprintf(out, "\nnever reached: %s\n", screen(m).c_str());
  console_buckets(out, r, color);
  const auto& bt = r.tally.buckets();
  std::string triage;
  if (!bt.buckets().empty() || bt.baseline()) {
    triage = ", buckets: " + std::to_string(bt.count(false)) + " new, " + std::to_string(bt.count(true)) + " known";
    if (bt.baseline() && r.verdict() == Verdict::kInvalid && r.tally.triaged_verdict() != Verdict::kInvalid)
      triage += " (only known failures: they do not fail the run)";
  }
  std::fprintf(out, "\n%llu trials in %.1fs, verdict %s%s%s\n", static_cast<unsigned long long>(r.tally.trials()), r.elapsed,
               harness::verdict_name(r.verdict()), triage.c_str(), r.interrupted ? " (interrupted)" : "");
}

void console_buckets(std::FILE* out, const harness::RunResult& r, bool color) {
  const auto& bt = r.tally.buckets();
  const auto buckets = buckets_in_order(r);
  if (!buckets.empty()) {
    std::fprintf(out, "\nbuckets: %zu new, %zu known (fingerprint = invariant/scenario/hash of the problem's shape)\n",
                 bt.count(false), bt.count(true));
    std::size_t shown = 0;
    for (const auto* b : buckets) {
      if (shown++ >= 20) break;
      std::fprintf(out, "  %s%-5s%s %6llu trials (%d..%d)  %s\n", paint(color, b->known ? "\033[33m" : "\033[1;31m"),
                   b->known ? "known" : "NEW", paint(color, "\033[0m"), static_cast<unsigned long long>(b->trials),
                   b->first_trial, b->last_trial, screen(b->fingerprint).c_str());
      std::fprintf(out, "        %s\n", screen(b->example_problem).c_str());
      if (b->known) std::fprintf(out, "        known: %s\n", screen(b->known_reason).c_str());
      std::fprintf(out, "        reproduce: %s\n", screen(b->reproduce).c_str());
      if (!b->shrunk.empty()) std::fprintf(out, "        shrunk: %s\n", screen(b->shrunk).c_str());
    }
    if (buckets.size() > 20) std::fprintf(out, "  (%zu more buckets in summary.json)\n", buckets.size() - 20);
    if (bt.overflow() > 0)
      std::fprintf(out, "  (%llu violations past the cap of %zu buckets: counted, not bucketed)\n",
                   static_cast<unsigned long long>(bt.overflow()), harness::BucketTally::kMaxBuckets);
  }
  if (const harness::Baseline* base = bt.baseline()) {
    for (const auto* k : r.known_not_recurred())
      std::fprintf(out, "known, did not recur: %s (%s)\n", screen(k->fingerprint).c_str(), screen(k->reason).c_str());
    for (const auto& k : base->expired)
      std::fprintf(out, "baseline entry expired %s, counts as new again: %s (%s)\n",
                   harness::day_text(*k.expires).c_str(), screen(k.fingerprint).c_str(), screen(k.reason).c_str());
  }
}

}  // namespace reports
