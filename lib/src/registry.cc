#include "shmcoord/registry.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <tuple>

#include "clean_parts.h"
#include "lease.h"
#include "lease_lock.h"
#include "names.h"
#include "records.h"
#include "segment.h"
#include "shmcoord/failpoint.h"

namespace shmcoord {
namespace {

using records::Holder;
using records::Owner;
using records::RegistryLayout;
using records::Slot;

constexpr const char* kSuffix = "registry";
constexpr auto kLivenessPoll = std::chrono::milliseconds(100);
// acquire() judges every slot at most this often; the slots in its way (same
// job key, a conflicting dir) are judged on every call. reap() and clean_stale
// always judge every slot.
constexpr auto kSweepInterval = std::chrono::milliseconds(20);
// How long a join waiter tries for the lock it needs to fail the job for
// everyone before it withdraws without it.
constexpr auto kLockSlice = std::chrono::milliseconds(100);

using sys::load;
using sys::store;

const SegmentPoints kRegistryPoints{"shm/registry/open",     "shm/registry/create",         "shm/registry/fstat",
                                    "shm/registry/mmap",     "shm/registry/ftruncate",      "shm/registry/fallocate",
                                    "shm/registry/unlink",   "crash/registry/after-create", "crash/registry/after-size"};

// A registry rebuilt after a cleanup must not repeat the serials of the one
// before it: a barrier of an old holding can outlive its registry, and a new
// holding of the same prefix with the same serial would take it for its own
// (BarrierOptions::claim). Random, below 2^62 so it never wraps.
std::uint64_t first_serial() {
  std::uint64_t x = 0;
  if (::getrandom(&x, sizeof x, 0) != static_cast<ssize_t>(sizeof x)) {
    x = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) * 0x9E3779B97F4A7C15ULL;
  }
  return (x >> 2) | 1;
}

SegmentSpec registry_spec() {
  SegmentSpec s;
  s.suffix = kSuffix;
  s.size = sizeof(RegistryLayout);
  s.magic = records::kRegistryMagic;
  s.points = kRegistryPoints;
  s.init = [](void* p) {
    auto* L = static_cast<RegistryLayout*>(p);
    // Fresh tmpfs pages are zero: only the header needs writing.
    L->h.version = records::kVersion;
    L->h.layout_size = sizeof(RegistryLayout);
    L->h.slot_count = records::kSlots;
    L->h.retired = 0;
    L->h.epoch = 0;
    L->h.next_serial = first_serial();
    L->h.last_sweep_ns = 0;
    L->h.lock = records::LockWord{};
    std::atomic_ref<std::uint64_t>(L->h.magic).store(records::kRegistryMagic, std::memory_order_release);
  };
  s.validate = [](const void* p, std::size_t n) { return records::validate_registry_header(p, n); };
  s.retired = [](const void* p) { return load(static_cast<const RegistryLayout*>(p)->h.retired) != 0; };
  return s;
}

bool in_use(std::uint32_t state) {
  return state == records::kSlotActive || state == records::kSlotJoined || state == records::kSlotPoisoned ||
         state == records::kSlotWithdrawn;
}

bool cas(std::uint32_t& w, std::uint32_t from, std::uint32_t to) {
  return std::atomic_ref<std::uint32_t>(w).compare_exchange_strong(from, to, std::memory_order_acq_rel);
}

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
}

