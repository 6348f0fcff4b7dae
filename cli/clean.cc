// shmstress clean: removes what a killed run left behind: name-root segments
// of dead harnesses, and libfiu FIFOs of dead pids.
#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "cli/cli.h"

namespace cli {
namespace {

int clean() {
  int removed = 0;
  auto dead = [](const std::string& digits) {
    int pid = std::atoi(digits.c_str());
    return pid > 0 && ::kill(pid, 0) < 0 && errno == ESRCH;
  };
  if (DIR* d = ::opendir("/dev/shm")) {
    while (auto* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.rfind("shmstress.", 0) == 0 && dead(n.substr(10))) {
        if (::shm_unlink(("/" + n).c_str()) == 0) {
          std::printf("removed /dev/shm/%s\n", n.c_str());
          ++removed;
        }
      }
    }
    ::closedir(d);
  }
  std::error_code ec;
  for (auto it = fs::directory_iterator("/tmp", ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const fs::directory_entry& e = *it;
    std::string n = e.path().filename();
    if (n.rfind("fiu-ctrl-", 0) == 0) {
      auto dash = n.rfind('-');
      std::error_code rm_ec;
      if (dead(n.substr(dash + 1)) && fs::remove(e.path(), rm_ec)) {
        std::printf("removed %s\n", e.path().c_str());
        ++removed;
      }
    }
  }
  std::printf("%d leftovers removed\n", removed);
  return 0;
}

}  // namespace

Subcommand add_clean(CLI::App& app) {
  auto* cmd = app.add_subcommand("clean", "remove what a killed run left behind");
  return {cmd, [](const char*) { return clean(); }};
}

}  // namespace cli
