// shmstress check DIR: re-checks stored histories offline (any dir holding
// history.jsonl + scenario.toml); the exit code is their verdict.
#include <cstdio>
#include <memory>

#include "cli/cli.h"
#include "reports/reports.h"

namespace cli {
namespace {

int check(const std::string& dir, bool verbose) {
  const std::vector<fs::path> trials = find_trial_dirs(dir, /*with_replays=*/true);
  if (trials.empty()) {
    std::fprintf(stderr,
                 "shmstress check: no trial dirs (history.jsonl + scenario.toml) under %s\n",
                 dir.c_str());
    return 2;
  }
  harness::RunResult r;  // every stored failing trial listed: the dirs are the bound
  r.run_id = "check";
  for (const auto& t : trials) {
    std::optional<harness::Scenario> s;
    std::string err;
    auto tr = recheck_trial(t, &s, &err);
    if (!s) {
      std::fprintf(stderr, "%s\n", harness::printable_text(err).c_str());
      return 2;
    }
    tr.kept = true;
    r.add(std::move(tr));
  }
  reports::console_summary(stdout, r, stdout_color(), verbose);
  return r.exit_code();
}

}  // namespace

Subcommand add_check(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto verbose = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("check", "re-check stored histories offline");
  cmd->add_option("dir", *dir, "a run or trial directory")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_flag("-v,--verbose", *verbose, "one line per scenario: trials, violations, expected states reached, faults injected");
  return {cmd, [dir, verbose](const char*) { return check(*dir, *verbose); }};
}

}  // namespace cli
