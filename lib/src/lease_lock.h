// A lock in shared memory whose holder is named by its kernel lease (lease.h)
// instead of a thread id. It replaces the robust process-shared pthread mutex
// the registry and barriers used, for one reason: pid namespaces.
//
// The kernel's robust-futex exit handling marks a robust mutex owner-died when
// a thread dies *blocked* on it (its list_op_pending) if the owner tid in the
// futex word equals the dying thread's tid in its own pid namespace. Containers
// that share /dev/shm reuse tids (every one has a pid 2), so a pid twin of the
// holder dying in the queue made the kernel hand a held lock to the next locker
// (two jobs granted one prefix). A lease, unlike a tid, is unique across every
// namespace that shares the leases file, and its death is the kernel's record
// lock going away, which nothing but the holder's own exit can cause.
//
// Process contract:
// - Mutual exclusion: taking the lock is one compare-and-swap of `owner` from
//   0 to the locker's lock_id(); a holder that is alive (running or stopped)
//   keeps it until it unlocks. Holders are processes, so two threads of one
//   process serialise too (one waits while `owner` names its own lease).
// - Death: a waiter that finds the lock held for longer than a slice (1 ms,
//   doubling to 10 ms) asks the kernel whether the holder's lease is alive;
//   if it is gone, the waiter takes the lock over with one compare-and-swap
//   from the dead holder's id and is told (owner_died(), dead_owner()), so it
//   repairs what the dead holder may have left half-written. A dead holder is
//   therefore detected within about 10 ms; a stopped one is waited for.
// - Nothing but a lease decides: no tid, no pid. A process in another pid
//   namespace is judged the same as one in ours.
// - Fork: the lock belongs to the lease, which a child does not inherit; a
//   child locks with its own lease.
// - Waiting is a futex wait on `seq`, bumped by every unlock; an unlock wakes
//   only when someone waits. No fd of its own (a liveness check uses the
//   process's lease fd, or opens the leases file for the check).
// - The locker must hold a lease in the namespace (take one with LeaseRef),
//   and must not hold a LeaseProbe (which holds the process's lease mutex).
#pragma once

#include <cstdint>
#include <string>

#include "records.h"
#include "segment.h"
#include "shmcoord/error.h"
#include "shmcoord/namespace.h"

namespace shmcoord {

class LockGuard {
 public:
  // Locks `w` for `me` (a lock_id() of this process's lease in `ns`) before
  // `d`. kTimeout names `what` and says that its holder is alive.
  static Result<LockGuard> lock(records::LockWord* w, const Namespace& ns, std::uint64_t me, Deadline d,
                                const std::string& what);
  LockGuard(LockGuard&& o) noexcept : w_(o.w_), me_(o.me_), dead_(o.dead_) { o.w_ = nullptr; }
  LockGuard& operator=(LockGuard&&) = delete;
  ~LockGuard() { unlock(); }
  // The lock was taken over from a holder whose lease is gone.
  bool owner_died() const { return dead_ != 0; }
  // That holder's lock_id() (0 if none).
  std::uint64_t dead_owner() const { return dead_; }
  void unlock();

 private:
  LockGuard(records::LockWord* w, std::uint64_t me, std::uint64_t dead) : w_(w), me_(me), dead_(dead) {}
  records::LockWord* w_;
  std::uint64_t me_;
  std::uint64_t dead_;
};

}  // namespace shmcoord