std::string normalise(const std::string& path) {
  std::string s = std::filesystem::path(path).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::vector<LocalDir> slot_dirs(const Slot& s) {
  std::vector<records::LocalDir> raw;
  std::vector<LocalDir> out;
  if (records::decode_dirs(s.dirs, std::min<std::size_t>(s.dir_bytes, records::kDirBlob), &raw) == nullptr) {
    for (auto& d : raw) out.push_back(LocalDir{std::move(d.path), d.has_remote});
  }
  return out;
}

// Ranks that joined: holders are published by their state word, written last.
int joined(const Slot& s) {
  int n = 0;
  for (std::uint32_t r = 0; r < s.local_world_size && r < records::kMaxRanks; ++r) {
    if (load(s.holders[r].state) != records::kHolderEmpty) ++n;
  }
  return n;
}

std::string rank_desc(int r, const Owner& o) { return "local rank " + std::to_string(r) + " (" + describe_owner(o) + ")"; }

std::string withdrawn_reason(const Slot& s) {
  for (std::uint32_t r = 0; r < s.local_world_size && r < records::kMaxRanks; ++r) {
    const Holder& h = s.holders[r];
    if (load(h.state) == records::kHolderWithdrawn) {
      return rank_desc(static_cast<int>(r), h.who) + " of job '" + std::string(s.job_key) +
             "' gave up before all its local ranks joined and could not take the registry lock to say why; "
             "the job fails for every rank";
    }
  }
  return "a local rank of job '" + std::string(s.job_key) + "' gave up before all its local ranks joined";
}

// The shared-memory side of the registry, for a mapped layout. Everything but
// the join wait runs under the registry lock.
struct Core {
  const Namespace& ns;
  RegistryLayout* L;

  void bump() {
    // Waiters raise epoch_waiters before FUTEX_WAIT and we bump epoch before
    // reading it (both sequentially consistent): either we see the waiter, or
    // its FUTEX_WAIT sees the new epoch. No waiter, no syscall.
    std::atomic_ref<std::uint32_t>(L->h.epoch).fetch_add(1, std::memory_order_seq_cst);
    if (std::atomic_ref<std::uint32_t>(L->h.epoch_waiters).load(std::memory_order_seq_cst) != 0) {
      sys::futex_wake_all(&L->h.epoch);
    }
  }

  // The previous owner died holding the lock: drop claims it was half-way
  // through, and a reason it was half-way writing (the slot itself is sound).
  void repair() {
    for (Slot& s : L->slots) {
      if (s.state == records::kSlotFree) continue;
      if (s.state != records::kSlotWriting && records::validate_slot(s) != nullptr) {
        s.reason[0] = '\0';
      }
      if (s.state == records::kSlotWriting || records::validate_slot(s) != nullptr) std::memset(&s, 0, sizeof s);
    }
    bump();
  }

  // Held while any holder that has not released is alive (by its lease).
  static bool slot_live(LeaseProbe& probe, const Slot& s) {
    if (!in_use(load(s.state)) || records::validate_slot(s) != nullptr) return false;
    for (std::uint32_t r = 0; r < s.local_world_size; ++r) {
      const Holder& h = s.holders[r];
      if (load(h.state) == records::kHolderAttached && probe.alive(h.who)) return true;
    }
    return false;
  }

  // Removes the listed names; `rep` and `removed` (if given) hear of each.
  // Returns the prefixes where something stayed (another user's, another
  // layout version's, or one that could not be removed).
  std::vector<int> remove_names(const Owned& owned, CleanReport* rep, std::vector<std::string>* removed) {
    std::vector<int> stuck;
    for (const auto& [p, entries] : owned) {
      for (const auto& e : entries) {
        std::string why = remove_entry(e);
        if (why.empty()) {
          if (removed) removed->push_back(e.name);
          if (rep) rep->removed.push_back({e.name, "prefix " + std::to_string(p) + " has no live holder"});
          continue;
        }
        if (stuck.empty() || stuck.back() != p) stuck.push_back(p);
        if (rep) (not_ours(why) ? rep->skipped : rep->kept).push_back({e.name, why});
      }
    }
    return stuck;
  }

  // Judges every used slot; frees the dead ones after removing their names.
  // With `all_names`, names of free prefixes go too, and names of live ones
  // are reported as kept (reap, cleanup). If the names cannot be listed, no
  // dead slot is freed: a slot is freed only once its names are gone.
  Status sweep(LeaseProbe& probe, bool all_names, CleanReport* rep, std::vector<std::string>* removed) {
    std::vector<bool> live(records::kSlots, false), dead(records::kSlots, false);
    bool any_dead = false;
    for (int p = 0; p < records::kSlots; ++p) {
      const std::uint32_t st = load(L->slots[p].state);
      if (st == records::kSlotFree) continue;
      // A slot still being written under the lock we hold was abandoned.
      live[p] = st != records::kSlotWriting && slot_live(probe, L->slots[p]);
      dead[p] = !live[p];
      any_dead |= dead[p];
    }
    if (any_dead || all_names) {
      auto listed = list_owned(ns, [&](int p) { return p >= 0 && p < records::kSlots && (all_names || dead[p]); });
      if (!listed) return std::unexpected(listed.error());
      Owned& owned = *listed;
      for (auto it = owned.begin(); it != owned.end();) {
        if (live[it->first]) {
          if (rep) {
            for (const auto& e : it->second) {
              rep->kept.push_back({e.name, "prefix " + std::to_string(it->first) + " is held by a live job"});
            }
          }
          it = owned.erase(it);
        } else {
          ++it;
        }
      }
      remove_names(owned, rep, removed);
    }
    if (any_dead) {
      failpoint::crash_window("crash/registry/sweep-after-unlink");
      for (int p = 0; p < records::kSlots; ++p) {
        if (dead[p]) std::memset(&L->slots[p], 0, sizeof(Slot));
      }
      bump();
    }
    L->h.last_sweep_ns = now_ns();
    return {};
  }

  // The periodic sweep is a courtesy to jobs nobody stands in the way of: if
  // it cannot list names, the dead slots simply wait for the next one.
  // `removed` (if given) hears of what it removed, as with every remover below.
  void maybe_sweep(LeaseProbe& probe, std::vector<std::string>* removed) {
    const std::uint64_t now = now_ns(), last = L->h.last_sweep_ns;
    const auto interval = static_cast<std::uint64_t>(std::chrono::nanoseconds(kSweepInterval).count());
    if (now < last || now - last >= interval) (void)sweep(probe, false, nullptr, removed);
  }

  // Frees one slot that is not live, after removing its names; an error (and
  // the slot stays) if they cannot be listed.
  Status reap_one(int p, std::vector<std::string>* removed) {
    auto owned = list_owned(ns, [p](int q) { return q == p; });
    if (!owned) return std::unexpected(owned.error());
    remove_names(*owned, nullptr, removed);
    failpoint::crash_window("crash/registry/sweep-after-unlink");
    std::memset(&L->slots[p], 0, sizeof(Slot));
    bump();
    return {};
  }

  std::string describe(LeaseProbe& probe, const Slot& s, int p) {
    std::string who;
    for (std::uint32_t r = 0; r < s.local_world_size; ++r) {
      const Holder& h = s.holders[r];
      if (load(h.state) == records::kHolderAttached && probe.alive(h.who)) {
        who = ", " + describe_owner(h.who) + (probe.is_self(h.who) ? ", this process" : "");
        break;
      }
    }
    return "job '" + std::string(s.job_key) + "' (prefix " + std::to_string(p) + who + ")";
  }

  // Fails the job for every rank: the reason is written before the state, so
  // a rank that sees kSlotPoisoned sees it. Loses to a rank that decided the
  // job first (joined, or withdrew without the lock).
  Error poison(Slot& s, Code code, const std::string& why) {
    if (load(s.state) == records::kSlotActive) {
      s.poison_code = static_cast<std::uint32_t>(code);
      records::copy_utf8_field(why, s.reason, records::kReasonMax);
      failpoint::crash_window("crash/registry/poison-half-written");
      if (cas(s.state, records::kSlotActive, records::kSlotPoisoned)) bump();
    }
    return outcome(s);
  }

  // The error every rank of a failed job reports.
  static Error outcome(const Slot& s) {
    switch (load(s.state)) {
      case records::kSlotPoisoned:
        return make_error(static_cast<Code>(s.poison_code), s.reason);
      case records::kSlotWithdrawn:
        return make_error(Code::kBroken, withdrawn_reason(s));
      default:
        return make_error(Code::kBroken, "job '" + std::string(s.job_key) + "' was decided by another rank first");
    }
  }

  // Our holder of (p, serial) released; the slot freed, and its names
  // removed, if nobody else holds it. True if we held it. If the names cannot
  // be listed, `names` says why and the slot stays for a later sweep.
  bool drop_holder(int p, std::uint64_t serial, int rank, const Owner& me, Status* names = nullptr) {
    Slot& s = L->slots[p];
    if (s.serial != serial || rank < 0 || rank >= records::kMaxRanks) return false;
    Holder& h = s.holders[rank];
    bool dropped = false;
    if (load(h.state) == records::kHolderAttached && same_owner(h.who, me)) {
      store(h.state, records::kHolderReleased);
      dropped = true;
    }
    failpoint::crash_window("crash/registry/release-before-free");
    LeaseProbe probe(ns);
    if (in_use(load(s.state)) && !slot_live(probe, s)) {
      auto owned = list_owned(ns, [p](int q) { return q == p; });
      if (owned) {
        remove_names(*owned, nullptr, nullptr);
        failpoint::crash_window("crash/registry/release-after-unlink");
        std::memset(&s, 0, sizeof s);
      } else if (names) {
        *names = std::unexpected(owned.error());
      }
    }
    bump();
    return dropped;
  }
};

}  // namespace

