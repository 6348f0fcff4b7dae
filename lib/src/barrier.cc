#include "shmcoord/barrier.h"

#include <atomic>
#include <cstring>

#include "names.h"
#include "records.h"
#include "robust_mutex.h"
#include "segment.h"
#include "shmcoord/failpoint.h"
#include "shmcoord/process.h"

namespace shmcoord {
namespace {

using records::BarrierLayout;
using records::Participant;

using sys::load;
using sys::store;

SegmentSpec barrier_spec(std::string suffix, int num_procs) {
  SegmentSpec s;
  s.suffix = std::move(suffix);
  s.size = sizeof(BarrierLayout);
  s.fp_area = "barrier";
  s.init = [num_procs](void* p) {
    auto* b = static_cast<BarrierLayout*>(p);
    b->version = records::kVersion;
    b->layout_size = sizeof(BarrierLayout);
    b->num_procs = static_cast<std::uint32_t>(num_procs);
    init_robust_mutex(&b->mutex);
    std::atomic_ref<std::uint64_t>(b->magic).store(records::kBarrierMagic, std::memory_order_release);
  };
  s.validate = [](const void* p, std::size_t n) { return records::validate_barrier(p, n); };
  s.retired = [](const void* p) { return load(static_cast<const BarrierLayout*>(p)->retired) != 0; };
  return s;
}

ProcessId part_id(const Participant& q) { return ProcessId{q.pid, q.start_time}; }

std::string who(const Participant& q, int slot) {
  return "participant " + std::to_string(slot) + " (pid " + std::to_string(q.pid) + ")";
}

}  // namespace

struct Barrier::Impl {
  Namespace ns;
  BarrierOptions opt;
  Segment seg;
  BarrierLayout* b = nullptr;
  int slot = -1;
  bool detached = false;

  Error break_locked(Code code, const std::string& why) {
    if (!b->broken) {
      std::size_t n = std::min(why.size(), records::kReasonMax - 1);
      std::memcpy(b->reason, why.data(), n);
      b->reason[n] = '\0';
      store(b->broken, static_cast<std::uint32_t>(code));
      std::atomic_ref<std::uint32_t>(b->generation).fetch_add(0, std::memory_order_acq_rel);
      sys::futex_wake_all(&b->generation);
    }
    return make_error(static_cast<Code>(b->broken), std::string("barrier ") + seg.name() + " is broken: " + b->reason);
  }

  Result<RobustGuard> lock(Deadline d) {
    auto g = RobustGuard::lock(&b->mutex, d, seg.name());
    if (g && g->owner_died()) {
      std::string dead;
      for (int i = 0; i < records::kMaxRanks; ++i) {
        const Participant& q = b->parts[i];
        if (q.state == records::kPartAttached && !is_alive(part_id(q))) dead = who(q, i);
      }
      break_locked(Code::kBroken, (dead.empty() ? std::string("a participant") : dead) + " died holding the barrier lock");
    }
    return g;
  }

