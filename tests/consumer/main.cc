// Acquires a prefix, crosses a one-process barrier, releases and cleans up,
// through the installed headers only.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "shmcoord/barrier.h"
#include "shmcoord/cleanup.h"
#include "shmcoord/failpoint.h"
#include "shmcoord/registry.h"

int main() {
  shmcoord::Namespace ns;
  ns.root = "shmconsumer." + std::to_string(::getpid()) + ".";
  ns.lock_dir = "/tmp";
  auto reg = shmcoord::Registry::open(ns);
  if (!reg) return std::fprintf(stderr, "%s\n", reg.error().to_string().c_str()), 1;
  shmcoord::JobSpec spec{"consumer", 0, 1, {{"/data/consumer", true}}};
  auto lease = reg->acquire(spec);
  if (!lease) return std::fprintf(stderr, "%s\n", lease.error().to_string().c_str()), 1;
  {
    auto b = shmcoord::Barrier::attach(ns, shmcoord::Namespace::prefix_suffix(lease->prefix, "barrier"), 1);
    if (!b || !b->wait()) return 1;
  }
  if (!reg->release(*lease)) return 1;
  auto rep = shmcoord::clean_stale(ns);
  if (!rep) return 1;
  std::printf("prefix %d, failpoints %s\n", lease->prefix, shmcoord::failpoint::compiled_in() ? "on" : "off");
  return 0;
}
