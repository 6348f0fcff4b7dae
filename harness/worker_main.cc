// The stock worker on its own (build/shmstress-worker), and the standalone
// worker a variant of shmcoord is linked into (tests/mutants/). `--build-token`
// answers which sources it was built from (worker_exe.h); everything else is
// the worker protocol (docs/worker-protocol.md), started by the supervisor.
#include <cstdio>
#include <cstring>

#include "worker.h"
#include "zygote.h"
#if __has_include("worker_token.h")
#include "worker_token.h"
#endif

int main([[maybe_unused]] int argc, [[maybe_unused]] char** argv) {
#ifdef SHMSTRESS_WORKER_TOKEN
  if (argc == 2 && std::strcmp(argv[1], "--build-token") == 0) {
    std::printf("%s\n", SHMSTRESS_WORKER_TOKEN);
    return 0;
  }
#endif
  if (argc == 2 && std::strcmp(argv[1], harness::zygote::kArg) == 0)
    return harness::zygote::serve(harness::zygote::kSockFd);
  return harness::worker_main();
}
