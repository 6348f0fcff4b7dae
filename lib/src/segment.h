// A fixed-layout shared segment and the namespace-wide init lock.
//
// Creation protocol: a segment is created, sized (fallocate, so ENOSPC is an
// error here rather than SIGBUS later), initialised and published (magic stored
// last) only while holding the init lock, a flock on the shm object
// "/<root>init.lock". It lives beside the segments it guards, not in the lock
// dir, so processes that share /dev/shm share it even when their TMPDIR (and so
// their default lock dir) differs — the original lost mutual exclusion there.
// The kernel drops a flock when its holder dies, so a creator killed between
// create and size leaves a zero-length segment that the next opener, holding the
// lock, recognises and rebuilds. A segment whose `retired` flag is set is being
// unlinked: openers go round again.
//
// The init lock may be unlinked by cleanup only while cleanup holds it;
// lockers re-check that the path still names the inode they locked.
//
// A segment keeps no fd once mapped: the mapping is all its users need, so a
// registry or barrier handle costs no descriptor.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>

#include "shmcoord/error.h"
#include "shmcoord/namespace.h"
#include "sys.h"

namespace shmcoord {

using Clock = std::chrono::steady_clock;

// A point in time a call gives up at. after() saturates: a duration too long
// to add to now() (milliseconds::max() included) is no deadline at all, never
// an overflow into the past.
struct Deadline {
  Clock::time_point at;
  static Deadline after(std::chrono::milliseconds d) {
    const Clock::time_point now = Clock::now();
    if (d.count() <= 0) return Deadline{now};
    // Both in nanoseconds: how far the clock can still go, and d if it fits.
    const auto room = Clock::time_point::max() - now;
    const auto most = std::chrono::duration_cast<std::chrono::milliseconds>(room);
    if (d >= most) return Deadline{Clock::time_point::max()};
    return Deadline{now + std::chrono::duration_cast<Clock::duration>(d)};
  }
  static Deadline never() { return Deadline{Clock::time_point::max()}; }
  bool passed() const { return Clock::now() >= at; }
  std::chrono::nanoseconds left() const {
    auto l = at - Clock::now();
    return l.count() > 0 ? l : std::chrono::nanoseconds(0);
  }
};

// The namespace init lock's name after the root ("/<root>init.lock").
inline constexpr const char* kInitSuffix = "init.lock";

class InitLock {
 public:
  static Result<InitLock> acquire(const Namespace& ns, Deadline d);
  // Non-blocking: kInUse when somebody else holds it.
  static Result<InitLock> try_acquire(const Namespace& ns);
  // Removes the lock file while holding it (cleanup, the last detacher). Never
  // another user's (kPermission): the namespace may be shared with that user's
  // live jobs, and it is theirs to remove.
  Status unlink_held();
  const std::string& path() const { return path_; }
  // The uid that owns the lock file (whoever created it).
  uid_t owner() const { return owner_; }

 private:
  sys::Fd fd_;
  std::string path_;
  uid_t owner_ = 0;
};

// The failpoints of one kind of segment (docs/failpoints.md).
struct SegmentPoints {
  const char* open;
  const char* create;
  const char* fstat;
  const char* mmap;
  const char* ftruncate;
  const char* fallocate;
  const char* unlink;
  const char* crash_created;
  const char* crash_sized;
};

struct SegmentSpec {
  std::string suffix;
  std::size_t size;
  std::uint64_t magic;  // with the version after it: tells another library version's segment from garbage
  SegmentPoints points;
  std::function<void(void*)> init;                  // builds a fresh layout (magic last)
  std::function<const char*(const void*, std::size_t)> validate;
  std::function<bool(const void*)> retired;         // read under no lock: a hint
};

class Segment {
 public:
  // Opens the segment by name, creating (or rebuilding, if it is zero-length,
  // truncated, garbage or retired) it under the init lock when `create` is set.
  // A segment of another library version is never rebuilt (kCorrupt). `held`:
  // the caller already holds the init lock (cleanup), so it is not taken again.
  static Result<Segment> open(const Namespace& ns, const SegmentSpec& spec, bool create, Deadline d,
                              const InitLock* held = nullptr);

  void* data() const { return map_.get(); }
  const std::string& name() const { return name_; }
  ino_t inode() const { return ino_; }
  // Unlinks the name if it still refers to this segment (caller holds the init lock).
  Status unlink_if_same(const char* fp);

 private:
  sys::Mapping map_;
  std::string name_;
  ino_t ino_ = 0;
};

// Inode of /dev/shm/<name without leading slash>, 0 if absent.
ino_t shm_inode(const std::string& shm_name);

// Best-effort pause used between lock attempts (bounded exponential backoff).
void backoff(int attempt, Deadline d);

}  // namespace shmcoord
