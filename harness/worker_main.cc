// A standalone native worker (`shmstress-worker worker`), used to run a
// different build of shmcoord (e.g. a known-bad variant) under the same harness.
#include "worker.h"

int main() { return harness::worker_main(); }
