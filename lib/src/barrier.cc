#include "shmcoord/barrier.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "clean_parts.h"
#include "lease.h"
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

const SegmentPoints kBarrierPoints{"shm/barrier/open",     "shm/barrier/create",         "shm/barrier/fstat",
                                   "shm/barrier/mmap",     "shm/barrier/ftruncate",      "shm/barrier/fallocate",
                                   "shm/barrier/unlink",   "crash/barrier/after-create", "crash/barrier/after-size"};

SegmentSpec barrier_spec(std::string suffix, int num_procs) {
  SegmentSpec s;
  s.suffix = std::move(suffix);
  s.size = sizeof(BarrierLayout);
  s.magic = records::kBarrierMagic;
  s.points = kBarrierPoints;
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

// The layout keeps 32 bits of the claim; 0 stays "unknown", so a nonzero
// serial never maps to it.
std::uint32_t claim_tag(std::uint64_t claim) {
  if (claim == 0) return 0;
  const auto t = static_cast<std::uint32_t>(claim ^ (claim >> 32));
  return t == 0 ? 1 : t;
}

std::string who(const Participant& q, int slot) {
  return "participant " + std::to_string(slot) + " (" + describe_owner(q.who) + ")";
}

// Every event a waiter must see changes `seq` before the wake, so a waiter
// between its checks and FUTEX_WAIT cannot sleep through it. The wake syscall
// is skipped when nobody waits: `waiters` is raised before FUTEX_WAIT and `seq`
// bumped before reading it, both sequentially consistent, so either the waker
// sees the waiter or the waiter's FUTEX_WAIT sees the new seq.
void wake(BarrierLayout* b) {
  std::atomic_ref<std::uint32_t>(b->seq).fetch_add(1, std::memory_order_seq_cst);
  if (std::atomic_ref<std::uint32_t>(b->waiters).load(std::memory_order_seq_cst) != 0) sys::futex_wake_all(&b->seq);
}

// How a waiter spends the moments before its futex sleep. The round usually
// completes within microseconds of our arrival; a sleep then costs a futex
// wait, a wake-up and a context switch each. While every participant can run
// at once (no more of them than CPUs), spinning sees the release first; when
// they cannot, yielding hands the CPU to the participants still to arrive, and
// a waiter that sees its round complete between yields needs no wake-up (the
// releaser skips the wake syscall when nobody sleeps). Both are bounded, so a
// slow round still ends in a futex sleep with its liveness checks.
struct WaitPlan {
  int spins, yields;
};
WaitPlan wait_plan(std::uint32_t num_procs) {
  static const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  return WaitPlan{num_procs <= cpus ? 1000 : 0, 16};
}

// Under the barrier lock: every participant alive? The first dead or departed
// one that blocks round `gen`, and (with all_missing) who is missing.
std::string missing_dead(BarrierLayout* b, LeaseProbe& probe, std::uint32_t gen, std::string* all_missing) {
  std::string dead, dead_arrived;
  int seated = 0, arrived = 0;
  const int seats = static_cast<int>(b->num_procs);
  for (int i = 0; i < seats; ++i) {
    const Participant& q = b->parts[i];
    const std::uint32_t st = load(q.state);
    if (st == records::kPartEmpty) continue;
    ++seated;
    if (load(q.arrived_gen) == gen + 1) {
      ++arrived;
      if (dead_arrived.empty() && st == records::kPartAttached && !probe.alive(q.who)) dead_arrived = who(q, i);
      continue;
    }
    if (st == records::kPartLeft) {
      if (dead.empty()) dead = who(q, i) + " detached before entering round " + std::to_string(gen);
      continue;
    }
    auto l = probe.liveness(q.who);
    if (l == Liveness::kDead) {
      if (dead.empty()) dead = who(q, i) + " died before entering round " + std::to_string(gen);
    } else if (all_missing) {
      *all_missing += (all_missing->empty() ? "" : ", ") + who(q, i) + (l == Liveness::kStopped ? " [stopped]" : "");
    }
  }
  if (all_missing && seated < seats) {
    *all_missing += (all_missing->empty() ? "" : ", ") + std::to_string(seats - seated) + " never attached";
  }
  // Everyone arrived yet the round is not released: its releaser died.
  if (dead.empty() && arrived >= seats && !dead_arrived.empty()) {
    dead = dead_arrived + " died releasing round " + std::to_string(gen);
  }
  return dead;
}

Error break_locked(BarrierLayout* b, const std::string& name, Code code, const std::string& why) {
  if (!b->broken) {
    records::copy_utf8_field(why, b->reason, records::kReasonMax);
    failpoint::crash_window("crash/barrier/break-half-written");
    store(b->broken, static_cast<std::uint32_t>(code));
    wake(b);
  }
  return make_error(static_cast<Code>(b->broken), "barrier " + name + " is broken: " + b->reason);
}

// Locks a barrier; a previous owner that died holding the lock breaks it.
Result<RobustGuard> lock_barrier(const Namespace& ns, BarrierLayout* b, const std::string& name, Deadline d) {
  auto g = RobustGuard::lock(&b->mutex, d, name);
  if (g && g->owner_died()) {
    std::string dead;
    {
      LeaseProbe probe(ns);
      for (int i = 0; i < records::kMaxRanks; ++i) {
        const Participant& q = b->parts[i];
        if (load(q.state) == records::kPartAttached && !probe.alive(q.who)) dead = who(q, i);
      }
    }
    break_locked(b, name, Code::kBroken, (dead.empty() ? std::string("a participant") : dead) + " died holding the barrier lock");
  }
  return g;
}

}  // namespace

