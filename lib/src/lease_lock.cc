#include "lease_lock.h"

#include <algorithm>
#include <atomic>

#include "lease.h"
#include "shmcoord/failpoint.h"
#include "sys.h"

namespace shmcoord {
namespace {

constexpr auto kFirstSlice = std::chrono::milliseconds(1);
constexpr auto kMaxSlice = std::chrono::milliseconds(10);

}  // namespace

Result<LockGuard> LockGuard::lock(records::LockWord* w, const Namespace& ns, std::uint64_t me, Deadline d,
                                  const std::string& what) {
  if (int e = failpoint::check("mutex/lock")) return std::unexpected(sys_error("lock", what, e));
  if (me == 0) return fail(Code::kInvalidArgument, "locking " + what + " without a lease");
  std::atomic_ref<std::uint64_t> owner(w->owner);
  std::uint64_t expected = 0;
  if (owner.compare_exchange_strong(expected, me, std::memory_order_seq_cst)) return LockGuard(w, me, 0);
  std::atomic_ref<std::uint32_t> seq(w->seq), waiters(w->waiters);
  std::chrono::nanoseconds slice = kFirstSlice;
  for (bool first = true;; first = false) {
    const std::uint32_t seen = seq.load(std::memory_order_seq_cst);
    std::uint64_t o = owner.load(std::memory_order_seq_cst);
    if (o == 0) {
      if (owner.compare_exchange_strong(o, me, std::memory_order_seq_cst)) return LockGuard(w, me, 0);
      continue;
    }
    // Held for a whole slice (or more): is the holder still alive? Our own
    // lease holding it is another thread of ours: alive.
    if (!first && o != me) {
      bool alive;
      {
        LeaseProbe probe(ns);
        alive = probe.alive_id(o);
      }
      if (!alive) {
        if (owner.compare_exchange_strong(o, me, std::memory_order_seq_cst)) {
          seq.fetch_add(1, std::memory_order_seq_cst);
          return LockGuard(w, me, o);
        }
        continue;  // unlocked or taken over meanwhile: look again
      }
    }
    if (d.passed()) return fail(Code::kTimeout, "timed out locking " + what + " (its holder is alive: stopped or stuck)");
    waiters.fetch_add(1, std::memory_order_seq_cst);
    if (owner.load(std::memory_order_seq_cst) == o) sys::futex_wait_for(&w->seq, seen, std::min(slice, d.left()));
    waiters.fetch_sub(1, std::memory_order_seq_cst);
    slice = std::min<std::chrono::nanoseconds>(slice * 2, kMaxSlice);
  }
}

void LockGuard::unlock() {
  if (!w_) return;
  std::uint64_t mine = me_;
  // Fails only if we were taken for dead (our lease dropped while holding):
  // then the lock is someone else's now and stays so.
  std::atomic_ref<std::uint64_t>(w_->owner).compare_exchange_strong(mine, 0, std::memory_order_seq_cst);
  std::atomic_ref<std::uint32_t>(w_->seq).fetch_add(1, std::memory_order_seq_cst);
  if (std::atomic_ref<std::uint32_t>(w_->waiters).load(std::memory_order_seq_cst) != 0) sys::futex_wake_all(&w_->seq);
  w_ = nullptr;
}

}  // namespace shmcoord
