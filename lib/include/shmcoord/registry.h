// The prefix registry: one segment per namespace ("<root>registry") holding a
// table of prefixes 0..255, guarded by a robust process-shared mutex.
//
// Process contract:
// - The ranks of a job on one node share a job key. The first to arrive claims
//   the lowest free prefix and records the job's local dirs; later ranks find
//   the job by key. acquire() returns only once all local_world_size ranks have
//   joined with the same dirs, so ranks never disagree: either all get the same
//   prefix or all get the same error (the slot is "poisoned" with the reason).
// - Claiming happens under the mutex, so two jobs never share a prefix, and a
//   half-written claim is never visible (a claim interrupted by its writer's
//   death is discarded by the next locker).
// - A prefix is held while any holder of it is alive (pid + start time; a
//   stopped process is alive). When every holder is dead or released, the next
//   registry operation frees it and removes the job's segments and lock files
//   ("<root><prefix:06>_*"), so dead jobs never block anyone and prefixes never
//   climb.
// - A local dir is exclusive when either its registration or the request has a
//   remote: the request fails with Code::kInUse naming the dir, the job and pid.
// - Open fds: at most two during a call, one (the registry) afterwards.
// - Every wait is bounded by JobSpec::timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shmcoord/error.h"
#include "shmcoord/namespace.h"
#include "shmcoord/process.h"

namespace shmcoord {

struct LocalDir {
  std::string path;
  bool has_remote = false;
  bool operator==(const LocalDir&) const = default;
};

struct JobSpec {
  std::string job_key;        // shared by the job's ranks on this node; see default_job_key()
  int local_rank = -1;        // 0..local_world_size-1
  int local_world_size = 0;   // 0 means "the launcher did not say": an error, never a guess
  std::vector<LocalDir> dirs;
  std::chrono::milliseconds timeout{30000};
};

// SHMCOORD_JOB_KEY, else TORCHELASTIC_RUN_ID, else "ppid:<ppid>:<start time>"
// (ranks started by one launcher share a parent).
std::string default_job_key();

struct Lease {
  int prefix = -1;
  std::uint64_t serial = 0;  // distinguishes this claim from later reuse of the prefix
  int local_rank = -1;
};

struct SlotInfo {
  int prefix = -1;
  std::string job_key;
  std::uint64_t serial = 0;
  int local_world_size = 0;
  int attached = 0;
  bool poisoned = false;
  std::string reason;
  std::vector<LocalDir> dirs;
  std::vector<ProcessId> holders;  // attached (not released) holders
  bool live = false;
};

class Registry {
 public:
  // Opens (creating if `create`) the namespace's registry segment.
  static Result<Registry> open(const Namespace& ns, bool create = true,
                               std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));
  Registry(Registry&&) noexcept;
  Registry& operator=(Registry&&) noexcept;
  ~Registry();

  Result<Lease> acquire(const JobSpec& spec);
  // Idempotent. The last live holder's release frees the prefix and removes its segments.
  Status release(const Lease& lease);
  // Frees every prefix whose holders are all dead (used by the resource tracker
  // and cleanup). Returns the names it removed.
  Result<std::vector<std::string>> reap(std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));
  Result<std::vector<SlotInfo>> snapshot(std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));

  const Namespace& ns() const;

  struct Impl;

 private:
  explicit Registry(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace shmcoord