std::string default_job_key() {
  if (const char* k = std::getenv("SHMCOORD_JOB_KEY"); k && *k) return k;
  if (const char* k = std::getenv("TORCHELASTIC_RUN_ID"); k && *k) {
    // torchrun without --standalone leaves the run id at its default, "none",
    // for every job: the job's rendezvous endpoint tells two jobs apart.
    if (std::string_view(k) != "none") return std::string("torchelastic:") + k;
    const char* addr = std::getenv("MASTER_ADDR");
    const char* port = std::getenv("MASTER_PORT");
    if (addr && *addr && port && *port) return std::string("torchelastic:none@") + addr + ":" + port;
  }
  pid_t pp = ::getppid();
  auto id = identity_of(pp);
  return "ppid:" + std::to_string(pp) + ":" + std::to_string(id ? id->start_time : 0);
}

struct Registry::Impl {
  Namespace ns;
  Segment seg;
  RegistryLayout* L = nullptr;
  bool create = true;  // a handle opened without create never recreates a removed registry
  pid_t pid = 0;       // the process that opened it (messages)

  Core core() { return Core{ns, L}; }

  // A handle opened without create whose registry a cleanup retired (and
  // removed): nothing to reap or show, and nothing may be created for it,
  // not even the leases file a lock's lease would make. False if it reopened.
  bool removed_under_us(Deadline d) {
    if (create || load(L->h.retired) == 0) return false;
    auto s = Segment::open(ns, registry_spec(), false, d);
    if (!s) return true;
    seg = std::move(*s);
    L = static_cast<RegistryLayout*>(seg.data());
    return false;
  }

  // Runs `body` under the registry lock, held for a lease of our own taken
  // for this call (reap, snapshot). A handle opened without create whose
  // registry a cleanup removed runs nothing and gets R{}; it also leaves
  // nothing once the lease is dropped: a cleanup that ran while we held it
  // kept the leases file and init lock for it (or removed them before our
  // lease made a new leases file), and we may be the namespace's last user.
  // Found by the crash-points soak: a killed rank's tracker reaping beside
  // the cleanup step.
  template <typename R, typename F>
  Result<R> under_own_lease(Deadline d, F body) {
    if (removed_under_us(d)) return R{};
    Result<R> r = [&]() -> Result<R> {
      auto lease = LeaseRef::take(ns, d);
      if (!lease) return std::unexpected(lease.error());
      auto g = lock(d, lock_id(lease->owner()));
      if (!g) {
        if (!create && g.error().code == Code::kNotFound) return R{};
        return std::unexpected(g.error());
      }
      return body();
    }();
    if (!create) remove_namespace_if_unused(ns, d);
    return r;
  }

