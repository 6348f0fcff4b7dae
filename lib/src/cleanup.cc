#include "shmcoord/cleanup.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <optional>
#include <set>

#include "names.h"
#include "records.h"
#include "robust_mutex.h"
#include "segment.h"
#include "shmcoord/barrier.h"
#include "shmcoord/process.h"
#include "shmcoord/registry.h"

namespace shmcoord {

std::string CleanReport::to_string() const {
  std::string s;
  auto add = [&](const char* what, const std::vector<Entry>& v) {
    for (const auto& e : v) s += std::string(what) + " " + e.name + (e.reason.empty() ? "" : " (" + e.reason + ")") + "\n";
  };
  add("removed", removed);
  add("kept", kept);
  add("skipped", skipped);
  return s;
}

namespace {

// A non-prefix segment: judged as a barrier if it validates as one.
void judge_other(const OwnedEntry& e, CleanReport& rep) {
  std::string path = std::string(kShmDir) + e.name;
  bool keep = false;
  std::string why;
  if (int fd = ::shm_open(e.name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0); fd >= 0) {
    struct stat st{};
    if (::fstat(fd, &st) == 0 && static_cast<std::size_t>(st.st_size) == sizeof(records::BarrierLayout)) {
      void* p = ::mmap(nullptr, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
      if (p != MAP_FAILED) {
        if (records::validate_barrier(p, st.st_size) == nullptr) {
          const auto* b = static_cast<const records::BarrierLayout*>(p);
          for (const auto& q : b->parts) {
            if (q.state == records::kPartAttached && is_alive(ProcessId{q.pid, q.start_time})) {
              keep = true;
              why = "barrier participant pid " + std::to_string(q.pid) + " is alive";
              break;
            }
          }
        }
        ::munmap(p, st.st_size);
      }
    }
    ::close(fd);
  }
  if (keep) {
    rep.kept.push_back({e.name, why});
    return;
  }
  std::string r = remove_entry(e);
  if (r.empty()) {
    rep.removed.push_back({e.name, "no live owner"});
  } else {
    rep.skipped.push_back({e.name, r});
  }
}

}  // namespace

Result<CleanReport> clean_stale(const Namespace& ns, std::chrono::milliseconds timeout) {
  if (auto v = ns.validate(); !v) return std::unexpected(v.error());
  const Deadline d = Deadline::after(timeout);
  CleanReport rep;
  const bool init_lock_existed = shm_inode(ns.shm_name("init.lock")) != 0;
  auto init = InitLock::acquire(ns, d);
  if (!init) return std::unexpected(init.error());

  // 1. The registry: reap dead jobs (this removes their prefix entries).
  std::set<int> live;
  bool registry_present = false;
  std::optional<Registry> reg;
  const std::string reg_name = ns.shm_name("registry");
  if (shm_inode(reg_name) != 0) {
    registry_present = true;
    struct stat st{};
    std::string path = std::string(kShmDir) + reg_name;
    if (::lstat(path.c_str(), &st) == 0 && st.st_uid != ::geteuid()) {
      rep.skipped.push_back({reg_name, "owned by uid " + std::to_string(st.st_uid)});
    } else {
      // Opening without create never rebuilds; a corrupt registry is removed below.
      int fd = ::shm_open(reg_name.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
      bool valid = false;
      if (fd >= 0) {
        struct stat fst{};
        if (::fstat(fd, &fst) == 0 && static_cast<std::size_t>(fst.st_size) == sizeof(records::RegistryLayout)) {
          void* p = ::mmap(nullptr, fst.st_size, PROT_READ, MAP_SHARED, fd, 0);
          if (p != MAP_FAILED) {
            valid = records::validate_registry_header(p, fst.st_size) == nullptr;
            ::munmap(p, fst.st_size);
          }
        }
        ::close(fd);
      }
      if (!valid) {
        if (::shm_unlink(reg_name.c_str()) == 0) rep.removed.push_back({reg_name, "registry is zero-length, truncated or garbage"});
        registry_present = false;
      } else {
        // Segment::open's fast path needs no init lock (we hold it).
        auto r = Registry::open(ns, false, timeout);
        if (!r) return std::unexpected(r.error());
        reg.emplace(std::move(*r));
        auto reaped = reg->reap(timeout);
        if (!reaped) return std::unexpected(reaped.error());
        for (auto& n : *reaped) rep.removed.push_back({n, "its job's holders are all dead"});
        auto snap = reg->snapshot(timeout);
        if (!snap) return std::unexpected(snap.error());
        for (const auto& s : *snap) {
          if (s.live) live.insert(s.prefix);
        }
      }
    }
  }

  // 2. Everything else under the root.
  for (auto& [p, entries] : list_owned(ns)) {
    for (const auto& e : entries) {
      if (e.name == reg_name) continue;
      if (p >= 0 && live.contains(p)) {
        rep.kept.push_back({e.name, "prefix " + std::to_string(p) + " is held by a live job"});
        continue;
      }
      if (p < 0 && !e.is_lock) {
        judge_other(e, rep);
        continue;
      }
      std::string r = remove_entry(e);
      if (r.empty()) {
        rep.removed.push_back({e.name, p >= 0 ? "prefix " + std::to_string(p) + " has no live holder" : "lock not held"});
      } else if (r.rfind("owned by", 0) == 0) {
        rep.skipped.push_back({e.name, r});
      } else {
        rep.kept.push_back({e.name, r});
      }
    }
  }

  // 3. The registry and init lock, once nothing is registered.
  if (reg && live.empty()) {
    auto snap = reg->snapshot(timeout);
    if (snap && snap->empty()) {
      // Retire under the registry lock so a concurrent opener reopens by name.
      reg.reset();
      int fd = ::shm_open(reg_name.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
      if (fd >= 0) {
        void* p = ::mmap(nullptr, sizeof(records::RegistryLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        ::close(fd);
        if (p != MAP_FAILED) {
          auto* L = static_cast<records::RegistryLayout*>(p);
          auto g = RobustGuard::lock(&L->h.mutex, d, reg_name);
          bool empty = true;
          if (g) {
            for (const auto& s : L->slots) {
              if (s.state != records::kSlotFree) empty = false;
            }
            if (empty) {
              std::atomic_ref<std::uint32_t>(L->h.retired).store(1, std::memory_order_release);
              if (::shm_unlink(reg_name.c_str()) == 0) rep.removed.push_back({reg_name, "registry is empty"});
            }
          }
          if (g) g->unlock();
          ::munmap(p, sizeof(records::RegistryLayout));
          registry_present = !empty;
        }
      }
    }
  } else if (reg) {
    rep.kept.push_back({reg_name, std::to_string(live.size()) + " live prefixes"});
  }
  // The init lock goes once nothing of ours is left (another user's entries
  // may stay: they could not open our 0600 lock anyway).
  bool ours_left = false;
  for (const auto& [p, entries] : list_owned(ns)) {
    for (const auto& e : entries) ours_left |= e.uid == ::geteuid();
  }
  if (!registry_present && !ours_left) {
    if (init->unlink_held() && init_lock_existed) rep.removed.push_back({init->path(), "nothing left to initialise"});
  }
  return rep;
}

}  // namespace shmcoord
