// A reusable N-process barrier in one shm segment ("<root><suffix>"), e.g. the
// suffix Namespace::prefix_suffix(prefix, "barrier") for a job's barrier.
//
// Process contract:
// - Seats: the barrier has exactly num_procs seats, and a round completes when
//   every seat has entered it (arrivals are counted per seat, so nobody's
//   arrival stands in for anyone else's). A participant leaves round r only
//   after all num_procs participants entered round r. Waiting is a futex wait,
//   woken the moment the round completes; there is no fixed polling tick.
// - attach() takes an empty seat (a late joiner simply takes its seat, also
//   mid-round). A replacement is refused: when every seat is taken and one
//   belongs to a participant that died, attach() fails with Code::kBroken
//   naming it, and a departed participant's seat can be taken only between
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
//   attach is refused (Code::kMismatch) and changes nothing.
// - Liveness is each participant's kernel lease (see registry.h): right across
//   pid namespaces that share /dev/shm, and not inherited by a forked child, so
//   a forgotten child holding our fds never keeps a dead participant "alive".
// - A participant that dies (SIGKILL included) without having entered the
//   current round, or dies holding the barrier's lock, breaks the barrier:
//   every survivor's wait() fails with Code::kBroken naming it, within
//   `liveness_interval` (100 ms by default) of the death. A participant that
//   detaches while others wait for it breaks it likewise.
// - A stopped (SIGSTOP) participant is alive: the others wait until their
//   deadline, then the barrier breaks with Code::kTimeout naming who is missing.
//   A waiter never blocks on the barrier's lock for longer than a liveness
//   interval at a time, so a stopped lock holder delays its checks, never the
//   end of a round that completed.
// - Disagreeing process counts are Code::kMismatch for the caller and break the
//   barrier for everyone, with the reason.
// - The last participant to detach unlinks the segment (only if the name still
//   refers to it). A holder that dies leaves it for the next attach or cleanup.
// - Open fds: none of its own; the process's lease fd while attached.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "shmcoord/error.h"
#include "shmcoord/namespace.h"

namespace shmcoord {

struct BarrierOptions {
  std::chrono::milliseconds timeout{60000};           // per wait() and for attach
  std::chrono::milliseconds liveness_interval{100};   // death detection bound
  // The holding the barrier belongs to: the Lease::serial of the prefix it is
  // named after (every rank of a job has the same). 0: unknown (see above).
  std::uint64_t claim = 0;
};

class Barrier {
 public:
  static Result<Barrier> attach(const Namespace& ns, std::string suffix, int num_procs, BarrierOptions opt = {});
  Barrier(Barrier&&) noexcept;
  Barrier& operator=(Barrier&&) noexcept;
  ~Barrier();  // detach()

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