  // Locks the registry for `me` (lock_id() of our lease), reopening it when
  // cleanup retired the one we hold.
  Result<LockGuard> lock(Deadline d, std::uint64_t me) {
    for (;;) {
      auto g = LockGuard::lock(&L->h.lock, ns, me, d, seg.name());
      if (!g) return g;
      if (g->owner_died()) core().repair();
      if (load(L->h.retired) == 0) return g;
      g->unlock();
      auto s = Segment::open(ns, registry_spec(), create, d);
      if (!s) return std::unexpected(s.error());
      seg = std::move(*s);
      L = static_cast<RegistryLayout*>(seg.data());
    }
  }

  // Under the lock: the slot this request joins, -1 to claim a new one, or the
  // error every rank of the job gets. A slot whose rank is already held by
  // this process is another of our datasets and is passed over, so two
  // datasets in one process never share a prefix.
  // `removed` hears of every name removed on the way (here and in claim).
  Result<int> find_job(const JobSpec& spec, const std::uint8_t* blob, std::uint32_t blob_len, const Owner& me,
                       std::vector<std::string>* removed) {
    Core c = core();
    LeaseProbe probe(ns);
    c.maybe_sweep(probe, removed);
    const std::string rank = "local rank " + std::to_string(spec.local_rank) + " (pid " + std::to_string(me.pid) + ")";
    for (int q = 0; q < records::kSlots; ++q) {
      Slot& s = L->slots[q];
      const std::uint32_t st = load(s.state);
      if (!in_use(st) || std::strncmp(s.job_key, spec.job_key.c_str(), records::kJobKeyMax) != 0) continue;
      if (!Core::slot_live(probe, s)) {  // a dead run of this job: gone before we look
        if (auto r = c.reap_one(q, removed); !r) {
          return fail(r.error().code, "cannot remove what a dead run of job '" + spec.job_key + "' left at prefix " +
                                          std::to_string(q) + ": " + r.error().message);
        }
        continue;
      }
      Holder& h = s.holders[spec.local_rank];
      const std::uint32_t hs = load(h.state);
      const bool mine = hs != records::kHolderEmpty && same_owner(h.who, me);
      const bool same_dirs = s.dir_bytes == blob_len && std::memcmp(s.dirs, blob, blob_len) == 0;
      const bool same_size = static_cast<int>(s.local_world_size) == spec.local_world_size;
      if (mine) {
        // Held now: another of this process's datasets. Released: this one again.
        if (hs != records::kHolderAttached && same_dirs && same_size &&
            (st == records::kSlotActive || st == records::kSlotJoined)) {
          return q;
        }
        continue;
      }
      if (st == records::kSlotPoisoned || st == records::kSlotWithdrawn) return std::unexpected(Core::outcome(s));
      const bool joining = st == records::kSlotActive;
      auto refuse = [&](Code code, std::string why) -> Result<int> {
        // Ranks still joining get the same error; a running job is left alone.
        if (joining) return std::unexpected(c.poison(s, code, why));
        return fail(code, why + " (job '" + spec.job_key + "' already runs at prefix " + std::to_string(q) +
                              "; it is left untouched)");
      };
      if (!same_size) {
        return refuse(Code::kMismatch, "ranks disagree on local world size: " + rank + " says " +
                                           std::to_string(spec.local_world_size) + ", job '" + spec.job_key +
                                           "' registered " + std::to_string(s.local_world_size));
      }
      if (!same_dirs) {
        return refuse(Code::kMismatch, "ranks disagree on local dirs: " + rank + " differs from what job '" +
                                           spec.job_key + "' registered");
      }
      if (hs == records::kHolderAttached && probe.alive(h.who)) {
        return refuse(Code::kMismatch, "two processes claim local rank " + std::to_string(spec.local_rank) +
                                           " of job '" + spec.job_key + "': " + describe_owner(h.who) +
                                           " and pid " + std::to_string(me.pid));
      }
      return q;  // joins, or takes the place of a rank that died or left
    }
    return -1;
  }