  // Under the lock: who blocks round `gen`, and are any of them dead or gone?
  // Arrivals are lock-free, so arrival marks are read atomically.
  std::string missing_dead(std::uint32_t gen, std::string* all_missing) {
    std::string dead, dead_arrived;
    int attached = 0, arrived = 0;
    for (int i = 0; i < records::kMaxRanks; ++i) {
      const Participant& q = b->parts[i];
      if (q.state == records::kPartEmpty) continue;
      if (q.state == records::kPartAttached) ++attached;
      if (load(q.arrived_gen) == gen + 1) {
        ++arrived;
        if (dead_arrived.empty() && q.state == records::kPartAttached && !is_alive(part_id(q))) dead_arrived = who(q, i);
        continue;
      }
      if (q.state == records::kPartLeft) {
        if (dead.empty()) dead = who(q, i) + " detached before entering round " + std::to_string(gen);
        continue;
      }
      auto l = liveness(part_id(q));
      if (l == Liveness::kDead) {
        if (dead.empty()) dead = who(q, i) + " died before entering round " + std::to_string(gen);
      } else if (all_missing) {
        *all_missing += (all_missing->empty() ? "" : ", ") + who(q, i) + (l == Liveness::kStopped ? " [stopped]" : "");
      }
    }
    if (all_missing && attached < static_cast<int>(b->num_procs)) {
      *all_missing += (all_missing->empty() ? "" : ", ") + std::to_string(b->num_procs - attached) + " never attached";
    }
    // Everyone arrived yet the round is not released: its releaser died.
    if (dead.empty() && arrived >= static_cast<int>(b->num_procs) && !dead_arrived.empty()) {
      dead = dead_arrived + " died releasing round " + std::to_string(gen);
    }
    return dead;
  }
};

Barrier::Barrier(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Barrier::Barrier(Barrier&&) noexcept = default;
Barrier& Barrier::operator=(Barrier&& o) noexcept {
  if (this != &o) {
    if (impl_) (void)detach();
    impl_ = std::move(o.impl_);
  }
  return *this;
}
Barrier::~Barrier() {
  if (impl_) (void)detach();
}
int Barrier::slot() const { return impl_->slot; }
const std::string& Barrier::name() const { return impl_->seg.name(); }

Result<Barrier> Barrier::attach(const Namespace& ns, std::string suffix, int num_procs, BarrierOptions opt) {
  if (auto v = ns.validate(); !v) return std::unexpected(v.error());
  if (num_procs < 1 || num_procs > records::kMaxRanks) {
    return fail(Code::kInvalidArgument, "barrier process count " + std::to_string(num_procs) + " outside [1, " +
                                            std::to_string(records::kMaxRanks) + "]");
  }
  const Deadline d = Deadline::after(opt.timeout);
  auto impl = std::make_unique<Impl>();
  impl->ns = ns;
  impl->opt = opt;
  const ProcessId me = self_identity();
  for (;;) {
    auto seg = Segment::open(ns, barrier_spec(suffix, num_procs), true, d);
    if (!seg) return std::unexpected(seg.error());
    impl->seg = std::move(*seg);
    impl->b = static_cast<BarrierLayout*>(impl->seg.data());
    BarrierLayout* b = impl->b;
    auto g = impl->lock(d);
    if (!g) return std::unexpected(g.error());
    if (load(b->retired)) continue;  // being unlinked by its last participant: open anew
    // Stale: nobody alive is attached (all dead or left). Start it afresh.
    bool any_live = false, any_used = false;
    for (const Participant& q : b->parts) {
      if (q.state != records::kPartEmpty) any_used = true;
      if (q.state == records::kPartAttached && is_alive(part_id(q))) any_live = true;
    }
    if (any_used && !any_live) {
      std::memset(b->parts, 0, sizeof b->parts);
      b->arrived = 0;
      b->broken = 0;
      b->reason[0] = '\0';
      b->num_procs = static_cast<std::uint32_t>(num_procs);
    }
    if (static_cast<int>(b->num_procs) != num_procs) {
      Error e = impl->break_locked(Code::kMismatch, "participants disagree on the process count: pid " +
                                                        std::to_string(me.pid) + " says " + std::to_string(num_procs) +
                                                        ", the barrier was created for " + std::to_string(b->num_procs));
      return std::unexpected(e);
    }
    if (b->broken) return std::unexpected(impl->break_locked(Code::kBroken, ""));
    int live = 0, free_slot = -1;
    for (int i = 0; i < records::kMaxRanks; ++i) {
      Participant& q = b->parts[i];
      if (q.state == records::kPartAttached && is_alive(part_id(q))) ++live;
      if (free_slot < 0 && (q.state == records::kPartEmpty || q.state == records::kPartLeft)) free_slot = i;
    }
    if (live >= num_procs || free_slot < 0) {
      return fail(Code::kMismatch, "barrier " + impl->seg.name() + " already has " + std::to_string(live) +
                                       " live participants of " + std::to_string(num_procs) + "; pid " +
                                       std::to_string(me.pid) + " is one too many");
    }
    failpoint::crash_window("crash/barrier/attach/locked");
    // A reused slot must not count as having entered the current round.
    b->parts[free_slot] = Participant{me.pid, records::kPartAttached, me.start_time, 0, 0};
    impl->slot = free_slot;
    return Barrier(std::move(impl));
  }
}

Result<std::uint32_t> Barrier::wait() {
  Impl& I = *impl_;
  if (I.detached) return fail(Code::kInvalidArgument, "wait() after detach()");
  BarrierLayout* b = I.b;
  const Deadline d = Deadline::after(I.opt.timeout);
  auto broken_error = [&]() -> Error {
    auto g = I.lock(Deadline::after(std::chrono::milliseconds(1000)));
    return I.break_locked(Code::kBroken, "");
  };
  // Fast path, no lock: a round cannot complete without our arrival, so the
  // generation read here is the round we are entering.
  const std::uint32_t gen = load(b->generation);
  if (load(b->broken)) return std::unexpected(broken_error());
  const std::uint32_t n = std::atomic_ref<std::uint32_t>(b->arrived).fetch_add(1, std::memory_order_acq_rel) + 1;
  failpoint::crash_window("crash/barrier/wait/after-enter");  // counted, not yet marked: peers see a death
  store(b->parts[I.slot].arrived_gen, gen + 1);
  if (n >= load(b->num_procs)) {
    store(b->arrived, 0);
    failpoint::crash_window("crash/barrier/wait/before-release");  // all marked, round not released
    std::atomic_ref<std::uint32_t>(b->generation).store(gen + 1, std::memory_order_release);
    sys::futex_wake_all(&b->generation);
    return gen;
  }
  failpoint::crash_window("crash/barrier/wait/before-sleep");
  for (;;) {
    auto slice = std::min<std::chrono::nanoseconds>(I.opt.liveness_interval, d.left());
    if (load(b->generation) == gen && !load(b->broken)) sys::futex_wait_for(&b->generation, gen, slice);
    if (load(b->generation) != gen) return gen;
    if (load(b->broken)) return std::unexpected(broken_error());
    // Not woken within a liveness interval: look for dead or departed
    // participants, and at the deadline. Only this slow path takes the lock.
    auto g = I.lock(d);
    if (!g) return std::unexpected(g.error());
    if (load(b->generation) != gen) return gen;
    if (load(b->broken)) return std::unexpected(I.break_locked(Code::kBroken, ""));
    std::string missing;
    std::string dead = I.missing_dead(gen, d.passed() ? &missing : nullptr);
    if (!dead.empty()) return std::unexpected(I.break_locked(Code::kBroken, dead));
    if (d.passed()) {
      return std::unexpected(I.break_locked(Code::kTimeout, "timed out after " + std::to_string(I.opt.timeout.count()) +
                                                                " ms in round " + std::to_string(gen) +
                                                                " waiting for " + missing));
    }
  }
}

Status Barrier::detach() {
  if (!impl_ || impl_->detached) return {};
  Impl& I = *impl_;
  I.detached = true;
  BarrierLayout* b = I.b;
  bool last = false;
  {
    auto g = I.lock(Deadline::after(std::chrono::milliseconds(2000)));
    if (!g) return std::unexpected(g.error());
    Participant& mine = b->parts[I.slot];
    if (part_id(mine) == self_identity()) mine.state = records::kPartLeft;
    last = true;
    for (const Participant& q : b->parts) {
      if (q.state == records::kPartAttached && is_alive(part_id(q))) last = false;
    }
    if (last) store(b->retired, 1);
    sys::futex_wake_all(&b->generation);
  }
  if (last) {
    auto lock = InitLock::acquire(I.ns, Deadline::after(std::chrono::milliseconds(2000)));
    if (!lock) return std::unexpected(lock.error());
    auto r = I.seg.unlink_if_same("shm/barrier/unlink");
    // Nothing of the namespace left: the init lock goes too (safe while we hold it).
    if (r && list_owned(I.ns).empty()) (void)lock->unlink_held();
    return r;
  }
  return {};
}

}  // namespace shmcoord
