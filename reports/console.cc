#include <map>

#include "reports/reports.h"

namespace reports {
namespace {

const char* paint(bool color, const char* code) { return color ? code : ""; }

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
  double rate = p.elapsed > 0 ? p.done / p.elapsed : 0;
  char line[256];
  std::string planned = p.planned >= 0 ? std::to_string(p.planned) : "-";
  std::snprintf(line, sizeof line, "trials %d/%s  violations %s%d%s  %.1f trials/s  elapsed %s  remaining %s",
                p.done, planned.c_str(), p.violations ? paint(color, "\033[31m") : "", p.violations,
                p.violations ? paint(color, "\033[0m") : "", rate, fmt_secs(p.elapsed).c_str(),
                fmt_secs(p.remaining).c_str());
  if (tty) {
    std::fprintf(out, "\r\033[K%s", line);
  } else {
    std::fprintf(out, "%s\n", line);
  }
  std::fflush(out);
}

std::map<std::string, ScenarioRow> scenario_table(const harness::RunResult& r) {
  std::map<std::string, ScenarioRow> table;
  for (const auto& t : r.trials) {
    ScenarioRow& row = table[t.scenario];
    ++row.trials;
    for (const auto& c : t.checks) {
      InvariantCell& cell = row.invariants[c.invariant];
      if (c.verdict != harness::Verdict::kValid) ++cell.failing;
      cell.worst = harness::compose(cell.worst, c.verdict);
    }
  }
  return table;
}

void console_summary(std::FILE* out, const harness::RunResult& r, bool color) {
  using harness::Verdict;
  std::fprintf(out, "\n%-28s %-26s %7s %9s  %s\n", "scenario", "invariant", "trials", "failing", "verdict");
  for (const auto& [s, row] : scenario_table(r)) {
    for (const auto& [inv, cell] : row.invariants) {
      const char* c = cell.worst == Verdict::kInvalid ? "\033[31m" : cell.worst == Verdict::kUnknown ? "\033[33m" : "\033[32m";
      std::fprintf(out, "%-28s %-26s %7d %9d  %s%s%s\n", s.c_str(), inv.c_str(), row.trials, cell.failing, paint(color, c),
                   harness::verdict_name(cell.worst), paint(color, "\033[0m"));
    }
  }
  int shown = 0;
  for (const auto& t : r.trials) {
    for (const auto& c : t.checks) {
      if (c.verdict == Verdict::kValid) continue;
      if (++shown > 20) continue;
      std::fprintf(out, "\n%s%s%s %s trial %d (seed %llu): %s\n", paint(color, "\033[1m"), harness::verdict_name(c.verdict),
                   paint(color, "\033[0m"), t.scenario.c_str(), t.trial, static_cast<unsigned long long>(t.seed),
                   c.invariant.c_str());
      for (std::size_t i = 0; i < c.problems.size() && i < 5; ++i) std::fprintf(out, "  %s\n", c.problems[i].c_str());
      std::fprintf(out, "  trial dir: %s\n  reproduce: %s\n", t.dir.c_str(), t.reproduce.c_str());
    }
  }
  if (shown > 20) std::fprintf(out, "\n(%d more; see summary.json)\n", shown - 20);
  for (const auto& t : r.trials) {
    if (t.harness_error) std::fprintf(out, "\nharness error in %s trial %d: %s\n", t.scenario.c_str(), t.trial, t.harness_error_text.c_str());
  }
  std::map<std::string, std::string> skipped;
  for (const auto& t : r.trials) {
    if (!t.unavailable.empty()) skipped[t.scenario] = t.unavailable;
  }
  for (const auto& [s, why] : skipped) std::fprintf(out, "\nskipped %s: subject not available: %s\n", s.c_str(), why.c_str());
  for (const auto& m : r.missing_reached()) std::fprintf(out, "\nnever reached: %s\n", m.c_str());
  std::fprintf(out, "\n%zu trials in %.1fs, verdict %s%s\n", r.trials.size(), r.elapsed, harness::verdict_name(r.verdict()),
               r.interrupted ? " (interrupted)" : "");
}

}  // namespace reports