  // Under the lock: a new claim for the lowest free prefix, after checking
  // that no live job uses one of our dirs exclusively and removing whatever a
  // previous user of that prefix left.
  Result<std::pair<int, std::uint64_t>> claim(const JobSpec& spec, const std::uint8_t* blob,
                                               std::uint32_t blob_len, const Owner& me,
                                               std::vector<std::string>* removed) {
    Core c = core();
    {
      LeaseProbe probe(ns);
      for (int q = 0; q < records::kSlots; ++q) {
        const Slot& s = L->slots[q];
        if (!in_use(load(s.state))) continue;
        std::string clash;
        records::for_each_dir(s.dirs, std::min<std::size_t>(s.dir_bytes, records::kDirBlob),
                              [&](std::string_view theirs, bool remote) {
                                for (const auto& mine : spec.dirs) {
                                  if (clash.empty() && theirs == mine.path && (remote || mine.has_remote)) clash = mine.path;
                                }
                              });
        if (clash.empty()) continue;
        if (!Core::slot_live(probe, s)) {
          if (auto r = c.reap_one(q, removed); !r) {
            return fail(r.error().code, "cannot remove what the dead job at prefix " + std::to_string(q) +
                                            " (using '" + clash + "') left: " + r.error().message);
          }
          continue;
        }
        return fail(Code::kInUse, "Reused local directory: '" + clash + "' is in use by live " + c.describe(probe, s, q) +
                                      "; a local dir with a remote cannot be shared");
      }
    }
    auto listed = list_owned(ns, [&](int q) {
      return q >= 0 && q < records::kSlots && load(L->slots[q].state) == records::kSlotFree;
    });
    // No prefix is granted over names nobody could look for.
    if (!listed) {
      return fail(listed.error().code, "cannot check free prefixes for a previous user's names: " + listed.error().message);
    }
    const Owned& leftovers = *listed;
    int p = -1;
    for (int q = 0; q < records::kSlots && p < 0; ++q) {
      if (load(L->slots[q].state) != records::kSlotFree) continue;
      auto it = leftovers.find(q);
      if (it != leftovers.end()) {
        Owned one{{q, it->second}};
        if (!c.remove_names(one, nullptr, removed).empty()) continue;  // another user's names stay: skip it
      }
      p = q;
    }
    if (p < 0) {
      return fail(Code::kExhausted, "no free prefix: all " + std::to_string(records::kSlots) +
                                        " are held by live jobs or blocked by another user's segments");
    }
    Slot& s = L->slots[p];
    std::memset(&s, 0, sizeof s);
    store(s.state, records::kSlotWriting);
    s.local_world_size = static_cast<std::uint32_t>(spec.local_world_size);
    const std::uint64_t serial = L->h.next_serial++;
    s.serial = serial;
    std::memcpy(s.job_key, spec.job_key.data(), spec.job_key.size());
    std::memcpy(s.dirs, blob, blob_len);
    s.dir_bytes = blob_len;
    s.holders[spec.local_rank].who = me;
    s.holders[spec.local_rank].state = records::kHolderAttached;
    failpoint::crash_window("crash/registry/claim-half-written");
    store(s.state, records::kSlotActive);
    return std::pair{p, serial};
  }

  // Waits until every local rank joined, or the job failed, without the lock:
  // the decision is one compare-and-swap on the slot's state (kActive to
  // kJoined by whoever sees everyone joined, to kPoisoned under the lock with
  // a reason, or to kWithdrawn by a rank that cannot get the lock), so every
  // rank sees the same outcome. The lock is taken only to fail the job.
  Status join_wait(int p, std::uint64_t serial, const JobSpec& spec, Deadline d, const Owner& me) {
    Slot& s = L->slots[p];
    Holder& mine = s.holders[spec.local_rank];
    // A failed job: our holder goes, under the lock if we can get it (which
    // also frees the slot once nobody holds it), else lock-free: the entry is
    // ours, and the slot cannot be reused while we are attached and alive.
    auto leave = [&](Error e) -> Status {
      if (auto g = lock(Deadline::after(kLockSlice), lock_id(me))) {
        core().drop_holder(p, serial, spec.local_rank, me);
      } else if (load(s.state) != records::kSlotFree && s.serial == serial) {
        store(mine.state, records::kHolderReleased);
        core().bump();
      }
      return std::unexpected(std::move(e));
    };
    for (;;) {
      const std::uint32_t seen = load(L->h.epoch);
      const std::uint32_t st = load(s.state);
      if (s.serial != serial || !in_use(st)) {
        return fail(Code::kBroken, "prefix " + std::to_string(p) + " of job '" + spec.job_key +
                                       "' was reclaimed while waiting");
      }
      if (st == records::kSlotJoined) return {};
      if (st == records::kSlotPoisoned || st == records::kSlotWithdrawn) return leave(Core::outcome(s));
      if (joined(s) == spec.local_world_size) {
        if (cas(s.state, records::kSlotActive, records::kSlotJoined)) core().bump();
        continue;
      }
      // Incomplete: a dead rank, or our deadline, fails the job for everyone.
      Code code = Code::kOk;
      std::string why;
      {
        LeaseProbe probe(ns);
        for (std::uint32_t r = 0; r < s.local_world_size && why.empty(); ++r) {
          const Holder& h = s.holders[r];
          if (load(h.state) == records::kHolderAttached && !probe.alive(h.who)) {
            code = Code::kBroken;
            why = rank_desc(static_cast<int>(r), h.who) + " of job '" + spec.job_key + "' died before all " +
                  std::to_string(s.local_world_size) + " local ranks joined";
          }
        }
      }
      if (why.empty() && d.passed()) {
        std::string missing;
        for (std::uint32_t r = 0; r < s.local_world_size; ++r) {
          if (load(s.holders[r].state) == records::kHolderEmpty) missing += (missing.empty() ? "" : ",") + std::to_string(r);
        }
        code = Code::kTimeout;
        why = "timed out after " + std::to_string(spec.timeout.count()) + " ms: local ranks [" + missing +
              "] of job '" + spec.job_key + "' never joined";
      }
      if (!why.empty()) {
        auto g = lock(Deadline::after(kLockSlice), lock_id(me));
        if (g) {
          // The last rank may have joined since we looked: then it is not a failure.
          if (load(s.state) == records::kSlotActive && joined(s) < spec.local_world_size) core().poison(s, code, why);
          const std::uint32_t now = load(s.state);
          if (now == records::kSlotPoisoned || now == records::kSlotWithdrawn) {
            Error e = Core::outcome(s);
            core().drop_holder(p, serial, spec.local_rank, me);
            return std::unexpected(std::move(e));
          }
          continue;
        }
        if (d.passed()) {
          // Without the lock no reason can be written, but the job must still
          // fail for every rank, not just for us.
          if (cas(s.state, records::kSlotActive, records::kSlotWithdrawn)) {
            failpoint::crash_window("crash/registry/withdrawn");
            store(mine.state, records::kHolderWithdrawn);
            core().bump();
            return fail(code, why + "; the registry lock could not be taken (" + g.error().message +
                                  "), so this rank withdrew and the job fails for every rank");
          }
          continue;  // decided meanwhile: see how
        }
      }
      failpoint::crash_window("crash/registry/wait-before-sleep");
      auto slice = d.passed() ? std::chrono::nanoseconds(kLockSlice) : std::min<std::chrono::nanoseconds>(kLivenessPoll, d.left());
      std::atomic_ref<std::uint32_t> waiters(L->h.epoch_waiters);
      waiters.fetch_add(1, std::memory_order_seq_cst);
      sys::futex_wait_for(&L->h.epoch, seen, slice);
      waiters.fetch_sub(1, std::memory_order_seq_cst);
    }
  }
};

