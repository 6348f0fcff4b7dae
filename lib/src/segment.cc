#include "segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <cerrno>
#include <thread>

#include "records.h"
#include "shmcoord/failpoint.h"

namespace shmcoord {

void backoff(int attempt, Deadline d) {
  auto pause = std::chrono::microseconds(100) * (1 << std::min(attempt, 7));  // <= 12.8 ms
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(d.left());
  std::this_thread::sleep_for(std::min<std::chrono::microseconds>(pause, left));
}

ino_t shm_inode(const std::string& shm_name) {
  std::string path = std::string(kShmDir) + shm_name;
  struct stat st{};
  if (::lstat(path.c_str(), &st) < 0) return 0;
  return st.st_ino;
}

Result<InitLock> InitLock::try_acquire(const Namespace& ns) {
  InitLock l;
  l.path_ = ns.shm_name(kInitSuffix);
  for (int round = 0; round < 8; ++round) {
    auto fd = sys::shm_open("lock/init/open", l.path_, O_RDWR | O_CREAT);
    if (!fd) return std::unexpected(fd.error());
    auto locked = sys::flock("lock/init/flock", fd->get(), LOCK_EX | LOCK_NB, l.path_);
    if (!locked) return std::unexpected(locked.error());
    // The name may have been unlinked (by cleanup) between our open and flock.
    struct stat mine{};
    if (::fstat(fd->get(), &mine) < 0) return std::unexpected(sys_error("fstat", l.path_, errno));
    if (shm_inode(l.path_) == mine.st_ino) {
      l.fd_ = std::move(*fd);
      l.owner_ = mine.st_uid;
      return l;
    }
  }
  return fail(Code::kIo, "init lock " + l.path_ + " keeps being replaced");
}

Result<InitLock> InitLock::acquire(const Namespace& ns, Deadline d) {
  for (int attempt = 0;; ++attempt) {
    auto l = try_acquire(ns);
    if (l || l.error().code != Code::kInUse) return l;
    if (d.passed()) {
      return fail(Code::kTimeout, "timed out waiting for init lock " + ns.shm_name(kInitSuffix) +
                                      " (held by a live or stopped process)");
    }
    backoff(attempt, d);
  }
}

Status InitLock::unlink_held() {
  if (owner_ != ::geteuid()) {
    return fail(Code::kPermission, "init lock " + path_ + " is owned by uid " + std::to_string(owner_) + ": not removing it");
  }
  return sys::shm_unlink("lock/init/unlink", path_);
}

Result<Segment> Segment::open(const Namespace& ns, const SegmentSpec& spec, bool create, Deadline d,
                              const InitLock* held) {
  const std::string name = ns.shm_name(spec.suffix);
  const SegmentPoints& fp = spec.points;

  // Maps an existing segment; false if it is not a live, published one of ours.
  bool retired_seen = false;  // a cleanup retired it: it never becomes live again
  auto map_existing = [&](const sys::Fd& fd, Segment* out) -> Result<bool> {
    auto st = sys::fstat(fp.fstat, fd.get(), name);
    if (!st) return std::unexpected(st.error());
    if (static_cast<std::size_t>(st->st_size) != spec.size) return false;
    auto m = sys::mmap(fp.mmap, fd.get(), spec.size, name);
    if (!m) return std::unexpected(m.error());
    if (spec.validate(m->get(), spec.size) != nullptr) return false;
    if (spec.retired(m->get())) {
      retired_seen = true;
      return false;
    }
    out->map_ = std::move(*m);
    out->name_ = name;
    out->ino_ = st->st_ino;
    return true;
  };

  for (int attempt = 0;; ++attempt) {
    {
      // Fast path: a published, live segment needs no lock. Its fd is closed
      // before the slow path opens anything (at most three fds at once).
      auto fd = sys::shm_open(fp.open, name, O_RDWR);
      if (fd) {
        Segment s;
        auto ok = map_existing(*fd, &s);
        if (!ok) return std::unexpected(ok.error());
        if (*ok) return s;
      } else if (fd.error().code != Code::kNotFound) {
        return std::unexpected(fd.error());
      } else if (!create) {
        return std::unexpected(fd.error());
      }
    }
    // Without create, a retired segment is as good as removed: a handle that
    // only looks (a tracker's reap after its process died) must create
    // nothing, not even the init lock, in a namespace a cleanup is removing.
    if (!create && retired_seen) return fail(Code::kNotFound, name + " was retired by a cleanup");

    // Slow path: create, or rebuild what is there, under the init lock.
    std::optional<InitLock> lock;
    if (!held) {
      auto l = InitLock::acquire(ns, d);
      if (!l) return std::unexpected(l.error());
      lock.emplace(std::move(*l));
    }
    if (auto existing = sys::shm_open(fp.open, name, O_RDWR)) {
      Segment s;
      auto ok = map_existing(*existing, &s);
      if (!ok) return std::unexpected(ok.error());
      if (*ok) return s;
      if (!create) {
        return fail(Code::kCorrupt, name + " exists but is not a valid segment (zero-length, truncated or garbage)");
      }
      // A newer (or older) library's live segment is not ours to destroy;
      // one we cannot read (no fd, no address space) is not judged garbage.
      auto st = sys::fstat(fp.fstat, existing->get(), name);
      if (!st) return std::unexpected(st.error());
      if (static_cast<std::size_t>(st->st_size) >= 16) {
        auto m = sys::mmap(fp.mmap, existing->get(), 16, name);
        if (!m) return std::unexpected(m.error());
        std::uint32_t v = records::version_of(m->get(), 16, spec.magic);
        if (v != 0 && v != records::kVersion) {
          return fail(Code::kCorrupt, name + " belongs to shmcoord layout version " + std::to_string(v) +
                                          " (this library is version " + std::to_string(records::kVersion) +
                                          "): not rebuilding another version's segment");
        }
      }
      // Zero-length (creator died before sizing), garbage, or retired: unlink and rebuild.
      if (auto u = sys::shm_unlink(fp.unlink, name); !u && u.error().code != Code::kNotFound) {
        return std::unexpected(u.error());
      }
    } else if (existing.error().code != Code::kNotFound) {
      return std::unexpected(existing.error());
    } else if (!create) {
      return std::unexpected(existing.error());  // removed meanwhile (a cleanup): never recreated by a looker
    }
    auto created = sys::shm_open(fp.create, name, O_RDWR | O_CREAT | O_EXCL);
    if (!created) {
      if (created.error().code == Code::kExists && attempt < 16) continue;  // someone without the lock? retry
      return std::unexpected(created.error());
    }
    failpoint::crash_window(fp.crash_created);
    auto cleanup_on_error = [&](Error e) -> Result<Segment> {
      (void)::shm_unlink(name.c_str());
      return std::unexpected(std::move(e));
    };
    if (auto t = sys::ftruncate(fp.ftruncate, created->get(), static_cast<off_t>(spec.size), name); !t) {
      return cleanup_on_error(t.error());
    }
    if (int e = failpoint::check(fp.fallocate); e != 0) {
      return cleanup_on_error(sys_error("fallocate", name, e));
    }
    if (int e = ::posix_fallocate(created->get(), 0, static_cast<off_t>(spec.size)); e != 0) {
      return cleanup_on_error(sys_error("fallocate", name, e));
    }
    failpoint::crash_window(fp.crash_sized);
    auto st = sys::fstat(fp.fstat, created->get(), name);
    if (!st) return cleanup_on_error(st.error());
    auto m = sys::mmap(fp.mmap, created->get(), spec.size, name);
    if (!m) return cleanup_on_error(m.error());
    spec.init(m->get());
    Segment s;
    s.map_ = std::move(*m);
    s.name_ = name;
    s.ino_ = st->st_ino;
    return s;
  }
}

Status Segment::unlink_if_same(const char* fpoint) {
  if (shm_inode(name_) != ino_) return {};
  auto r = sys::shm_unlink(fpoint, name_);
  if (!r && r.error().code != Code::kNotFound) return r;
  return {};
}

}  // namespace shmcoord
