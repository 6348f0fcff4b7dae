// ResourceTracker: a watcher process that releases this process's registry
// holdings when it dies, by any signal including SIGKILL.
//
// Process contract:
// - start() forks a small child that closes every inherited fd (so it can
//   never keep a lock or segment of ours alive), then waits on a pidfd of its
//   parent. When the parent has exited it reaps the registry: a prefix is freed
//   (and its segments unlinked) only if no other holder of it is alive, so the
//   tracker never removes what the rest of the job still uses (Python's
//   resource_tracker does). It opens the registry without creating it: a
//   registry a cleanup removed meanwhile stays removed, and a cleanup that
//   ran beside its reap leaves nothing behind either (registry.h).
// - The tracker exits right after; it never outlives its parent by more than
//   that reap. Call start() before creating threads.
// - Destroying the handle (normal exit) stops the tracker, in the process that
//   started it only. A forked child (a DataLoader worker) inherits a copy whose
//   destruction does nothing: the tracker keeps watching its parent, whose
//   later death (SIGKILL included) is still reaped.
// - The tracker is signalled through a pidfd, never by pid: if it died and was
//   reaped behind our back (SIGCHLD ignored, another reaper) and its pid went
//   to another process, destroying the handle signals nobody.
// - Open fds: one (the tracker's pidfd) while the handle lives.
#pragma once

#include <sys/types.h>

#include <utility>

#include "shmcoord/error.h"
#include "shmcoord/namespace.h"

namespace shmcoord {

class ResourceTracker {
 public:
  static Result<ResourceTracker> start(const Namespace& ns);
  ResourceTracker(ResourceTracker&& o) noexcept
      : pid_(std::exchange(o.pid_, -1)), pidfd_(std::exchange(o.pidfd_, -1)), owner_(o.owner_) {}
  ResourceTracker& operator=(ResourceTracker&&) = delete;
  ~ResourceTracker();
  pid_t pid() const { return pid_; }

 private:
  ResourceTracker(pid_t pid, int pidfd, pid_t owner) : pid_(pid), pidfd_(pidfd), owner_(owner) {}
  pid_t pid_ = -1;
  int pidfd_ = -1;   // the tracker's pidfd
  pid_t owner_ = -1; // the process that started it
};

}  // namespace shmcoord
