// shmstress clean: removes what a run killed by SIGKILL left in the machine's
// shared /dev/shm: the names of runs whose lease is no longer held
// (harness/run_lease.h decides, in one place), and nothing else. A live run in
// another pid namespace keeps its names; so does anything that is not
// provably a dead run's (a stranger's, an older shmstress's without a lease).
// libfiu's /tmp/fiu-ctrl-* FIFOs are not the harness's (it turns libfiu's
// remote control off) and are left alone.
#include <cstdio>

#include "cli/cli.h"
#include "harness/run_lease.h"

namespace cli {
namespace {

int clean() {
  int removed = 0, kept = 0;
  for (const auto& d : harness::clean_dead_runs()) {
    if (d.remove) {
      std::printf("removed /dev/shm/%s (%s)\n", harness::printable_text(d.name).c_str(), d.why.c_str());
      ++removed;
    } else {
      std::printf("kept /dev/shm/%s: %s\n", harness::printable_text(d.name).c_str(), d.why.c_str());
      ++kept;
    }
  }
  std::printf("%d leftovers removed, %d kept\n", removed, kept);
  return 0;
}

}  // namespace

Subcommand add_clean(CLI::App& app) {
  auto* cmd = app.add_subcommand("clean", "remove what a killed run left behind in /dev/shm");
  return {cmd, [](const char*) { return clean(); }};
}

}  // namespace cli
