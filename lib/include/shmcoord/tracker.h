// ResourceTracker: a watcher process that releases this process's registry
// holdings when it dies, by any signal including SIGKILL.
//
// Process contract:
// - start() forks a small child that closes every inherited fd (so it can
//   never keep a lock or segment of ours alive), then waits on a pidfd of its
//   parent. When the parent has exited it reaps the registry: a prefix is freed
//   (and its segments unlinked) only if no other holder of it is alive, so the
//   tracker never removes what the rest of the job still uses (Python's
//   resource_tracker does).
// - The tracker exits right after; it never outlives its parent by more than
//   that reap. Call start() before creating threads.
// - Destroying the handle (normal exit) stops the tracker.
#pragma once

#include <sys/types.h>

#include "shmcoord/error.h"
#include "shmcoord/namespace.h"

namespace shmcoord {

class ResourceTracker {
 public:
  static Result<ResourceTracker> start(const Namespace& ns);
  ResourceTracker(ResourceTracker&& o) noexcept : pid_(o.pid_) { o.pid_ = -1; }
  ResourceTracker& operator=(ResourceTracker&&) = delete;
  ~ResourceTracker();
  pid_t pid() const { return pid_; }

 private:
  explicit ResourceTracker(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
};

}  // namespace shmcoord
