// shmstress subject-check CMD: validates a program as a subject against
// docs/worker-protocol.md (harness/subject_check.h), one PASS/FAIL line per check.
#include "harness/subject_check.h"

#include <cstdio>
#include <memory>

#include "cli/cli.h"
#include "harness/subjects.h"

namespace cli {
namespace {

int subject_check(const std::string& cmd) {
  std::vector<std::string> argv = harness::split_words(cmd);
  if (argv.empty()) {
    std::fprintf(stderr, "shmstress subject-check: give the subject's command\n");
    return 2;
  }
  if (std::string why; !harness::check_program(argv, &why)) {
    std::fprintf(stderr, "shmstress subject-check: %s\n", why.c_str());
    return 2;
  }
  bool all = true;
  std::string failure;
  const auto lines =
      harness::subject_check(harness::absolute_command(argv, {fs::current_path().string()}), self_exe(), &failure);
  if (!failure.empty()) {
    std::fprintf(stderr, "shmstress subject-check: %s\n", failure.c_str());
    return 3;
  }
  for (const auto& l : lines) {
    std::printf("%s  %s: %s\n", l.ok ? "PASS" : "FAIL", l.what.c_str(), l.detail.c_str());
    all &= l.ok;
  }
  std::printf("%s\n", all ? "the subject speaks worker protocol v1"
                          : "the subject does not pass: see docs/worker-protocol.md");
  return all ? 0 : 1;
}

}  // namespace

Subcommand add_subject_check(CLI::App& app) {
  auto command = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "subject-check", "validate a program as a subject (worker protocol, isolation, SIGTERM)");
  cmd->add_option("command", *command,
                  "the subject's command, e.g. \"/usr/bin/python3 subjects/streaming/adapter.py\"")
      ->required();
  return {cmd, [command](const char*) { return subject_check(*command); }};
}

}  // namespace cli
