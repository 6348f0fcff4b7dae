#include "shmcoord/barrier.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <optional>
#include <thread>

#include "clean_parts.h"
#include "lease.h"
#include "lease_lock.h"
#include "names.h"
#include "records.h"
#include "segment.h"
#include "shmcoord/failpoint.h"
#include "shmcoord/process.h"

namespace shmcoord {
namespace {

using records::BarrierLayout;
using records::Participant;
using records::round_arrived;
using records::round_gen;

using sys::load;
using sys::store;

std::uint64_t load64(const std::uint64_t& w) {
  return std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(w)).load(std::memory_order_acquire);
}
void store64(std::uint64_t& w, std::uint64_t v) { std::atomic_ref<std::uint64_t>(w).store(v, std::memory_order_release); }

// The mark of a participant in round `gen`: 64-bit, so never 0 ("none") and
// never the mark of a round 2^32 rounds away.
std::uint64_t mark_of(std::uint32_t gen) { return static_cast<std::uint64_t>(gen) + 1; }
// The round word of round gen + 1 with nobody in it (wraps at 2^32).
std::uint64_t next_round(std::uint32_t gen) { return static_cast<std::uint64_t>(static_cast<std::uint32_t>(gen + 1)) << 32; }

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
    b->round = 0;
    b->lock = records::LockWord{};
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
  failpoint::crash_window("crash/barrier/woken");
}

