#include <chrono>
#include <map>

#include "harness/scenario.h"
#include "reports/reports.h"
#include "reports/throttle.h"

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
  ProgressLine(std::FILE* out, bool tty, bool color)
      : out_(out),
        tty_(tty),
        color_(color),
        throttle_(tty ? std::chrono::milliseconds(200) : std::chrono::milliseconds(5000)) {}
  void progress(const Progress& p) override {
    if (!throttle_.due(std::chrono::steady_clock::now()) && !p.final) return;
    console_progress(out_, p, tty_, color_);
  }
  void run_finished(const harness::RunResult&) override {
    if (tty_) std::fputc('\n', out_);
  }

 private:
  std::FILE* out_;
  bool tty_, color_;
  Throttle throttle_;
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

namespace {

// "12 sigkill, 3 pause-at-point": the faults a scenario's trials injected.
std::string fault_counts(const std::map<std::string, std::uint64_t>& faults) {
  std::string out;
  for (const auto& [kind, n] : faults) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
  return out.empty() ? "none" : out;
}

// The checks a person has to look at one by one: unknown ones (with why),
// and violations when no bucket shows them (buckets do, with their reproduce
// command). The first `limit` in detail; the rest counted.
void not_valid_details(std::FILE* out, const harness::RunResult& r, bool color, bool violations_too) {
  using harness::Verdict;
  constexpr std::uint64_t kLimit = 10;
  std::uint64_t shown = 0, more = 0;
  for (const auto& t : r.listed) {
    for (const auto& c : t.checks) {
      if (c.verdict == Verdict::kValid || !c.excused.empty()) continue;
      if (c.verdict == Verdict::kInvalid && !violations_too) continue;
      if (shown >= kLimit) {
        ++more;
        continue;
      }
      ++shown;
      std::fprintf(out, "\n%s%s%s %s trial %d (seed %llu): %s\n", paint(color, "\033[1m"), harness::verdict_name(c.verdict),
                   paint(color, "\033[0m"), screen(t.scenario).c_str(), t.trial, static_cast<unsigned long long>(t.seed),
                   screen(c.invariant).c_str());
      std::fprintf(out, "  reproduce: %s\n", screen(t.reproduce).c_str());
      for (std::size_t i = 0; i < c.problems.size() && i < 3; ++i) std::fprintf(out, "  %s\n", screen(c.problems[i]).c_str());
      if (!t.dir.empty()) std::fprintf(out, "  trial dir: %s\n", screen(t.dir).c_str());
    }
  }
  if (more > 0) std::fprintf(out, "\n(%llu more not-valid checks: see summary.json)\n", static_cast<unsigned long long>(more));
}

}  // namespace

// What a nightly log or a terminal needs on one screen: the verdict first,
// then only what is not valid, each violation with its reproduce command;
// the scenario x invariant matrix lives in summary.json and report.html.
void console_summary(std::FILE* out, const harness::RunResult& r, bool color, bool verbose) {
  using harness::Verdict;
  const auto& bt = r.tally.buckets();
  std::string triage;
  if (!bt.buckets().empty() || bt.baseline()) {
    triage = ", buckets: " + std::to_string(bt.count(false)) + " new, " + std::to_string(bt.count(true)) + " known";
    if (bt.baseline() && r.verdict() == Verdict::kInvalid && r.tally.triaged_verdict() != Verdict::kInvalid)
      triage += " (only known failures: they do not fail the run)";
  }
  const Verdict v = r.verdict();
  const char* vc = v == Verdict::kInvalid ? "\033[1;31m" : v == Verdict::kUnknown ? "\033[1;33m" : "\033[1;32m";
  std::fprintf(out, "\nverdict %s%s%s: %llu trials of %zu scenarios in %.1fs%s%s\n", paint(color, vc), harness::verdict_name(v),
               paint(color, "\033[0m"), static_cast<unsigned long long>(r.tally.trials()), r.tally.scenarios().size(), r.elapsed,
               triage.c_str(), r.interrupted ? " (interrupted)" : "");

  // Violations: one bucket per shape, each with its reproduce command.
  console_buckets(out, r, color);
  not_valid_details(out, r, color, /*violations_too=*/bt.buckets().empty());

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
  // Excuses are part of the result: each one that hid a failure with its
  // reason (-v: every one).
  for (const auto& [s, st] : r.tally.scenarios()) {
    for (const auto& [inv, cell] : st.invariants) {
      if (cell.excused.empty() || (cell.not_valid() == 0 && !verbose)) continue;
      if (cell.not_valid() == 0) {
        std::fprintf(out, "\nexcused: %s %s (held in every trial): %s\n", screen(s).c_str(), screen(inv).c_str(),
                     screen(cell.excused).c_str());
        continue;
      }
      std::fprintf(out, "\nexcused: %s %s (%s in %llu trials, not counted): %s\n", screen(s).c_str(), screen(inv).c_str(),
                   harness::verdict_name(cell.worst), static_cast<unsigned long long>(cell.not_valid()),
                   screen(cell.excused).c_str());
    }
  }
  // A known-bad scenario's claim is the point of running it: each one, met or not.
  for (const auto& [s, st] : r.tally.scenarios()) {
    if (st.expected.empty()) continue;
    const char* c = st.expectation_met() ? "\033[32m" : "\033[33m";
    std::fprintf(out, "\nexpectation %s: %s%s%s\n", screen(s).c_str(), paint(color, c), screen(expectation_line(st)).c_str(),
                 paint(color, "\033[0m"));
  }
  for (const auto& m : r.missing_reached()) std::fprintf(out, "\nnever reached: %s\n", screen(m).c_str());

  if (verbose) {
    std::fprintf(out, "\n%-34s %7s %8s %7s  %s\n", "scenario", "trials", "invalid", "states", "faults injected");
    for (const auto& [s, st] : r.tally.scenarios()) {
      std::string states = "-";
      if (auto it = r.expect_reached.find(s); it != r.expect_reached.end() && !it->second.empty()) {
        std::size_t reached = 0;
        for (const auto& state : it->second) reached += st.reached.contains(state) ? 1 : 0;
        states = std::to_string(reached) + "/" + std::to_string(it->second.size());
      }
      std::fprintf(out, "%-34s %7llu %8llu %7s  %s\n", screen(s).c_str(), static_cast<unsigned long long>(st.trials),
                   static_cast<unsigned long long>(st.violating), states.c_str(), screen(fault_counts(st.faults)).c_str());
    }
  } else if (!r.tally.scenarios().empty()) {
    std::fprintf(out, "\n(one line per scenario: -v; every scenario x invariant: summary.json, report.html)\n");
  }
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
      std::fprintf(out, "        reproduce: %s\n", screen(b->reproduce).c_str());
      std::fprintf(out, "        %s\n", screen(b->example_problem).c_str());
      if (b->known) std::fprintf(out, "        known: %s\n", screen(b->known_reason).c_str());
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