struct Barrier::Impl {
  Namespace ns;
  BarrierOptions opt;
  Segment seg;
  BarrierLayout* b = nullptr;
  int slot = -1;
  bool detached = false;
  records::Owner me{};

  Error break_locked(Code code, const std::string& why) { return shmcoord::break_locked(b, seg.name(), code, why); }
  Result<RobustGuard> lock(Deadline d) { return lock_barrier(ns, b, seg.name(), d); }
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
  // Our liveness for as long as we hold a seat.
  auto lease = LeaseRef::take(ns);
  if (!lease) return std::unexpected(lease.error());
  auto impl = std::make_unique<Impl>();
  impl->ns = ns;
  impl->opt = opt;
  impl->me = lease->owner();
  const records::Owner& me = impl->me;
  for (;;) {
    auto seg = Segment::open(ns, barrier_spec(suffix, num_procs), true, d);
    if (!seg) return std::unexpected(seg.error());
    impl->seg = std::move(*seg);
    impl->b = static_cast<BarrierLayout*>(impl->seg.data());
    BarrierLayout* b = impl->b;
    auto g = impl->lock(d);
    if (!g) return std::unexpected(g.error());
    failpoint::crash_window("crash/barrier/attach/after-lock");
    if (load(b->retired)) continue;  // being unlinked: open anew
    LeaseProbe probe(ns);
    // Stale: nobody alive is seated (all dead or left), and it is not of our
    // own holding (whose dead are our peers). Start it afresh.
    const std::uint32_t tag = claim_tag(opt.claim), theirs = load(b->claim);
    const bool ours = tag != 0 && theirs == tag;
    bool any_used = false;
    std::string live;  // the first live participant, if any
    for (int i = 0; i < records::kMaxRanks; ++i) {
      const Participant& q = b->parts[i];
      const std::uint32_t st = load(q.state);
      if (st != records::kPartEmpty) any_used = true;
      if (live.empty() && st == records::kPartAttached && probe.alive(q.who)) live = who(q, i);
    }
    if (!live.empty() && tag != 0 && theirs != 0 && !ours) {
      return fail(Code::kMismatch, "barrier " + impl->seg.name() + " belongs to another holding of its prefix (claim " +
                                       std::to_string(theirs) + ", ours " + std::to_string(tag) + "), whose " + live +
                                       " is alive; pid " + std::to_string(me.pid) + " does not join it");
    }
    const bool stale = any_used && live.empty() && !ours;
    if (stale) {
      std::memset(b->parts, 0, sizeof b->parts);
      failpoint::crash_window("crash/barrier/attach/half-reset");
      store(b->arrived, 0);
      b->broken = 0;
      b->reason[0] = '\0';
      b->num_procs = static_cast<std::uint32_t>(num_procs);
    }
    if (stale || !any_used) store(b->claim, tag);
    if (static_cast<int>(b->num_procs) != num_procs) {
      return std::unexpected(impl->break_locked(
          Code::kMismatch, "participants disagree on the process count: pid " + std::to_string(me.pid) + " says " +
                               std::to_string(num_procs) + ", the barrier was created for " + std::to_string(b->num_procs)));
    }
    if (b->broken) return std::unexpected(impl->break_locked(Code::kBroken, ""));
    // Seats are fixed: an empty one, else a departed participant's between
    // rounds. A dead participant's seat is never handed to a replacement.
    int seat = -1;
    for (int i = 0; i < num_procs && seat < 0; ++i) {
      if (load(b->parts[i].state) == records::kPartEmpty) seat = i;
    }
    std::string refusal;
    for (int i = 0; i < num_procs && seat < 0; ++i) {
      const Participant& q = b->parts[i];
      if (load(q.state) != records::kPartLeft) continue;
      if (load(b->arrived) == 0) {
        seat = i;
      } else if (refusal.empty()) {
        refusal = "round " + std::to_string(load(b->generation)) + " is in progress: pid " + std::to_string(me.pid) +
                  " cannot take the seat of " + who(q, i) + ", who departed, before the round completes";
      }
    }
    for (int i = 0; i < num_procs && seat < 0 && refusal.empty(); ++i) {
      const Participant& q = b->parts[i];
      if (load(q.state) == records::kPartAttached && !probe.alive(q.who)) {
        refusal = who(q, i) + " died holding its seat: pid " + std::to_string(me.pid) +
                  " cannot replace it while live participants remain (the barrier breaks at the round it misses)";
      }
    }
    if (seat < 0) {
      if (!refusal.empty()) return fail(Code::kBroken, "barrier " + impl->seg.name() + ": " + refusal);
      return fail(Code::kMismatch, "barrier " + impl->seg.name() + " already has " + std::to_string(num_procs) +
                                       " live participants of " + std::to_string(num_procs) + "; pid " +
                                       std::to_string(me.pid) + " is one too many");
    }
    failpoint::crash_window("crash/barrier/attach/locked");
    Participant& mine = b->parts[seat];
    mine.who = me;
    store(mine.arrived_gen, 0);  // a reused seat must not count as having entered the current round
    store(mine.state, records::kPartAttached);
    impl->slot = seat;
    lease->keep();  // dropped by detach()
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
  // generation read here is the round we are entering. Seats are fixed, so
  // num_procs arrivals are one per seat.
  const std::uint32_t gen = load(b->generation);
  if (load(b->broken)) return std::unexpected(broken_error());
  const std::uint32_t n = std::atomic_ref<std::uint32_t>(b->arrived).fetch_add(1, std::memory_order_acq_rel) + 1;
  failpoint::crash_window("crash/barrier/wait/after-enter");  // counted, not yet marked: peers see a death
  store(b->parts[I.slot].arrived_gen, gen + 1);
  if (n >= load(b->num_procs)) {
    store(b->arrived, 0);
    failpoint::crash_window("crash/barrier/wait/before-release");  // all marked, round not released
    std::atomic_ref<std::uint32_t>(b->generation).store(gen + 1, std::memory_order_release);
    wake(b);
    return gen;
  }
  const WaitPlan plan = wait_plan(load(b->num_procs));
  for (int i = plan.spins; i > 0; --i) {
    if (load(b->generation) != gen) return gen;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  for (int i = plan.yields; i > 0; --i) {
    if (load(b->generation) != gen) return gen;
    sched_yield();
  }
  for (bool first = true;; first = false) {
    const std::uint32_t seen = load(b->seq);
    if (load(b->generation) != gen) return gen;
    if (load(b->broken)) return std::unexpected(broken_error());
    // Checked, not yet asleep: an event from here on changes `seen`.
    if (first) failpoint::crash_window("crash/barrier/wait/before-sleep");
    auto slice = std::min<std::chrono::nanoseconds>(I.opt.liveness_interval, d.left());
    std::atomic_ref<std::uint32_t> waiters(b->waiters);
    waiters.fetch_add(1, std::memory_order_seq_cst);
    sys::futex_wait_for(&b->seq, seen, slice);
    waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (load(b->generation) != gen) return gen;
    if (load(b->broken)) return std::unexpected(broken_error());
    // Not released within a liveness interval, or woken by a departure: look
    // for dead or departed participants, and at the deadline. Only this slow
    // path takes the lock, and never for longer than a liveness interval, so a
    // stopped lock holder delays the check, never the end of a round.
    auto lock_for = std::max<std::chrono::nanoseconds>(std::min<std::chrono::nanoseconds>(I.opt.liveness_interval, d.left()),
                                                       std::chrono::milliseconds(1));
    auto g = I.lock(Deadline{Clock::now() + std::chrono::duration_cast<Clock::duration>(lock_for)});
    if (!g) {
      if (g.error().code != Code::kTimeout) return std::unexpected(g.error());
      if (!d.passed()) continue;
      if (load(b->generation) != gen) return gen;
      return fail(Code::kTimeout, "timed out after " + std::to_string(I.opt.timeout.count()) + " ms in round " +
                                      std::to_string(gen) + " of barrier " + I.seg.name() +
                                      ": its lock is held by a stopped or stuck process");
    }
    failpoint::crash_window("crash/barrier/wait/check-locked");
    if (load(b->generation) != gen) return gen;
    if (load(b->broken)) return std::unexpected(I.break_locked(Code::kBroken, ""));
    std::string missing, dead;
    {
      LeaseProbe probe(I.ns);
      dead = missing_dead(b, probe, gen, d.passed() ? &missing : nullptr);
    }
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
  Status locked;
  {
    auto g = I.lock(Deadline::after(std::chrono::milliseconds(2000)));
    if (g) {
      Participant& mine = b->parts[I.slot];
      if (same_owner(mine.who, I.me)) store(mine.state, records::kPartLeft);
      failpoint::crash_window("crash/barrier/detach/locked");
      last = true;
      {
        LeaseProbe probe(I.ns);
        for (const Participant& q : b->parts) {
          if (load(q.state) == records::kPartAttached && probe.alive(q.who)) last = false;
        }
      }
      if (last) store(b->retired, 1);
      wake(b);
    } else {
      locked = std::unexpected(g.error());
    }
  }
  // Our seat is given up (or, if the lock failed, we are about to look dead).
  LeaseRef::drop(I.ns.root);
  if (!locked) return locked;
  if (last) {
    auto lock = InitLock::acquire(I.ns, Deadline::after(std::chrono::milliseconds(2000)));
    if (!lock) return std::unexpected(lock.error());
    failpoint::crash_window("crash/barrier/detach/retired");
    auto r = I.seg.unlink_if_same("shm/barrier/unlink");
    // Nothing of the namespace left: its leases file and init lock go too
    // (safe while we hold the init lock).
    if (r && list_owned(I.ns).empty() && remove_leases_if_unused(I.ns).empty()) (void)lock->unlink_held();
    return r;
  }
  // The last detacher may have tried the leases file while we still held our
  // cell (we drop it only after leaving the barrier lock) and so kept it. The
  // init lock orders us against it: either it has not unlinked the barrier yet
  // (then it will find our cell free), or it has and the tidying is ours.
  if (auto lock = InitLock::acquire(I.ns, Deadline::after(std::chrono::milliseconds(2000))); lock) {
    if (list_owned(I.ns).empty() && remove_leases_if_unused(I.ns).empty()) (void)lock->unlink_held();
  }
  return {};
}

void clean_other_segment(const Namespace& ns, const OwnedEntry& e, Deadline d, CleanReport& rep) {
  if (e.uid != ::geteuid()) {
    rep.skipped.push_back({e.name, "owned by uid " + std::to_string(e.uid)});
    return;
  }
  // Is it a barrier (of this version or another)? Read without any lock first.
  std::uint32_t version = 0;
  bool valid = false;
  ino_t ino = 0;
  void* map = nullptr;
  std::size_t size = 0;
  if (int fd = ::shm_open(e.name.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0); fd >= 0) {
    struct stat st{};
    if (::fstat(fd, &st) == 0 && st.st_size >= 16) {
      size = static_cast<std::size_t>(st.st_size);
      ino = st.st_ino;
      void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p != MAP_FAILED) {
        version = records::version_of(p, size, records::kBarrierMagic);
        valid = records::validate_barrier(p, size) == nullptr;
        map = p;
      }
    }
    ::close(fd);
  }
  struct Unmap {
    void* p;
    std::size_t n;
    ~Unmap() {
      if (p) ::munmap(p, n);
    }
  } unmap{map, size};
  if (version != 0 && version != records::kVersion) {
    rep.skipped.push_back({e.name, "a barrier of shmcoord layout version " + std::to_string(version) +
                                       " (this library is version " + std::to_string(records::kVersion) + ")"});
    return;
  }
  if (!valid) {
    std::string r = remove_entry(e);
    if (r.empty()) {
      rep.removed.push_back({e.name, "not a valid barrier (zero-length, truncated or garbage)"});
    } else {
      rep.skipped.push_back({e.name, r});
    }
    return;
  }
  // A barrier: judged under its own lock and retired before it is unlinked,
  // so an attach racing with us reopens by name instead of joining a ghost.
  auto* b = static_cast<BarrierLayout*>(map);
  auto g = lock_barrier(ns, b, e.name, d);
  if (!g) {
    rep.kept.push_back({e.name, g.error().message});
    return;
  }
  std::string live;
  {
    LeaseProbe probe(ns);
    for (int i = 0; i < records::kMaxRanks && live.empty(); ++i) {
      const Participant& q = b->parts[i];
      if (load(q.state) == records::kPartAttached && probe.alive(q.who)) live = who(q, i) + " is alive";
    }
  }
  if (!live.empty()) {
    rep.kept.push_back({e.name, "barrier " + live});
    return;
  }
  store(b->retired, 1);
  failpoint::crash_window("crash/cleanup/barrier-retired");
  if (shm_inode(e.name) == ino && ::shm_unlink(e.name.c_str()) == 0) {
    rep.removed.push_back({e.name, "barrier with no live participant"});
  }
}

}  // namespace shmcoord
