// shmstress check DIR: re-checks stored histories offline (any dir holding
// history.jsonl + scenario.toml); the exit code is their verdict.
//
// --every-cut: the self-check of judging a running trial (harness/cut.h):
// every stored record judged at every cut against itself whole; exit 1 if
// any cut says invalid where the whole trial does not.
#include <cstdio>
#include <memory>

#include "cli/cli.h"
#include "harness/cut.h"
#include "reports/reports.h"

namespace cli {
namespace {

// The trial dirs under `dir`, or none, said on stderr.
std::vector<fs::path> trials_under(const std::string& dir) {
  std::vector<fs::path> trials = find_trial_dirs(dir, /*with_replays=*/true);
  if (trials.empty()) {
    std::fprintf(stderr,
                 "shmstress check: no trial dirs (history.jsonl + scenario.toml) under %s\n",
                 dir.c_str());
  }
  return trials;
}

int check(const std::string& dir, bool verbose) {
  const std::vector<fs::path> trials = trials_under(dir);
  if (trials.empty()) return 2;
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

int every_cut(const std::string& dir, std::size_t max_cuts) {
  const std::vector<fs::path> trials = trials_under(dir);
  if (trials.empty()) return 2;
  std::size_t cuts = 0, invalid_cuts = 0, unsound = 0;
  for (const auto& t : trials) {
    std::string err;
    const auto stored = load_stored_trial(t, &err);
    if (!stored) {
      std::fprintf(stderr, "%s\n", harness::printable_text(err).c_str());
      return 2;
    }
    const harness::Scenario& s = stored->scenario;
    std::vector<std::string> errors;
    const auto events =
        harness::parse_jsonl(harness::read_file((t / "history.jsonl").string()), &errors);
    const auto lines =
        harness::unsound_cuts(events, harness::meta_for(s, stored->schedule.seed),
                              harness::cut_invariants(s.excuses), max_cuts, &cuts, &invalid_cuts);
    for (const auto& line : lines) {
      std::printf("%s: %s\n", t.string().c_str(), harness::printable_text(line).c_str());
    }
    unsound += lines.size();
  }
  std::printf("%zu trials, %zu cuts judged, %zu invalid, %zu unsound\n", trials.size(), cuts,
              invalid_cuts, unsound);
  return unsound == 0 ? 0 : 1;
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
  auto cuts = std::make_shared<bool>(false);
  auto max_cuts = std::make_shared<std::size_t>(250);
  cmd->add_flag(
      "--every-cut", *cuts,
      "judge every stored record at every cut as well as whole (the self-check of "
      "--stop-on-violation's early end); exit 1 if a cut is invalid where the whole trial is not");
  cmd->add_option(
         "--max-cuts", *max_cuts,
         "with --every-cut: judge a longer record at this many cuts, evenly spread (0: every one)")
      ->check(CLI::Range(0, 1'000'000))
      ->default_val(250);
  return {cmd, [dir, verbose, cuts, max_cuts](const char*) {
            return *cuts ? every_cut(*dir, *max_cuts) : check(*dir, *verbose);
          }};
}

}  // namespace cli
