#include "shmcoord/registry.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "names.h"
#include "records.h"
#include "robust_mutex.h"
#include "segment.h"
#include "shmcoord/failpoint.h"

namespace shmcoord {
namespace {

using records::Holder;
using records::RegistryLayout;
using records::Slot;

constexpr const char* kSuffix = "registry";
constexpr auto kLivenessPoll = std::chrono::milliseconds(100);

using sys::load;
using sys::store;

SegmentSpec registry_spec() {
  SegmentSpec s;
  s.suffix = kSuffix;
  s.size = sizeof(RegistryLayout);
  s.fp_area = "registry";
  s.init = [](void* p) {
    auto* L = static_cast<RegistryLayout*>(p);
    // Fresh tmpfs pages are zero: only the header needs writing.
    L->h.version = records::kVersion;
    L->h.layout_size = sizeof(RegistryLayout);
    L->h.slot_count = records::kSlots;
    L->h.retired = 0;
    L->h.epoch = 0;
    L->h.next_serial = 1;
    init_robust_mutex(&L->h.mutex);
    std::atomic_ref<std::uint64_t>(L->h.magic).store(records::kRegistryMagic, std::memory_order_release);
  };
  s.validate = [](const void* p, std::size_t n) { return records::validate_registry_header(p, n); };
  s.retired = [](const void* p) { return load(static_cast<const RegistryLayout*>(p)->h.retired) != 0; };
  return s;
}

ProcessId holder_id(const Holder& h) { return ProcessId{h.pid, h.start_time}; }

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

void set_reason(Slot& s, Code code, const std::string& why) {
  s.poison_code = static_cast<std::uint32_t>(code);
  std::size_t n = std::min(why.size(), records::kReasonMax - 1);
  std::memcpy(s.reason, why.data(), n);
  s.reason[n] = '\0';
}

}  // namespace

std::string default_job_key() {
  if (const char* k = std::getenv("SHMCOORD_JOB_KEY"); k && *k) return k;
  if (const char* k = std::getenv("TORCHELASTIC_RUN_ID"); k && *k) return std::string("torchelastic:") + k;
  pid_t pp = ::getppid();
  auto id = identity_of(pp);
  return "ppid:" + std::to_string(pp) + ":" + std::to_string(id ? id->start_time : 0);
}

struct Registry::Impl {
  Namespace ns;
  Segment seg;
  RegistryLayout* L = nullptr;

  // Locks the registry, reopening it when cleanup retired the one we hold.
  Result<RobustGuard> lock(Deadline d) {
    for (;;) {
      auto g = RobustGuard::lock(&L->h.mutex, d, seg.name());
      if (!g) return g;
      if (g->owner_died()) repair();
      if (load(L->h.retired) == 0) return g;
      g->unlock();
      auto s = Segment::open(ns, registry_spec(), true, d);
      if (!s) return std::unexpected(s.error());
      seg = std::move(*s);
      L = static_cast<RegistryLayout*>(seg.data());
    }
  }

  void bump() {
    std::atomic_ref<std::uint32_t>(L->h.epoch).fetch_add(1, std::memory_order_acq_rel);
    sys::futex_wake_all(&L->h.epoch);
  }

  // The previous owner died holding the lock: drop claims it was half-way through.
  void repair() {
    for (Slot& s : L->slots) {
      if (s.state == records::kSlotWriting || records::validate_slot(s) != nullptr) std::memset(&s, 0, sizeof s);
    }
    bump();
  }

  static bool slot_live(const Slot& s) {
    if (s.state != records::kSlotActive && s.state != records::kSlotPoisoned) return false;
    if (records::validate_slot(s) != nullptr) return false;
    bool any_alive = false, attached_alive = false;
    for (std::uint32_t r = 0; r < s.local_world_size; ++r) {
      const Holder& h = s.holders[r];
      if (h.state == records::kHolderEmpty) continue;
      if (!is_alive(holder_id(h))) continue;
      any_alive = true;
      if (h.state == records::kHolderAttached) attached_alive = true;
    }
    if (attached_alive) return true;
    // A rank that finished early keeps the prefix for ranks still to come.
    return s.state == records::kSlotActive && s.attached < s.local_world_size && any_alive;
  }

  // Frees dead slots and removes their leftovers; with `want` >= 0 also
  // clears prefix `want` for a claim. Returns the names removed.
  std::vector<std::string> sweep(std::set<int>* foreign = nullptr) {
    std::vector<std::string> removed;
    bool any_dead = false;
    std::vector<int> dead;
    for (int p = 0; p < records::kSlots; ++p) {
      const Slot& s = L->slots[p];
      if (s.state != records::kSlotFree && !slot_live(s)) dead.push_back(p);
    }
    any_dead = !dead.empty();
    auto owned = list_owned(ns);
    for (auto& [p, entries] : owned) {
      if (p < 0 || p >= records::kSlots) continue;
      const Slot& s = L->slots[p];
      bool stale = s.state == records::kSlotFree || std::find(dead.begin(), dead.end(), p) != dead.end();
      if (!stale) continue;
      for (const auto& e : entries) {
        std::string why = remove_entry(e);
        if (why.empty()) {
          removed.push_back(e.name);
        } else if (foreign) {
          foreign->insert(p);
        }
      }
    }
    for (int p : dead) std::memset(&L->slots[p], 0, sizeof(Slot));
    if (any_dead) bump();
    return removed;
  }

