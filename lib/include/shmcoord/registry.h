// The prefix registry: one segment per namespace ("<root>registry") holding a
// table of prefixes 0..255, guarded by a lease lock (lib/src/lease_lock.h).
//
// Process contract:
// - The ranks of a job on one node share a job key. The first to arrive claims
//   the lowest free prefix and records the job's local dirs; later ranks find
//   the job by key. acquire() returns only once all local_world_size ranks have
//   joined with the same dirs, so ranks never disagree: either all get the same
//   prefix or all get the same error. The outcome is decided once, by one
//   compare-and-swap on the slot (joined; failed with a reason, under the lock;
//   or withdrawn by a rank that could not get the lock before its deadline), so
//   a rank whose lock fails never leaves its peers to succeed without it.
// - One process may hold several prefixes, one per dataset: a second acquire
//   with the same key and local rank, by a process that already holds that
//   rank, claims another prefix (its other ranks do the same, in the same
//   order), so train and val never share a prefix and releasing one never frees
//   the other. Two datasets over one local dir with a remote get Code::kInUse
//   ("Reused local directory ... this process"); ranks that really disagree
//   on dirs still all get "ranks disagree on local dirs".
// - Claiming happens under the registry lock, so two jobs never share a
//   prefix, and a half-written claim or join is never visible (a writer that
//   dies holding the lock is repaired by the next locker). The lock is a lease
//   lock (lib/src/lease_lock.h): its holder is named by its lease, not by a
//   tid, so a pid twin of the holder in another pid namespace that dies
//   blocked on it cannot make the kernel hand it over (a robust pthread mutex
//   did: the kernel compares namespace-local tids), and a holder's death is
//   seen within ~10 ms by whoever waits.
// - Liveness is a kernel lease (lib/src/lease.h): a process holding a prefix
//   holds a record lock on its own cell of the shm object "<root>leases", which
//   the kernel drops when the process dies (SIGKILL included) and a forked child
//   does not inherit. It never depends on seeing the owner's pid, so jobs in pid
//   namespaces that share /dev/shm (containers with --ipc=host) see each other
//   alive. A stopped (SIGSTOP) holder is alive. pid and start time are kept for
//   messages only.
// - A prefix is held while any holder of it is alive. A dead job's prefix is
//   freed, and its segments and lock files ("<root><prefix:06>_*") removed, by
//   the next acquire it stands in the way of (same job key, a conflicting dir;
//   every slot is judged at least every 20 ms of acquires), by its holders'
//   resource trackers (reap), or by clean_stale, so dead jobs never block anyone
//   and prefixes never climb. A prefix is granted only once nothing of a
//   previous user is left under it.
// - A local dir is exclusive when either its registration or the request has a
//   remote: the request fails with Code::kInUse naming the dir, the job and pid.
// - A prefix is granted only over names someone looked for: when the names
//   under a prefix cannot be listed (EMFILE on opendir, a lock dir we may not
//   read), acquire fails with that error, a dead job's slot is not freed, and
//   release keeps the freed slot for a later sweep (reporting the error).
//   Names of another shmcoord layout version's registry or barrier are never
//   removed; a prefix with such a name left under it is passed over.
// - Fork: a Registry handle inherited by a forked child acts for the child:
//   its acquire takes the child's own lease (the parent's is not inherited).
//   A Lease is its acquiring process's: release() of a parent's Lease in a
//   child is Code::kInvalidArgument naming the acquiring pid, and changes
//   nothing. Destroying a handle only unmaps it.
// - Serials start at a random value in every registry, so a registry rebuilt
//   after a cleanup never repeats an old holding's claim (BarrierOptions::claim).
// - Open fds: one (the lease) while the process holds anything in the
//   namespace, none otherwise; at most three during a call (the lease
//   included), also when a zero-length registry is rebuilt.
// - Every wait is bounded by JobSpec::timeout (plus 100 ms to fail the job for
//   every rank). Timeouts saturate: milliseconds::max() is no deadline; a
//   negative one is Code::kInvalidArgument. Taking the lease waits for a
//   cleanup that holds the leases file locked while removing it, up to the
//   same deadline. reap() and snapshot() take a lease of their own for the
//   lock; on a handle opened without `create` whose registry a cleanup
//   removed, they return nothing and create nothing. Such a handle (a
//   resource tracker's) also leaves nothing once its lease is dropped: a
//   cleanup that ran meanwhile had to keep the leases file and init lock for
//   that lease (or removed them before the lease made a new leases file), so
//   if nothing else of the namespace is left, the handle removes them.
#pragma once

#include <sys/types.h>

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

// SHMCOORD_JOB_KEY, else TORCHELASTIC_RUN_ID ("torchelastic:<id>"; torchrun's
// default id "none" is the same for every job launched without --standalone or
// --rdzv-id, so then "torchelastic:none@<MASTER_ADDR>:<MASTER_PORT>", the job's
// own rendezvous endpoint), else "ppid:<ppid>:<start time>" (ranks started by
// one launcher share a parent).
std::string default_job_key();

struct Lease {
  int prefix = -1;
  std::uint64_t serial = 0;  // distinguishes this claim from later reuse of the prefix
  int local_rank = -1;
  pid_t pid = 0;             // the process that acquired it (0: unknown); only it may release it
  // What this acquire removed under the registry lock before it was granted:
  // names a dead job or a previous user left (a sweep, a dead run of this
  // job, a free prefix's leftovers). An audit trail for whoever must show
  // that a dead job's resources were gone before its prefix was reused;
  // nothing in the library reads it.
  std::vector<std::string> removed;
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
  std::vector<ProcessId> holders;  // attached (not released) holders, pids of their own namespaces
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

  // One holding: release it once. See the contract for a second dataset.
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
