// The native worker: one rank of one job, driving shmcoord as a data loader
// would, and logging each operation per docs/worker-protocol.md. Its identity
// and plan come from SHMSTRESS_* environment variables set by the supervisor.
// Exit codes: 0 every op succeeded; 1 an op failed with a reported error;
// 2 bad environment; 70 an uncaught exception (a bug: worker.clean-exit).
#pragma once

namespace harness {

int worker_main();

}  // namespace harness