  std::string describe(const Slot& s, int p) {
    std::string who;
    for (std::uint32_t r = 0; r < s.local_world_size; ++r) {
      const Holder& h = s.holders[r];
      if (h.state == records::kHolderAttached && is_alive(holder_id(h))) {
        who = ", pid " + std::to_string(h.pid);
        break;
      }
    }
    return "job '" + std::string(s.job_key) + "' (prefix " + std::to_string(p) + who + ")";
  }

  Error poison(Slot& s, Code code, const std::string& why) {
    if (s.state != records::kSlotPoisoned) {
      set_reason(s, code, why);
      store(s.state, records::kSlotPoisoned);
      bump();
    }
    return make_error(static_cast<Code>(s.poison_code), s.reason);
  }

  void drop_holder(int p, std::uint64_t serial, int rank) {
    Slot& s = L->slots[p];
    if (s.serial != serial || rank < 0 || rank >= records::kMaxRanks) return;
    Holder& h = s.holders[rank];
    if (h.state == records::kHolderAttached && holder_id(h) == self_identity()) {
      h.state = records::kHolderReleased;
    }
    failpoint::crash_window("crash/registry/release-before-free");
    if (!slot_live(s)) {
      std::memset(&s, 0, sizeof s);
      sweep();
    }
    bump();
  }
};

Registry::Registry(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Registry::Registry(Registry&&) noexcept = default;
Registry& Registry::operator=(Registry&&) noexcept = default;
Registry::~Registry() = default;
const Namespace& Registry::ns() const { return impl_->ns; }

Result<Registry> Registry::open(const Namespace& ns, bool create, std::chrono::milliseconds timeout) {
  if (auto v = ns.validate(); !v) return std::unexpected(v.error());
  auto seg = Segment::open(ns, registry_spec(), create, Deadline::after(timeout));
  if (!seg) return std::unexpected(seg.error());
  auto impl = std::make_unique<Impl>();
  impl->ns = ns;
  impl->seg = std::move(*seg);
  impl->L = static_cast<RegistryLayout*>(impl->seg.data());
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
  const ProcessId me = self_identity();
  int p = -1;
  std::uint64_t serial = 0;
  {
    auto g = I.lock(d);
    if (!g) return std::unexpected(g.error());
    std::set<int> foreign;
    I.sweep(&foreign);
    for (int q = 0; q < records::kSlots; ++q) {
      Slot& s = I.L->slots[q];
      if ((s.state == records::kSlotActive || s.state == records::kSlotPoisoned) &&
          std::strncmp(s.job_key, spec.job_key.c_str(), records::kJobKeyMax) == 0) {
        p = q;
        break;
      }
    }
    if (p >= 0) {
      Slot& s = I.L->slots[p];
      if (s.state == records::kSlotPoisoned) return std::unexpected(make_error(static_cast<Code>(s.poison_code), s.reason));
      std::string rank = "local rank " + std::to_string(spec.local_rank) + " (pid " + std::to_string(me.pid) + ")";
      if (static_cast<int>(s.local_world_size) != spec.local_world_size) {
        return std::unexpected(I.poison(s, Code::kMismatch,
            "ranks disagree on local world size: " + rank + " says " + std::to_string(spec.local_world_size) +
            ", job '" + spec.job_key + "' registered " + std::to_string(s.local_world_size)));
      }
      if (slot_dirs(s) != spec.dirs) {
        return std::unexpected(I.poison(s, Code::kMismatch,
            "ranks disagree on local dirs: " + rank + " differs from what job '" + spec.job_key + "' registered"));
      }
      Holder& h = s.holders[spec.local_rank];
      if (h.state != records::kHolderEmpty && holder_id(h) != me && is_alive(holder_id(h))) {
        return std::unexpected(I.poison(s, Code::kMismatch,
            "two processes claim local rank " + std::to_string(spec.local_rank) + " of job '" + spec.job_key +
            "': pid " + std::to_string(h.pid) + " and pid " + std::to_string(me.pid)));
      }
      if (h.state == records::kHolderEmpty) ++s.attached;
      h = Holder{me.pid, records::kHolderAttached, me.start_time};
      serial = s.serial;
    } else {
      for (int q = 0; q < records::kSlots; ++q) {
        const Slot& s = I.L->slots[q];
        if (s.state != records::kSlotActive && s.state != records::kSlotPoisoned) continue;
        for (const auto& theirs : slot_dirs(s)) {
          for (const auto& mine : spec.dirs) {
            if (theirs.path == mine.path && (theirs.has_remote || mine.has_remote)) {
              return fail(Code::kInUse, "Reused local directory: '" + mine.path + "' is in use by live " +
                                            I.describe(s, q) + "; a local dir with a remote cannot be shared");
            }
          }
        }
      }
      for (int q = 0; q < records::kSlots; ++q) {
        if (I.L->slots[q].state == records::kSlotFree && !foreign.contains(q)) {
          p = q;
          break;
        }
      }
      if (p < 0) return fail(Code::kExhausted, "no free prefix: all " + std::to_string(records::kSlots) + " are held by live jobs or blocked by another user's segments");
      Slot& s = I.L->slots[p];
      std::memset(&s, 0, sizeof s);
      store(s.state, records::kSlotWriting);
      s.local_world_size = static_cast<std::uint32_t>(spec.local_world_size);
      s.attached = 1;
      s.serial = serial = I.L->h.next_serial++;
      std::memcpy(s.job_key, spec.job_key.data(), spec.job_key.size());
      std::memcpy(s.dirs, blob, blob_len);
      s.dir_bytes = blob_len;
      s.holders[spec.local_rank] = Holder{me.pid, records::kHolderAttached, me.start_time};
      failpoint::crash_window("crash/registry/claim-half-written");
      store(s.state, records::kSlotActive);
    }
    I.bump();
  }
  failpoint::crash_window("crash/registry/after-claim");

  // Wait until every local rank has joined (or the job is poisoned). On any
  // failure our holder entry is released, so the poisoned slot frees itself
  // once every rank has seen the error.
  for (;;) {
    std::uint32_t seen = load(I.L->h.epoch);
    {
      auto g = I.lock(d);
      if (!g) return std::unexpected(g.error());
      Slot& s = I.L->slots[p];
      auto give_up = [&](Error e) -> Result<Lease> {
        I.drop_holder(p, serial, spec.local_rank);
        return std::unexpected(std::move(e));
      };
      if (s.serial != serial) {
        return give_up(make_error(Code::kBroken, "prefix " + std::to_string(p) + " of job '" + spec.job_key +
                                                     "' was reclaimed while waiting"));
      }
      if (s.state == records::kSlotPoisoned) return give_up(make_error(static_cast<Code>(s.poison_code), s.reason));
      if (static_cast<int>(s.attached) == spec.local_world_size) break;
      for (std::uint32_t r = 0; r < s.local_world_size; ++r) {
        const Holder& h = s.holders[r];
        if (h.state == records::kHolderAttached && !is_alive(holder_id(h))) {
          return give_up(I.poison(s, Code::kBroken, "local rank " + std::to_string(r) + " (pid " + std::to_string(h.pid) +
                                                         ") of job '" + spec.job_key + "' died before all " +
                                                         std::to_string(s.local_world_size) + " local ranks joined"));
        }
      }
      if (d.passed()) {
        std::string missing;
        for (std::uint32_t r = 0; r < s.local_world_size; ++r) {
          if (s.holders[r].state == records::kHolderEmpty) missing += (missing.empty() ? "" : ",") + std::to_string(r);
        }
        return give_up(I.poison(s, Code::kTimeout, "timed out after " + std::to_string(spec.timeout.count()) +
                                                       " ms: local ranks [" + missing + "] of job '" + spec.job_key +
                                                       "' never joined"));
      }
    }
    sys::futex_wait_for(&I.L->h.epoch, seen, std::min<std::chrono::nanoseconds>(kLivenessPoll, d.left()));
  }
  failpoint::crash_window("crash/registry/joined");
  return Lease{p, serial, spec.local_rank};
}

Status Registry::release(const Lease& lease) {
  if (lease.prefix < 0 || lease.prefix >= records::kSlots) return fail(Code::kInvalidArgument, "lease has no prefix");
  auto g = impl_->lock(Deadline::after(std::chrono::milliseconds(10000)));
  if (!g) return std::unexpected(g.error());
  impl_->drop_holder(lease.prefix, lease.serial, lease.local_rank);
  return {};
}

Result<std::vector<std::string>> Registry::reap(std::chrono::milliseconds timeout) {
  auto g = impl_->lock(Deadline::after(timeout));
  if (!g) return std::unexpected(g.error());
  return impl_->sweep();
}

Result<std::vector<SlotInfo>> Registry::snapshot(std::chrono::milliseconds timeout) {
  auto g = impl_->lock(Deadline::after(timeout));
  if (!g) return std::unexpected(g.error());
  std::vector<SlotInfo> out;
  for (int p = 0; p < records::kSlots; ++p) {
    const Slot& s = impl_->L->slots[p];
    if (s.state != records::kSlotActive && s.state != records::kSlotPoisoned) continue;
    if (records::validate_slot(s) != nullptr) continue;
    SlotInfo i;
    i.prefix = p;
    i.job_key = s.job_key;
    i.serial = s.serial;
    i.local_world_size = static_cast<int>(s.local_world_size);
    i.attached = static_cast<int>(s.attached);
    i.poisoned = s.state == records::kSlotPoisoned;
    i.reason = i.poisoned ? s.reason : "";
    i.dirs = slot_dirs(s);
    for (std::uint32_t r = 0; r < s.local_world_size; ++r) {
      if (s.holders[r].state == records::kHolderAttached) i.holders.push_back(holder_id(s.holders[r]));
    }
    i.live = Impl::slot_live(s);
    out.push_back(std::move(i));
  }
  return out;
}

}  // namespace shmcoord
