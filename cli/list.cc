// shmstress list: scenarios, invariants, fault kinds and subjects.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli/cli.h"
#include "harness/checker.h"
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

}  // namespace

Subcommand add_list(CLI::App& app) {
  auto dir = std::make_shared<std::string>("scenarios");
  auto* cmd = app.add_subcommand("list", "list scenarios, invariants, fault kinds and subjects");
  cmd->add_option("--dir", *dir, "scenario directory");
  return {cmd, [dir](const char*) { return list(*dir); }};
}

}  // namespace cli
