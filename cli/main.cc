// shmstress: the command line (cli.h); `shmstress worker` is the native
// worker's entry, started by trial supervisors, not by users.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "harness/worker.h"
#include "harness/zygote.h"

namespace {

int run_cli(int argc, char** argv) {
  CLI::App app{"shmstress: stress and fault-injection harness for shared-memory coordination"};
  app.require_subcommand(1);
  const std::vector<cli::Subcommand> commands = {
      cli::add_run(app),    cli::add_list(app),   cli::add_check(app),         cli::add_clean(app),
      cli::add_report(app), cli::add_shrink(app), cli::add_subject_check(app), cli::add_replay(app),
      cli::add_baseline(app), cli::add_merge(app),
  };
  // A reader that went away (`shmstress report | head`) is EPIPE on the
  // write, not a death by SIGPIPE that loses what is left to write. (`run`,
  // `replay` and `shrink` also turn SIGPIPE into an interruption: run.h.)
  struct sigaction quiet{};
  quiet.sa_handler = [](int) {};
  quiet.sa_flags = SA_RESTART;
  sigaction(SIGPIPE, &quiet, nullptr);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  for (const auto& c : commands) {
    if (c.app->parsed()) return c.run(argv[0]);
  }
  return 2;  // require_subcommand(1): not reached
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "worker") return harness::worker_main();
  if (argc == 2 && std::string(argv[1]) == harness::zygote::kArg)
    return harness::zygote::serve(harness::zygote::kSockFd);
  // The last resort: every input is validated where it enters, so an
  // exception here is a bug. It still ends as "the harness failed" (exit 3)
  // with its message, never as an abort that loses the exit code.
  try {
    return run_cli(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shmstress: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "shmstress: internal error: unknown exception\n");
  }
  return 3;
}