Registry::Registry(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Registry::Registry(Registry&&) noexcept = default;
Registry& Registry::operator=(Registry&&) noexcept = default;
Registry::~Registry() = default;
const Namespace& Registry::ns() const { return impl_->ns; }

Result<Registry> Registry::open(const Namespace& ns, bool create, std::chrono::milliseconds timeout) {
  if (auto v = ns.validate(); !v) return std::unexpected(v.error());
  if (timeout.count() < 0) return fail(Code::kInvalidArgument, "negative timeout");
  auto seg = Segment::open(ns, registry_spec(), create, Deadline::after(timeout));
  if (!seg) return std::unexpected(seg.error());
  auto impl = std::make_unique<Impl>();
  impl->ns = ns;
  impl->seg = std::move(*seg);
  impl->L = static_cast<RegistryLayout*>(impl->seg.data());
  impl->create = create;
  impl->pid = ::getpid();
  return Registry(std::move(impl));
}

Result<Lease> Registry::acquire(const JobSpec& spec_in) {
  JobSpec spec = spec_in;
  if (spec.job_key.empty() || spec.job_key.size() >= records::kJobKeyMax || !records::valid_utf8(spec.job_key)) {
    return fail(Code::kInvalidArgument, "job key must be 1..127 bytes of UTF-8");
  }
  if (spec.local_world_size <= 0) {
    return fail(Code::kInvalidArgument,
                "local world size is not set: refusing to guess (every rank would think it leads); "
                "set LOCAL_WORLD_SIZE or JobSpec::local_world_size");
  }
  if (spec.local_world_size > records::kMaxRanks) {
    return fail(Code::kInvalidArgument, "local world size " + std::to_string(spec.local_world_size) +
                                            " exceeds the maximum of " + std::to_string(records::kMaxRanks));
  }
  if (spec.local_rank < 0 || spec.local_rank >= spec.local_world_size) {
    return fail(Code::kInvalidArgument, "local rank " + std::to_string(spec.local_rank) + " outside [0, " +
                                            std::to_string(spec.local_world_size) + ")");
  }
  if (spec.timeout.count() < 0) {
    return fail(Code::kInvalidArgument, "negative timeout " + std::to_string(spec.timeout.count()) +
                                            " ms (milliseconds::max() means no deadline)");
  }
  std::vector<records::LocalDir> raw;
  for (auto& d : spec.dirs) {
    if (d.path.empty() || !records::valid_utf8(d.path)) return fail(Code::kInvalidArgument, "local dir must be non-empty UTF-8");
    d.path = normalise(d.path);
    for (const auto& r : raw) {
      if (r.path == d.path) return fail(Code::kInvalidArgument, "Reused local directory: '" + d.path + "' appears twice in this job's list");
    }
    raw.push_back(records::LocalDir{d.path, d.has_remote});
  }
  std::uint8_t blob[records::kDirBlob];
  std::uint32_t blob_len = 0;
  if (!records::encode_dirs(raw, blob, &blob_len)) {
    return fail(Code::kInvalidArgument, "local dirs do not fit in a registry record (4 KiB)");
  }

  Impl& I = *impl_;
  const Deadline d = Deadline::after(spec.timeout);
  // Held from before our holder is written until it is released: our liveness.
  auto lease = LeaseRef::take(I.ns, d);
  if (!lease) return std::unexpected(lease.error());
  const Owner me = lease->owner();
  int p = -1;
  std::uint64_t serial = 0;
  std::vector<std::string> removed;
  {
    auto g = I.lock(d, lock_id(me));
    if (!g) return std::unexpected(g.error());
    failpoint::crash_window("crash/registry/acquire-locked");
    auto found = I.find_job(spec, blob, blob_len, me, &removed);
    if (!found) return std::unexpected(found.error());
    if (*found >= 0) {
      p = *found;
      Slot& s = I.L->slots[p];
      Holder& h = s.holders[spec.local_rank];
      h.who = me;
      failpoint::crash_window("crash/registry/join-half-written");
      store(h.state, records::kHolderAttached);
      serial = s.serial;
    } else {
      auto claimed = I.claim(spec, blob, blob_len, me, &removed);
      if (!claimed) return std::unexpected(claimed.error());
      std::tie(p, serial) = *claimed;
    }
    I.core().bump();
  }
  failpoint::crash_window("crash/registry/after-claim");
  if (auto w = I.join_wait(p, serial, spec, d, me); !w) return std::unexpected(w.error());
  failpoint::crash_window("crash/registry/joined");
  lease->keep();  // released by release()
  return Lease{p, serial, spec.local_rank, ::getpid(), std::move(removed)};
}

Status Registry::release(const Lease& lease) {
  if (lease.prefix < 0 || lease.prefix >= records::kSlots) return fail(Code::kInvalidArgument, "lease has no prefix");
  if (lease.pid != 0 && lease.pid != ::getpid()) {
    // A forked child's copy: the holding is its parent's, never the child's to end.
    return fail(Code::kInvalidArgument, "prefix " + std::to_string(lease.prefix) + " is held by pid " +
                                            std::to_string(lease.pid) + ", which acquired it; pid " +
                                            std::to_string(::getpid()) + " (a forked child?) cannot release it");
  }
  const Owner me = LeaseRef::current(impl_->ns.root);
  if (me.lease_token == 0) return {};  // we hold nothing here: released already
  bool dropped = false;
  Status names;
  {
    auto g = impl_->lock(Deadline::after(std::chrono::milliseconds(10000)), lock_id(me));
    if (!g) return std::unexpected(g.error());
    dropped = impl_->core().drop_holder(lease.prefix, lease.serial, lease.local_rank, me, &names);
  }
  if (dropped) LeaseRef::drop(impl_->ns.root);
  if (!names) {
    return fail(names.error().code, "released prefix " + std::to_string(lease.prefix) +
                                        ", but its names stay until the next sweep: " + names.error().message);
  }
  return {};
}

Result<std::vector<std::string>> Registry::reap(std::chrono::milliseconds timeout) {
  if (timeout.count() < 0) return fail(Code::kInvalidArgument, "negative timeout");
  return impl_->under_own_lease<std::vector<std::string>>(
      Deadline::after(timeout), [&]() -> Result<std::vector<std::string>> {
        std::vector<std::string> removed;
        LeaseProbe probe(impl_->ns);
        if (auto s = impl_->core().sweep(probe, true, nullptr, &removed); !s)
          return std::unexpected(s.error());
        return removed;
      });
}

Result<std::vector<SlotInfo>> Registry::snapshot(std::chrono::milliseconds timeout) {
  if (timeout.count() < 0) return fail(Code::kInvalidArgument, "negative timeout");
  return impl_->under_own_lease<std::vector<SlotInfo>>(
      Deadline::after(timeout), [&]() -> Result<std::vector<SlotInfo>> {
        LeaseProbe probe(impl_->ns);
        std::vector<SlotInfo> out;
        for (int p = 0; p < records::kSlots; ++p) {
          const Slot& s = impl_->L->slots[p];
          const std::uint32_t st = load(s.state);
          if (!in_use(st) || records::validate_slot(s) != nullptr) continue;
          SlotInfo i;
          i.prefix = p;
          i.job_key = s.job_key;
          i.serial = s.serial;
          i.local_world_size = static_cast<int>(s.local_world_size);
          i.attached = joined(s);
          i.poisoned = st == records::kSlotPoisoned || st == records::kSlotWithdrawn;
          i.reason = i.poisoned ? Core::outcome(s).message : "";
          i.dirs = slot_dirs(s);
          for (std::uint32_t r = 0; r < s.local_world_size; ++r) {
            const Holder& h = s.holders[r];
            if (load(h.state) == records::kHolderAttached)
              i.holders.push_back(ProcessId{h.who.pid, h.who.start_time});
          }
          i.live = Core::slot_live(probe, s);
          out.push_back(std::move(i));
        }
        return out;
      });
}

Result<RegistryJudgement> clean_registry(const Namespace& ns, const InitLock& held, Deadline d, CleanReport& rep,
                                         CleanerLease& lease) {
  const std::string name = ns.shm_name(kSuffix);
  const std::string path = std::string(kShmDir) + name;
  struct stat st{};
  if (::lstat(path.c_str(), &st) < 0) return RegistryJudgement{};
  // Another user's registry can hold our jobs' prefixes (root opens any 0600
  // entry, so a root job joins a registry another user created): it is judged
  // like ours when we can open it, but it is never retired or removed.
  const bool foreign = st.st_uid != ::geteuid();
  const std::string owner = "uid " + std::to_string(st.st_uid);
  auto unjudged = [&](std::string why) -> Result<RegistryJudgement> {
    rep.skipped.push_back({name, why});
    return RegistryJudgement{RegistryVerdict::kUnjudged, "cannot be judged: " + why};
  };
  // A registry we cannot read (no fd or address space left, EACCES) is never
  // taken for garbage: ours is then an error (nothing about prefixes can be
  // decided), another user's is left unjudged.
  auto unreadable = [&](const Error& e) -> Result<RegistryJudgement> {
    if (foreign) return unjudged("registry " + name + " is owned by " + owner + " and cannot be read: " + e.message);
    return fail(e.code, "cannot judge registry " + name + " (" + e.message +
                            "): nothing under the namespace's prefixes was removed");
  };
  // Classify what is there without any lock: we hold the init lock, so nobody
  // creates or rebuilds a registry meanwhile.
  bool valid = false, retired = false;
  std::uint32_t version = 0;
  {
    auto fd = sys::shm_open("shm/registry/open", name, O_RDONLY);
    if (!fd && fd.error().code == Code::kNotFound) return RegistryJudgement{};
    if (!fd && foreign) {
      return unjudged("registry " + name + " is owned by " + owner +
                      " and cannot be opened: " + std::strerror(fd.error().sys_errno));
    }
    if (!fd) return unreadable(fd.error());
    auto fst = sys::fstat("shm/registry/fstat", fd->get(), name);
    if (!fst) return unreadable(fst.error());
    if (fst->st_size >= 16) {
      const auto n = static_cast<std::size_t>(fst->st_size);
      void* p = ::mmap(nullptr, n, PROT_READ, MAP_SHARED, fd->get(), 0);
      if (p == MAP_FAILED) return unreadable(sys_error("mmap", name, errno));
      version = records::version_of(p, n, records::kRegistryMagic);
      valid = records::validate_registry_header(p, n) == nullptr;
      retired = valid && load(static_cast<const RegistryLayout*>(p)->h.retired) != 0;
      ::munmap(p, n);
    }
  }
  if (version != 0 && version != records::kVersion) {
    return unjudged("a registry of shmcoord layout version " + std::to_string(version) + " (this library is version " +
                    std::to_string(records::kVersion) + ")");
  }
  if (foreign && (!valid || retired)) {
    // Its owner's next cleanup or acquire tidies it; which of our prefix names
    // it granted before it broke, we cannot tell.
    return unjudged("registry " + name + " is owned by " + owner + " and is " +
                    (retired ? "retired by an interrupted cleanup" : "zero-length, truncated or garbage") +
                    ": left to its owner");
  }
  if (!valid || retired) {
    if (::shm_unlink(name.c_str()) == 0) {
      rep.removed.push_back({name, retired ? "registry retired by a cleanup that was interrupted before unlinking it"
                                           : "registry is zero-length, truncated or garbage"});
    }
    return RegistryJudgement{};
  }
  auto seg = Segment::open(ns, registry_spec(), false, d, &held);
  if (!seg) return unreadable(seg.error());
  auto* L = static_cast<RegistryLayout*>(seg->data());
  Core c{ns, L};
  auto me = lease.id();
  if (!me) return std::unexpected(me.error());
  auto g = LockGuard::lock(&L->h.lock, ns, *me, d, seg->name());
  if (!g) return std::unexpected(g.error());
  if (g->owner_died()) c.repair();
  failpoint::crash_window("crash/cleanup/registry-locked");
  {
    // Frees dead jobs' slots (as any acquire in the namespace does) and removes
    // only our names (remove_entry never touches another user's).
    LeaseProbe probe(ns);
    if (auto swept = c.sweep(probe, true, &rep, nullptr); !swept) {
      return fail(swept.error().code, "cannot list the namespace's names: " + swept.error().message +
                                          "; no dead job's prefix was freed");
    }
  }
  failpoint::crash_window("crash/cleanup/after-sweep");
  int used = 0;
  for (const Slot& s : L->slots) used += load(s.state) != records::kSlotFree;
  if (foreign) {
    rep.skipped.push_back({name, "another user's registry (" + owner + "), " + std::to_string(used) +
                                     " prefixes in use: its prefix names were judged under its lock, the registry "
                                     "is left to its owner"});
    return RegistryJudgement{RegistryVerdict::kStays, ""};
  }
  if (used > 0) {
    rep.kept.push_back({name, std::to_string(used) + " live prefixes"});
    return RegistryJudgement{RegistryVerdict::kStays, ""};
  }
  // Retired first, under the lock: a process that still maps it reopens by
  // name (and, needing the init lock to create a new one, waits for us).
  store(L->h.retired, 1);
  failpoint::crash_window("crash/cleanup/registry-retired");
  if (shm_inode(name) == seg->inode() && ::shm_unlink(name.c_str()) == 0) rep.removed.push_back({name, "registry is empty"});
  return RegistryJudgement{};
}

}  // namespace shmcoord
