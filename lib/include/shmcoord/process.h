// A process as /proc shows it. A pid alone is not an identity (pids are
// reused), so a ProcessId is pid + the kernel's start time of that process
// (/proc/<pid>/stat field 22, in clock ticks since boot). A stopped (SIGSTOP)
// process is alive; a zombie is dead: it will never touch shared memory again.
//
// shmcoord's own liveness decisions do not use this: they use kernel leases
// (registry.h), which also hold across pid namespaces, where the owner's pid
// is not in our /proc. ProcessId is kept in records for messages, and to tell
// a stopped owner that shares our pid namespace apart.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "shmcoord/error.h"

namespace shmcoord {

struct ProcessId {
  pid_t pid = 0;
  std::uint64_t start_time = 0;
  bool operator==(const ProcessId&) const = default;
  std::string to_string() const;  // "pid 1234"
};

enum class Liveness { kAlive, kStopped, kDead };

// Identity of the calling process (cached after the first call per pid).
ProcessId self_identity();
// Identity of any pid, or kNotFound if it does not exist.
Result<ProcessId> identity_of(pid_t pid);
// kDead if the pid is gone, a zombie, or now a different process (start time differs).
// When /proc cannot tell (hidepid), the answer is kAlive: never delete on doubt.
Liveness liveness(const ProcessId& id);
inline bool is_alive(const ProcessId& id) { return liveness(id) != Liveness::kDead; }

}  // namespace shmcoord
