// shmstress report DIR: re-checks stored trial dirs like `check`, writes each
// one's timeline (failing trials, or all with --all) and report.html, and
// JUnit / metrics if asked. They describe the stored trials only: a run keeps
// just its failing ones unless --keep-passing. Exit code: as `check` (the
// verdict), 3 if a report cannot be written.
#include <cstdio>
#include <memory>
#include <set>

#include "cli/cli.h"
#include "reports/reports.h"

namespace cli {
namespace {

struct ReportArgs {
  std::string dir, junit, metrics;
  bool all = false, verbose = false;
};

int report(const ReportArgs& a) {
  if (auto e = check_user_outputs({a.junit, a.metrics})) {
    std::fprintf(stderr, "shmstress report: %s\n", e->message.c_str());
    return e->exit_code;
  }
  auto trials = find_trial_dirs(a.dir);
  if (trials.empty()) {
    std::fprintf(stderr,
                 "shmstress report: no trial dirs (history.jsonl + scenario.toml) under %s\n",
                 a.dir.c_str());
    return 2;
  }
  std::string err;
  const std::optional<harness::StoredSummary> summary = find_run_summary(a.dir, &err);
  if (!summary) {
    std::fprintf(stderr, "shmstress report: %s\n", err.c_str());
    return 2;
  }
  auto repro = summary->reproduce_by_dir();
  harness::RunResult r;  // every stored failing trial listed: the dirs are the bound
  r.run_id = summary->run_id.value_or("report");
  r.subject = summary->subject.value_or("native");
  r.elapsed = summary->elapsed_s.value_or(0.0);
  r.out_dir = canonical_or(a.dir);
  std::set<std::uint64_t> run_seeds;
  int timelines = 0;
  for (const auto& t : trials) {
    std::optional<harness::Scenario> s;
    auto tr = recheck_trial(t, &s, &err);
    if (!s) {
      std::fprintf(stderr, "%s\n", harness::printable_text(err).c_str());
      return 2;
    }
    tr.kept = true;
    tr.dir = canonical_or(t);
    if (auto it = repro.find(tr.dir); it != repro.end()) tr.reproduce = it->second;
    run_seeds.insert(tr.run_seed);
    // Its timeline now, while its scenario is at hand.
    if ((a.all || tr.failing()) && write_timeline(tr, *s)) ++timelines;
    r.add(std::move(tr));
  }
  if (run_seeds.size() == 1) r.seed = *run_seeds.begin();
  // Buckets whose example trial was shrunk since (`shmstress shrink`).
  for (auto& [fp, b] : r.tally.buckets().buckets()) {
    if (!b.example_dir.empty() && fs::exists(fs::path(b.example_dir) / "minimal.toml"))
      b.shrunk = (fs::path(b.example_dir) / "minimal.toml").string();
  }
  reports::console_summary(stdout, r, stdout_color(), a.verbose);
  std::printf("timelines: %d written (timeline.json, timeline.html in each trial dir)\n",
              timelines);
  int failed = 0;
  if (report_written(reports::write_report_html(r, r.out_dir + "/report.html"), "report.html", &failed))
    std::printf("report: %s/report.html\n", r.out_dir.c_str());
  if (int ci = write_ci_reports(r, r.exit_code(), a.junit, a.metrics); failed == 0) failed = ci;
  return failed != 0 ? failed : r.exit_code();
}

}  // namespace

Subcommand add_report(CLI::App& app) {
  auto a = std::make_shared<ReportArgs>();
  auto* cmd =
      app.add_subcommand("report", "re-check stored trial dirs and regenerate their reports");
  cmd->add_option("dir", a->dir, "a run or trial directory")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--junit", a->junit, "also write JUnit XML of the stored trials here");
  cmd->add_option("--metrics-file", a->metrics,
                  "also write a Prometheus textfile of the stored trials here");
  cmd->add_flag("-v,--verbose", a->verbose, "one line per scenario: trials, violations, expected states reached, faults injected");
  cmd->add_flag("--all", a->all, "timelines for passing trials too (kept with --keep-passing)");
  return {cmd, [a](const char*) { return report(*a); }};
}

}  // namespace cli