// Completes round `gen` from the round word `full` (every seat arrived). Only
// one release succeeds; the others find the generation already moved on. A
// release needs no `seq` bump unless someone sleeps: a sleeper raises
// `waiters` and then looks at the round word again before FUTEX_WAIT (all
// sequentially consistent), so either we see it and wake it, or it sees the
// new generation. (Breaks and departures, which change no generation, always
// bump `seq`: wake().)
void release_round(BarrierLayout* b, std::uint64_t full) {
  if (std::atomic_ref<std::uint64_t>(b->round).compare_exchange_strong(full, next_round(round_gen(full)),
                                                                       std::memory_order_seq_cst) &&
      std::atomic_ref<std::uint32_t>(b->waiters).load(std::memory_order_seq_cst) != 0) {
    wake(b);
  }
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
// one that blocks round `gen`, and (with all_missing) who is missing. A round
// everyone entered is never blocked: it is released, not broken.
std::string missing_dead(BarrierLayout* b, LeaseProbe& probe, std::uint32_t gen, std::string* all_missing) {
  std::string dead;
  int seated = 0;
  const int seats = static_cast<int>(b->num_procs);
  for (int i = 0; i < seats; ++i) {
    const Participant& q = b->parts[i];
    const std::uint32_t st = load(q.state);
    if (st == records::kPartEmpty) continue;
    ++seated;
    if (load64(q.arrived_mark) == mark_of(gen)) continue;
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

// Locks a barrier for `me`. A holder that died holding the lock breaks it only
// if it was a seated participant: what it was doing may be half-done, and a
// participant's death breaks the barrier anyway. Anyone else who dies in the
// lock (an attacher before its seat is written, one that would have been
// refused, a cleanup judging it) leaves nothing a participant relies on; a
// break reason it was half-way writing is cleared, and a half-done reset is
// finished by the next attach (no seat used: the barrier starts afresh).
Result<LockGuard> lock_barrier(const Namespace& ns, BarrierLayout* b, const std::string& name, std::uint64_t me,
                               Deadline d) {
  auto g = LockGuard::lock(&b->lock, ns, me, d, name);
  if (g && g->owner_died()) {
    std::string dead;
    for (int i = 0; i < records::kMaxRanks && dead.empty(); ++i) {
      const Participant& q = b->parts[i];
      if (load(q.state) == records::kPartAttached && lock_id(q.who) == g->dead_owner()) dead = who(q, i);
    }
    if (!dead.empty()) {
      break_locked(b, name, Code::kBroken, dead + " died holding the barrier lock");
    } else if (!b->broken) {
      b->reason[0] = '\0';
    }
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
  std::uint64_t me_id = 0;         // lock_id(me)
  pid_t pid = 0;                   // the attaching process
  std::uint64_t fork_gen = 0;      // fork_generation() at attach

  bool inherited() const { return fork_generation() != fork_gen; }
  Error inherited_error(const char* what) const {
    return make_error(Code::kInvalidArgument, std::string(what) + " on barrier " + seg.name() +
                                                  ": this handle was attached by pid " + std::to_string(pid) +
                                                  " and inherited across fork by pid " + std::to_string(::getpid()) +
                                                  ", which holds no seat of it (attach one of its own)");
  }
  Error break_locked(Code code, const std::string& why) { return shmcoord::break_locked(b, seg.name(), code, why); }
  Result<LockGuard> lock(Deadline d) { return lock_barrier(ns, b, seg.name(), me_id, d); }
  Error broken_error() {
    auto g = lock(Deadline::after(std::chrono::milliseconds(1000)));
    return break_locked(Code::kBroken, "");
  }
  // A wait that fails after arriving in round `gen` takes its arrival back, so
  // no round completes on the arrival of a wait that reported failure. If the
  // round is complete (every seat arrived) it is too late: the round is
  // released (by us if need be) and the wait succeeds. nullopt: withdrawn.
  std::optional<std::uint32_t> withdraw(std::uint32_t gen) {
    std::atomic_ref<std::uint64_t> round(b->round);
    const std::uint32_t procs = load(b->num_procs);
    for (std::uint64_t r = round.load(std::memory_order_acquire);;) {
      if (round_gen(r) != gen) return gen;
      if (round_arrived(r) >= procs) {
        release_round(b, r);
        return gen;
      }
      if (round.compare_exchange_weak(r, r - 1, std::memory_order_acq_rel)) {
        store64(b->parts[slot].arrived_mark, 0);
        wake(b);  // a peer checking who is missing sees us missing
        return std::nullopt;
      }
    }
  }
};

Barrier::Barrier(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Barrier::Barrier(Barrier&&) noexcept = default;
Barrier& Barrier::operator=(Barrier&& o) noexcept {
  if (this != &o) {
    if (impl_ && !impl_->inherited()) (void)detach();
    impl_ = std::move(o.impl_);
  }
  return *this;
}
Barrier::~Barrier() {
  // An inherited copy only unmaps: the seat is its attacher's.
  if (impl_ && !impl_->inherited()) (void)detach();
}
int Barrier::slot() const { return impl_->slot; }
const std::string& Barrier::name() const { return impl_->seg.name(); }

Result<Barrier> Barrier::attach(const Namespace& ns, std::string suffix, int num_procs, BarrierOptions opt) {
  if (auto v = ns.validate(); !v) return std::unexpected(v.error());
  if (!Namespace::valid_suffix(suffix)) {
    return fail(Code::kInvalidArgument, "barrier suffix '" + suffix +
                                            "' must be 1..128 characters of [A-Za-z0-9_-] and not 'registry' or "
                                            "'leases' (the namespace's own objects)");
  }
  if (num_procs < 1 || num_procs > records::kMaxRanks) {
    return fail(Code::kInvalidArgument, "barrier process count " + std::to_string(num_procs) + " outside [1, " +
                                            std::to_string(records::kMaxRanks) + "]");
  }
  if (opt.timeout.count() < 0) {
    return fail(Code::kInvalidArgument, "barrier timeout " + std::to_string(opt.timeout.count()) +
                                            " ms is negative (milliseconds::max() means no deadline)");
  }
  if (opt.liveness_interval.count() <= 0) {
    return fail(Code::kInvalidArgument, "barrier liveness interval " + std::to_string(opt.liveness_interval.count()) +
                                            " ms must be positive");
  }
  const Deadline d = Deadline::after(opt.timeout);
  // Our liveness for as long as we hold a seat.
  auto lease = LeaseRef::take(ns, d);
  if (!lease) return std::unexpected(lease.error());
  auto impl = std::make_unique<Impl>();
  impl->ns = ns;
  impl->opt = opt;
  impl->me = lease->owner();
  impl->me_id = lock_id(impl->me);
  impl->pid = ::getpid();
  impl->fork_gen = fork_generation();
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
    std::string live;    // the first live participant, if any
    int dead_seat = -1;  // the first participant that died holding its seat, if any
    for (int i = 0; i < records::kMaxRanks; ++i) {
      const Participant& q = b->parts[i];
      const std::uint32_t st = load(q.state);
      if (st != records::kPartEmpty) any_used = true;
      if (st != records::kPartAttached || (!live.empty() && dead_seat >= 0)) continue;
      if (probe.alive(q.who)) {
        if (live.empty()) live = who(q, i);
      } else if (dead_seat < 0) {
        dead_seat = i;
      }
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
    }
    if (stale || !any_used) {
      // No seat used (new, stale, or a reset cut short by a death in the
      // lock): nobody waits on it, so everything but the generation restarts.
      std::atomic_ref<std::uint64_t>(b->round).store(static_cast<std::uint64_t>(round_gen(load64(b->round))) << 32,
                                                     std::memory_order_release);
      b->broken = 0;
      b->reason[0] = '\0';
      b->num_procs = static_cast<std::uint32_t>(num_procs);
      store(b->claim, tag);
    }
    if (static_cast<int>(b->num_procs) != num_procs) {
      return std::unexpected(impl->break_locked(
          Code::kMismatch, "participants disagree on the process count: pid " + std::to_string(me.pid) + " says " +
                               std::to_string(num_procs) + ", the barrier was created for " + std::to_string(b->num_procs)));
    }
    if (b->broken) return std::unexpected(impl->break_locked(Code::kBroken, ""));
    // Seats are fixed: an empty one, else a departed participant's between
    // rounds. A dead participant's seat is never handed to a replacement -
    // nor is an empty one while it lies dead: its arrival in the current
    // round still counts, so a newcomer's would stand for one more process
    // than the barrier is for, and release the round without a participant
    // that has not attached yet (a replacement for the dead one that comes
    // before the last of its peers, issue 20 §1).
    // (With no live participant left, a newcomer may take an empty seat: the
    // round then breaks on the dead one's missing arrival, as it should.)
    // (A stale barrier was cleared above: then nobody is live, nothing dead.)
    int seat = -1;
    std::string refusal;
    if (!live.empty() && dead_seat >= 0) {
      refusal = who(b->parts[dead_seat], dead_seat) + " died holding its seat: pid " + std::to_string(me.pid) +
                " cannot join while live participants remain (the barrier breaks at the round it misses)";
    }
    for (int i = 0; i < num_procs && seat < 0 && refusal.empty(); ++i) {
      if (load(b->parts[i].state) == records::kPartEmpty) seat = i;
    }
    for (int i = 0; i < num_procs && seat < 0 && refusal.empty(); ++i) {
      const Participant& q = b->parts[i];
      if (load(q.state) != records::kPartLeft) continue;
      if (round_arrived(load64(b->round)) == 0) {
        seat = i;
      } else {
        refusal = "round " + std::to_string(round_gen(load64(b->round))) + " is in progress: pid " +
                  std::to_string(me.pid) + " cannot take the seat of " + who(q, i) +
                  ", who departed, before the round completes";
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
    store64(mine.arrived_mark, 0);  // a reused seat must not count as having entered the current round
    store(mine.state, records::kPartAttached);
    impl->slot = seat;
    lease->keep();  // dropped by detach()
    return Barrier(std::move(impl));
  }
}

Result<std::uint32_t> Barrier::wait() {
  Impl& I = *impl_;
  if (I.inherited()) return std::unexpected(I.inherited_error("wait()"));
  if (I.detached) return fail(Code::kInvalidArgument, "wait() after detach()");
  BarrierLayout* b = I.b;
  std::atomic_ref<std::uint64_t> round(b->round);
  if (load(b->broken)) return std::unexpected(I.broken_error());
  // Fast path, no lock: one add both arrives and reads the round we entered
  // (a round cannot complete without our arrival). Seats are fixed, so
  // num_procs arrivals are one per seat.
  const std::uint64_t r = round.fetch_add(1, std::memory_order_acq_rel) + 1;
  const std::uint32_t gen = round_gen(r);
  failpoint::crash_window("crash/barrier/wait/after-enter");  // counted, not yet marked: peers see a death
  const std::uint32_t procs = load(b->num_procs);
  if (round_arrived(r) >= procs) {
    // The last arrival releases at once; its mark is never read (a round
    // everyone entered is released, whoever dies in it).
    failpoint::crash_window("crash/barrier/wait/before-release");  // all counted, round not released
    release_round(b, r);
    return gen;
  }
  auto released = [&] { return round_gen(round.load(std::memory_order_acquire)) != gen; };
  const WaitPlan plan = wait_plan(procs);
  for (int i = plan.spins; i > 0; --i) {
    if (released()) return gen;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  for (int i = plan.yields; i > 0; --i) {
    if (released()) return gen;
    sched_yield();
  }
  // Every failure below first takes our arrival back (or finds the round
  // complete, and succeeds): a failed wait never counts.
  auto failed = [&](Error e) -> Result<std::uint32_t> {
    if (auto done = I.withdraw(gen)) return *done;
    return std::unexpected(std::move(e));
  };
  auto interval = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::min<std::chrono::milliseconds>(I.opt.liveness_interval, std::chrono::hours(1)));
  // The deadline counts from here, when the wait starts to sleep: no clock is
  // read on the way to a round that completes within the spins and yields
  // (at most ~16 scheduler yields after the call, so well inside a liveness
  // interval). Our arrival's mark, which only the liveness checks of waiters
  // that slept a whole interval read, is written here too, off the path of a
  // round that completes at once. (Dying before it is written, we are taken
  // for one that never entered: the barrier breaks all the same.)
  const Deadline d = Deadline::after(I.opt.timeout);
  store64(b->parts[I.slot].arrived_mark, mark_of(gen));
  for (bool first = true;; first = false) {
    const std::uint32_t seen = load(b->seq);
    if (released()) return gen;
    if (load(b->broken)) {
      if (auto done = I.withdraw(gen)) return *done;
      return std::unexpected(I.broken_error());
    }
    // Checked, not yet asleep: an event from here on changes `seen`.
    if (first) failpoint::crash_window("crash/barrier/wait/before-sleep");
    auto slice = std::min<std::chrono::nanoseconds>(interval, d.left());
    std::atomic_ref<std::uint32_t> waiters(b->waiters);
    waiters.fetch_add(1, std::memory_order_seq_cst);
    // A release that missed our `waiters` bumps no `seq`: look once more.
    if (round_gen(round.load(std::memory_order_seq_cst)) == gen) sys::futex_wait_for(&b->seq, seen, slice);
    waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (released()) return gen;
    // Everyone entered, nobody released: the releaser is stopped or died
    // between its arrival and the release. The round is complete: release it.
    if (const std::uint64_t now = round.load(std::memory_order_acquire);
        round_gen(now) == gen && round_arrived(now) >= procs) {
      release_round(b, now);
      return gen;
    }
    if (load(b->broken)) {
      if (auto done = I.withdraw(gen)) return *done;
      return std::unexpected(I.broken_error());
    }
    // Not released within a liveness interval, or woken by a departure: look
    // for dead or departed participants, and at the deadline. Only this slow
    // path takes the lock, and never for longer than a liveness interval, so a
    // stopped lock holder delays the check, never the end of a round.
    auto lock_for = std::max<std::chrono::nanoseconds>(std::min<std::chrono::nanoseconds>(interval, d.left()),
                                                       std::chrono::milliseconds(1));
    auto g = I.lock(Deadline{Clock::now() + std::chrono::duration_cast<Clock::duration>(lock_for)});
    if (!g) {
      if (g.error().code != Code::kTimeout) return failed(g.error());
      if (!d.passed()) continue;
      return failed(make_error(Code::kTimeout, "timed out after " + std::to_string(I.opt.timeout.count()) +
                                                   " ms in round " + std::to_string(gen) + " of barrier " +
                                                   I.seg.name() + ": its lock is held by a stopped or stuck process"));
    }
    failpoint::crash_window("crash/barrier/wait/check-locked");
    if (released()) return gen;
    if (load(b->broken)) {
      if (auto done = I.withdraw(gen)) return *done;
      return std::unexpected(I.break_locked(Code::kBroken, ""));
    }
    std::string missing, dead;
    {
      LeaseProbe probe(I.ns);
      dead = missing_dead(b, probe, gen, d.passed() ? &missing : nullptr);
    }
    if (!dead.empty()) {
      if (auto done = I.withdraw(gen)) return *done;
      return std::unexpected(I.break_locked(Code::kBroken, dead));
    }
    if (d.passed()) {
      if (auto done = I.withdraw(gen)) return *done;
      return std::unexpected(I.break_locked(Code::kTimeout, "timed out after " + std::to_string(I.opt.timeout.count()) +
                                                                " ms in round " + std::to_string(gen) +
                                                                " waiting for " + missing));
    }
  }
}

Status Barrier::detach() {
  if (!impl_ || impl_->detached) return {};
  Impl& I = *impl_;
  if (I.inherited()) return std::unexpected(I.inherited_error("detach()"));
  I.detached = true;
  BarrierLayout* b = I.b;
  bool last = false, dropped = false;
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
      if (!last) {
        // Our cell goes before the lock does: the last detacher, which needs
        // this lock to see it is last, then finds it free and can remove the
        // leases file. (A holder whose lease is gone may be taken for dead:
        // a departed participant's death breaks nothing, and unlock() leaves
        // a lock taken over from us alone.)
        LeaseRef::drop(I.ns.root);
        dropped = true;
      }
    } else {
      locked = std::unexpected(g.error());
    }
  }
  // Our seat is given up (or, if the lock failed, we are about to look dead).
  if (!dropped) LeaseRef::drop(I.ns.root);
  if (!locked) return locked;
  if (!last) return {};
  auto lock = InitLock::acquire(I.ns, Deadline::after(std::chrono::milliseconds(2000)));
  if (!lock) return std::unexpected(lock.error());
  failpoint::crash_window("crash/barrier/detach/retired");
  auto r = I.seg.unlink_if_same("shm/barrier/unlink");
  if (r)
    (void)remove_namespace_if_unused(I.ns, *lock);  // nothing of it left: its own objects go too
  return r;
}

void clean_other_segment(const Namespace& ns, const OwnedEntry& e, Deadline d, CleanReport& rep, CleanerLease& lease) {
  if (e.uid != ::geteuid()) {
    rep.skipped.push_back({e.name, "owned by uid " + std::to_string(e.uid)});
    return;
  }
  // Is it a barrier (of this version or another)? Read without any lock
  // first. What cannot be read (no fd, no address space) is kept: a barrier
  // we never saw is not garbage.
  auto cannot = [&](const Error& err) { rep.kept.push_back({e.name, "cannot be judged: " + err.message}); };
  std::uint32_t version = 0;
  bool valid = false;
  ino_t ino = 0;
  void* map = nullptr;
  std::size_t size = 0;
  {
    auto fd = sys::shm_open("shm/barrier/open", e.name, O_RDWR);
    if (!fd) {
      if (fd.error().code != Code::kNotFound) cannot(fd.error());
      return;
    }
    auto st = sys::fstat("shm/barrier/fstat", fd->get(), e.name);
    if (!st) return cannot(st.error());
    ino = st->st_ino;
    if (st->st_size >= 16) {
      size = static_cast<std::size_t>(st->st_size);
      void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd->get(), 0);
      if (p == MAP_FAILED) return cannot(sys_error("mmap", e.name, errno));
      version = records::version_of(p, size, records::kBarrierMagic);
      valid = records::validate_barrier(p, size) == nullptr;
      map = p;
    }
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
      (not_ours(r) ? rep.skipped : rep.kept).push_back({e.name, r});
    }
    return;
  }
  // A barrier: judged under its own lock and retired before it is unlinked,
  // so an attach racing with us reopens by name instead of joining a ghost.
  auto* b = static_cast<BarrierLayout*>(map);
  auto me = lease.id();
  if (!me) return cannot(me.error());
  auto g = lock_barrier(ns, b, e.name, *me, d);
  if (!g) {
    rep.kept.push_back({e.name, g.error().message});
    return;
  }
  failpoint::crash_window("crash/cleanup/barrier-locked");
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
