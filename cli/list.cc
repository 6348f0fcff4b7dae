// shmstress list: scenarios, invariants, fault kinds and subjects.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include "cli/cli.h"
#include "harness/checker.h"
#include "harness/coverage.h"
#include "harness/injector.h"
#include "harness/subjects.h"

namespace cli {
namespace {

int list(const std::string& dir) {
  std::printf("scenarios (%s):\n", dir.c_str());
  std::vector<std::string> files;
  std::error_code ec;
  // A dir it cannot read is skipped, never an exception (`list --dir /`).
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().extension() == ".toml") files.push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    harness::ScenarioError err;
    auto s = harness::load_scenario(f, &err);
    std::string d = s ? s->description : "(invalid: " + err.to_string() + ")";
    if (auto nl = d.find_first_of(".\n"); nl != std::string::npos) d = d.substr(0, nl + 1);
    std::printf("  %-34s %s\n", harness::printable_text(f).c_str(), harness::printable_text(d).c_str());
  }
  std::printf("\ninvariants:\n");
  for (const auto& c : harness::checker_registry())
    std::printf("  %-26s %s\n", c.invariant.c_str(), c.summary.c_str());
  std::printf("\nfault kinds:\n");
  for (const auto& i : harness::injector_registry())
    std::printf("  %-26s %s\n", i.kind.c_str(), i.summary.c_str());
  std::printf("\nsubjects:\n  %-26s %s\n", "native",
              "shmcoord (lib/), driven by `shmstress worker`");
  for (const auto& sj : harness::list_subjects({dir}))
    std::printf("  %-26s %s\n", sj.name.c_str(), sj.description.c_str());
  std::printf("  %-26s %s\n", "exec:CMD",
              "any program speaking docs/worker-protocol.md (check it with subject-check)");
  return 0;
}

// The window coverage table (harness/coverage.h): every failpoint x {crash,
// pause} x {a neighbour's acquire, cleanup, barrier round}, with the trials
// of the given runs that reached each cell.
int coverage(const std::vector<std::string>& runs) {
  std::map<std::string, std::uint64_t> reached;
  for (const auto& d : runs) {
    fs::path file;
    std::string why;
    auto r = read_run_result(d, &file, &why);
    if (!r) {
      std::fprintf(stderr, "shmstress list: %s\n", harness::printable_text(why).c_str());
      return 2;
    }
    for (const auto& [state, n] : r->tally.reached()) reached[state] += n;
  }
  const auto rows = harness::coverage_table(reached);
  std::printf("window coverage: trials in which another process's op ran inside the window\n");
  std::printf("(crash: within %lld ms after a process died at the point; pause: while it was stopped there)\n\n",
              static_cast<long long>(harness::kCrashWindowNs / 1000000));
  std::printf("%-44s %-6s | %-23s | %-23s\n", "", "", "crash", "pause");
  std::printf("%-44s %-6s | %7s %7s %7s | %7s %7s %7s\n", "failpoint", "kind", "acquire", "clean", "barrier",
              "acquire", "clean", "barrier");
  std::size_t cells = 0, hit = 0, wcells = 0, whit = 0;
  for (const auto& r : rows) {
    std::printf("%-44s %-6s |", r.point.c_str(), r.window ? "window" : "call");
    for (std::size_t i = 0; i < r.counts.size(); ++i) {
      if (i == 3) std::printf(" |");
      if (r.counts[i] == 0) {
        std::printf(" %7s", "-");
      } else {
        std::printf(" %7llu", static_cast<unsigned long long>(r.counts[i]));
      }
      ++cells, hit += r.counts[i] > 0;
      if (r.window) ++wcells, whit += r.counts[i] > 0;
    }
    std::printf("\n");
  }
  std::printf("\n%zu of %zu cells reached (window points: %zu of %zu)%s\n", hit, cells, whit, wcells,
              runs.empty() ? "; give run dirs or summary.json files to count a run's trials" : "");
  return 0;
}

}  // namespace

Subcommand add_list(CLI::App& app) {
  auto dir = std::make_shared<std::string>("scenarios");
  auto cov = std::make_shared<bool>(false);
  auto runs = std::make_shared<std::vector<std::string>>();
  auto* cmd = app.add_subcommand("list", "list scenarios, invariants, fault kinds and subjects");
  cmd->add_option("--dir", *dir, "scenario directory");
  cmd->add_flag("--coverage", *cov,
                "print the window coverage table (failpoint x crash/pause x a neighbour's acquire, cleanup, "
                "barrier round) with the trials of the given runs that reached each cell");
  cmd->add_option("runs", *runs, "with --coverage: run dirs or summary.json files to count");
  return {cmd, [dir, cov, runs](const char*) {
            if (!*cov && !runs->empty()) {
              std::fprintf(stderr, "shmstress list: run dirs are counted only with --coverage\n");
              return 2;
            }
            return *cov ? coverage(*runs) : list(*dir);
          }};
}

}  // namespace cli
