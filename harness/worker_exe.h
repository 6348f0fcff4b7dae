// Which binary a run execs as the native worker when the user names none.
//
// Promise: the stock worker a run execs is always built from the same sources
// and configuration as the shmstress that runs it. build/shmstress-worker (the
// worker alone: fewer shared objects and static initialisers to load for every
// rank of every trial) is used only when it stands in shmstress's own
// directory and answers `--build-token` with shmstress's own token; anything
// else (absent, not executable, another build's, silent, crashing) makes the
// run exec shmstress itself (`shmstress worker`), which is always right.
#pragma once

#include <chrono>
#include <string>

namespace harness {

// The token both binaries are built with (generated/worker_token.h).
const char* worker_build_token();

struct WorkerExe {
  std::string exe;   // what the run execs as `<exe> worker`
  std::string note;  // why a shmstress-worker beside `self` was passed over; empty if used or absent
};

// `self`: the absolute path of the running shmstress. A sibling that has not
// answered within `answer_within` is killed and passed over.
WorkerExe stock_worker_exe(const std::string& self,
                           std::chrono::milliseconds answer_within = std::chrono::seconds(5));

}  // namespace harness
