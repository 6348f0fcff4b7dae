#include "segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "shmcoord/failpoint.h"

namespace shmcoord {
namespace {

constexpr const char* kInitSuffix = "init.lock";

std::string fp(const char* area, const char* op) {
  return std::string("shm/") + area + "/" + op;
}

}  // namespace

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
    ::fstat(fd->get(), &mine);
    if (shm_inode(l.path_) == mine.st_ino) {
      l.fd_ = std::move(*fd);
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

Status InitLock::unlink_held() { return sys::shm_unlink("lock/init/unlink", path_); }

Result<Segment> Segment::open(const Namespace& ns, const SegmentSpec& spec, bool create, Deadline d) {
  const std::string name = ns.shm_name(spec.suffix);
  const std::string fp_open = fp(spec.fp_area, "open");
  const std::string fp_stat = fp(spec.fp_area, "fstat");
  const std::string fp_map = fp(spec.fp_area, "mmap");
  const std::string fp_size = fp(spec.fp_area, "ftruncate");
  const std::string fp_create = fp(spec.fp_area, "create");
  const std::string fp_unlink = fp(spec.fp_area, "unlink");
  const std::string crash_created = "crash/" + std::string(spec.fp_area) + "/after-create";
  const std::string crash_sized = "crash/" + std::string(spec.fp_area) + "/after-size";

  auto map_existing = [&](sys::Fd fd, Segment* out) -> Result<bool> {
    auto st = sys::fstat(fp_stat.c_str(), fd.get(), name);
    if (!st) return std::unexpected(st.error());
    if (static_cast<std::size_t>(st->st_size) != spec.size) return false;
    auto m = sys::mmap(fp_map.c_str(), fd.get(), spec.size, name);
    if (!m) return std::unexpected(m.error());
    if (spec.validate(m->get(), spec.size) != nullptr || spec.retired(m->get())) return false;
    out->fd_ = std::move(fd);
    out->map_ = std::move(*m);
    out->name_ = name;
    out->ino_ = st->st_ino;
    return true;
  };

  for (int attempt = 0;; ++attempt) {
    // Fast path: a published, live segment needs no lock.
    auto fd = sys::shm_open(fp_open.c_str(), name, O_RDWR);
    if (fd) {
      Segment s;
      auto ok = map_existing(std::move(*fd), &s);
      if (!ok) return std::unexpected(ok.error());
      if (*ok) return s;
    } else if (fd.error().code != Code::kNotFound) {
      return std::unexpected(fd.error());
    } else if (!create) {
      return std::unexpected(fd.error());
    }

    // Slow path: create, or rebuild what is there, under the init lock.
    auto lock = InitLock::acquire(ns, d);
    if (!lock) return std::unexpected(lock.error());
    auto existing = sys::shm_open(fp_open.c_str(), name, O_RDWR);
    if (existing) {
      sys::Fd keep(::fcntl(existing->get(), F_DUPFD_CLOEXEC, 0));
      Segment s;
      auto ok = map_existing(std::move(*existing), &s);
      if (!ok) return std::unexpected(ok.error());
      if (*ok) return s;
      if (!create) {
        return fail(Code::kCorrupt, name + " exists but is not a valid segment (zero-length, truncated or garbage)");
      }
      // Check the version before rebuilding: a newer library's live segment is
      // not ours to destroy.
      auto st = sys::fstat(fp_stat.c_str(), keep.get(), name);
      if (st && static_cast<std::size_t>(st->st_size) == spec.size) {
        auto m = sys::mmap(fp_map.c_str(), keep.get(), spec.size, name);
        if (m) {
          const char* why = spec.validate(m->get(), spec.size);
          if (why && std::string_view(why).find("version") != std::string_view::npos) {
            return fail(Code::kCorrupt, name + ": " + why);
          }
        }
      }
      // Zero-length (creator died before sizing), garbage, or retired: unlink and rebuild.
      if (auto u = sys::shm_unlink(fp_unlink.c_str(), name); !u && u.error().code != Code::kNotFound) {
        return std::unexpected(u.error());
      }
    } else if (existing.error().code != Code::kNotFound) {
      return std::unexpected(existing.error());
    }
    auto created = sys::shm_open(fp_create.c_str(), name, O_RDWR | O_CREAT | O_EXCL);
    if (!created) {
      if (created.error().code == Code::kExists && attempt < 16) continue;  // someone without the lock? retry
      return std::unexpected(created.error());
    }
    failpoint::crash_window(crash_created.c_str());
    auto cleanup_on_error = [&](Error e) -> Result<Segment> {
      (void)::shm_unlink(name.c_str());
      return std::unexpected(std::move(e));
    };
    if (auto t = sys::ftruncate(fp_size.c_str(), created->get(), static_cast<off_t>(spec.size), name); !t) {
      return cleanup_on_error(t.error());
    }
    if (int e = failpoint::check((std::string("shm/") + spec.fp_area + "/fallocate").c_str()); e != 0) {
      return cleanup_on_error(sys_error("fallocate", name, e));
    }
    if (int e = ::posix_fallocate(created->get(), 0, static_cast<off_t>(spec.size)); e != 0) {
      return cleanup_on_error(sys_error("fallocate", name, e));
    }
    failpoint::crash_window(crash_sized.c_str());
    auto st = sys::fstat(fp_stat.c_str(), created->get(), name);
    if (!st) return cleanup_on_error(st.error());
    auto m = sys::mmap(fp_map.c_str(), created->get(), spec.size, name);
    if (!m) return cleanup_on_error(m.error());
    spec.init(m->get());
    Segment s;
    s.fd_ = std::move(*created);
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
