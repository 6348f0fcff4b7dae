// The kernel lease behind every liveness decision shmcoord makes.
//
// Process contract:
// - A process that holds anything in a namespace (a registry rank, a barrier
//   seat) holds a POSIX record lock on its own 8-byte cell of the shm object
//   "/<root>leases" and has written a random 64-bit token into that cell.
//   Records name their owner by (cell, token), plus pid, start time and pid
//   namespace for messages.
// - An owner is alive exactly while the kernel reports its cell locked by
//   another process and the cell still holds its token. The kernel drops the
//   lock when the process dies (SIGKILL included); a record lock is not
//   inherited across fork, so a forgotten child with our fds keeps nothing
//   alive; and since no pid is involved, the answer is the same from every pid
//   namespace that shares /dev/shm (containers with --ipc=host). A stopped
//   (SIGSTOP) process keeps its lock: it is alive.
// - Closing any fd of a file drops the process's record locks on it, so this
//   module owns the only fd a process ever has on its leases file: opened by
//   the first holding, closed with the last (one fd while anything is held),
//   and every access goes through one process-wide mutex.
// - The file is removed (remove_leases_if_unused) only by a process that holds
//   no lease and can lock the whole file, i.e. when nobody holds a lease; a
//   process taking a lease re-checks after locking its cell that the name
//   still refers to the file it locked. A taker that finds the file locked
//   whole waits for the remover (up to its own deadline) instead of taking
//   the locked cells for "all held".
// - Fork: a child holds none of its parent's leases (record locks are not
//   inherited). Right after fork() the child closes the inherited lease fds
//   (which drops only its own locks: none) and starts without leases, so an
//   inherited handle can never make the child look like its parent, and a
//   child that takes a lease takes its own cell and token. fork_generation()
//   changes in the child, so handles can tell they were inherited.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "records.h"
#include "segment.h"
#include "shmcoord/error.h"
#include "shmcoord/namespace.h"
#include "shmcoord/process.h"

namespace shmcoord {

inline constexpr const char* kLeasesSuffix = "leases";
inline constexpr std::uint32_t kLeaseCells = 16384;  // concurrent lease holders per namespace

// Bumped in every child right after fork(): a handle that recorded another
// value was inherited, and must not act for the process that made it.
extern std::atomic<std::uint64_t> g_fork_generation;
inline std::uint64_t fork_generation() { return g_fork_generation.load(std::memory_order_relaxed); }

// The identity a lock records for its holder: the lease's cell and 48 bits
// of its token, in one word that a compare-and-swap can take (lease_lock.h).
// Never 0. Unique among live leases (one cell per live holder), and a later
// holder of the same cell matches only with probability 2^-48.
inline std::uint64_t lock_id(const records::Owner& o) {
  return (static_cast<std::uint64_t>(o.lease_cell) + 1) << 48 | (o.lease_token & ((std::uint64_t{1} << 48) - 1));
}

// One counted reference to this process's lease in a namespace.
class LeaseRef {
 public:
  // kTimeout when the leases file stays locked whole (a cleanup removing it)
  // until `d`; kExhausted when every cell is held by a live process.
  static Result<LeaseRef> take(const Namespace& ns, Deadline d);
  LeaseRef() = default;
  LeaseRef(LeaseRef&& o) noexcept;
  LeaseRef& operator=(LeaseRef&& o) noexcept;
  ~LeaseRef();
  // The holding outlives this object (e.g. a prefix returned by acquire):
  // the reference stays counted until drop(ns) is called for it.
  void keep() { held_ = false; }
  static void drop(const std::string& root);
  // This process's owner record in a namespace; lease_token 0 if it holds no lease.
  static records::Owner current(const std::string& root);
  // This process as an owner record: pid, lease cell and token, start time, pid namespace.
  const records::Owner& owner() const { return owner_; }

 private:
  std::string root_;
  records::Owner owner_{};
  bool held_ = false;
};

// Judges owners. Holds the process-wide lease mutex for its lifetime and uses
// one fd throughout: this process's own, or one opened for the probe. Never
// take a LeaseRef while a probe is alive in the same thread.
class LeaseProbe {
 public:
  explicit LeaseProbe(const Namespace& ns);
  ~LeaseProbe();
  LeaseProbe(const LeaseProbe&) = delete;
  LeaseProbe& operator=(const LeaseProbe&) = delete;

  // False only when the kernel says the owner's lease is gone; any doubt
  // (an I/O error, a file we cannot open) answers alive: never delete on doubt.
  bool alive(const records::Owner& o);
  // The same for a lock holder named by lock_id().
  bool alive_id(std::uint64_t id);
  // alive() refined to kStopped when the owner shares our pid namespace and
  // /proc shows it stopped (messages only; costs a /proc read).
  Liveness liveness(const records::Owner& o);
  // The owner is this process (its current lease).
  bool is_self(const records::Owner& o) const;

 private:
  std::unique_lock<std::mutex> lock_;
  // Cell `cell` locked by another process and holding a token that `match` accepts.
  template <typename Match>
  bool cell_alive(std::uint32_t cell, Match match);

  records::Owner self_{};
  int fd_ = -1;
  bool own_fd_ = false;   // opened for this probe, closed by it
  bool missing_ = false;  // no leases file: nobody holds a lease
};

// The same holding process: the same lease (cell and token).
inline bool same_owner(const records::Owner& a, const records::Owner& b) {
  return a.lease_token != 0 && a.lease_token == b.lease_token && a.lease_cell == b.lease_cell;
}

// "pid 12" or "pid 12 in another pid namespace": who an owner is, for messages.
std::string describe_owner(const records::Owner& o);

// Removes "/<root>leases" if no process holds a lease in it. The caller holds
// the init lock. Returns "" if removed or absent, else why it stays.
std::string remove_leases_if_unused(const Namespace& ns);

// The last user out of a namespace leaves none of its own objects: once
// nothing else of it is left (list_owned() empty) and no process holds a
// lease, the leases file goes, then the init lock. Called by the last barrier
// detacher, and by a handle opened without create once its lease is dropped:
// a cleanup that ran meanwhile had to keep the leases file (and init lock) for
// that lease, or removed them before the handle's lease made a new file, and
// nobody else would remove them. With `held`, under that init lock; true if
// nothing of the namespace is left. Without, the init lock is taken (by `d`)
// only if there is something to remove, and one it created goes again.
bool remove_namespace_if_unused(const Namespace& ns, InitLock& held);
void remove_namespace_if_unused(const Namespace& ns, Deadline d);

}  // namespace shmcoord
