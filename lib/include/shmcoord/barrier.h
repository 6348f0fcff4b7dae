// A reusable N-process barrier in one shm segment ("<root><suffix>"), e.g. the
// suffix Namespace::prefix_suffix(prefix, "barrier") for a job's barrier.
//
// Process contract:
// - Seats: the barrier has exactly num_procs seats, and a round completes when
//   every seat has entered it (arrivals are counted per seat, so nobody's
//   arrival stands in for anyone else's). A participant leaves round r only
//   after all num_procs participants entered round r. Waiting is a futex wait,
//   woken the moment the round completes; there is no fixed polling tick.
// - A failed wait() did not happen: before it returns an error it takes its
//   arrival back (one compare-and-swap on the round word), so no round ever
//   completes on the arrival of a wait that failed, and a caller that retries
//   (after a timeout, a lock error, anything but a break) enters the round
//   afresh. If the round completed while it was failing (every seat had
//   arrived), the wait succeeds instead. Errors that break the barrier
//   (deaths, departures, deadlines, disagreements) fail every later wait too.
// - attach() takes an empty seat (a late joiner simply takes its seat, also
//   mid-round). A replacement is refused: while a participant that died
//   holds its seat and a live one remains, attach() fails with Code::kBroken
//   naming it - also when an empty seat is left, since the dead one's arrival
//   in the current round still counts and a newcomer's would stand for one
//   process too many (a replacement come before the last of its peers would
//   release the round without that peer) - and a departed participant's seat can be taken only between
//   rounds (while nobody has entered the current round), else Code::kBroken
//   too. A refused attach changes nothing for the others: the dead participant
//   breaks the barrier at the round it misses, as below.
// - Attaching never resets a barrier that has a live participant. A barrier
//   whose participants are all dead or gone is stale and is reset by the next
//   attach — unless it belongs to the attacher's own holding
//   (BarrierOptions::claim, the job's Lease::serial, equal and nonzero): then
//   the dead are the job's own peers (one killed right after attaching, before
//   anyone else arrived), so the newcomer takes an empty seat and the barrier
//   breaks, naming the dead, at the round they miss. Without a claim a peer
//   that died before the others attached is indistinguishable from a previous
//   user's leftovers, and the others wait for its seat until their deadline.
//   Live participants of another claim are two holdings of one prefix: the
//   attach is refused (Code::kMismatch) and changes nothing. A barrier with no
//   seat used (new, or a reset cut short) always starts afresh.
// - Liveness is each participant's kernel lease (see registry.h): right across
//   pid namespaces that share /dev/shm, and not inherited by a forked child, so
//   a forgotten child holding our fds never keeps a dead participant "alive".
// - A participant that dies (SIGKILL included) without having entered the
//   current round, or dies holding the barrier's lock while seated, breaks the
//   barrier: every survivor's wait() fails with Code::kBroken naming it,
//   within `liveness_interval` (100 ms by default) of the death. One that dies
//   after entering a round (even as its releaser, before releasing it) does
//   not hold that round up: everyone entered it, so a survivor releases it,
//   and the round it then misses breaks. A participant that detaches while
//   others wait for it breaks it likewise. Anyone else who dies holding the
//   lock (an attacher before its seat is written, one that would have been
//   refused, a cleanup judging the barrier) breaks nothing.
// - The lock is a lease lock (lib/src/lease_lock.h), not a robust pthread
//   mutex: its holder is a lease, so a pid twin of the holder in another pid
//   namespace dying while blocked on it cannot make the kernel hand it over.
// - A stopped (SIGSTOP) participant is alive: the others wait until their
//   deadline, then the barrier breaks with Code::kTimeout naming who is missing.
//   A waiter never blocks on the barrier's lock for longer than a liveness
//   interval at a time, so a stopped lock holder delays its checks, never the
//   end of a round that completed; if the lock stays held past its deadline,
//   its wait fails with Code::kTimeout without breaking the barrier.
// - Disagreeing process counts are Code::kMismatch for the caller and break the
//   barrier for everyone, with the reason.
// - Fork: a handle is its attaching process's. A forked child (a DataLoader
//   worker) that inherits a copy holds no seat: wait() and detach() on the copy
//   fail with Code::kInvalidArgument naming the attaching pid, and destroying
//   the copy (the child's exit) only unmaps it. A child that wants to take
//   part attaches a seat of its own (with a lease of its own).
// - Options are checked at attach(): a negative timeout or a liveness interval
//   that is not positive is Code::kInvalidArgument. Timeouts saturate:
//   milliseconds::max() is no deadline. The suffix is Namespace::valid_suffix()
//   (never "registry", "leases" or a name with a '.'), else kInvalidArgument.
// - The last participant to detach unlinks the segment (only if the name still
//   refers to it), taking the init lock for up to 2 s; one that leaves others
//   behind never waits for the init lock. A holder that dies leaves it for the
//   next attach or cleanup.
// - One thread at a time per handle. Open fds: none of its own; the process's
//   lease fd while attached.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "shmcoord/error.h"
#include "shmcoord/namespace.h"

namespace shmcoord {

struct BarrierOptions {
  std::chrono::milliseconds timeout{60000};           // per wait() and for attach; >= 0, max(): none
  std::chrono::milliseconds liveness_interval{100};   // death detection bound; > 0
  // The holding the barrier belongs to: the Lease::serial of the prefix it is
  // named after (every rank of a job has the same). 0: unknown (see above).
  std::uint64_t claim = 0;
};

class Barrier {
 public:
  static Result<Barrier> attach(const Namespace& ns, std::string suffix, int num_procs, BarrierOptions opt = {});
  Barrier(Barrier&&) noexcept;
  Barrier& operator=(Barrier&&) noexcept;
  ~Barrier();  // detach(), in the attaching process only

  // One round. Returns the round number that completed.
  Result<std::uint32_t> wait();
  Status detach();

  int slot() const;
  const std::string& name() const;

  struct Impl;

 private:
  explicit Barrier(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace shmcoord
