#include "lease.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <map>

#include "names.h"
#include "segment.h"
#include "shmcoord/failpoint.h"
#include "sys.h"

namespace shmcoord {

std::atomic<std::uint64_t> g_fork_generation{0};

namespace {

constexpr off_t kCellBytes = 8;
constexpr off_t kLeaseBytes = kCellBytes * kLeaseCells;

// This process's lease in one namespace.
struct Entry {
  pid_t pid = 0;  // the process that took it: a forked child inherits the fd, never the lock
  int fd = -1;
  int refs = 0;
  records::Owner owner{};
};

std::mutex g_mu;
std::map<std::string, Entry> g_leases;  // by namespace root

// A forked child inherits our fds but none of our record locks: right after
// fork it closes the inherited lease fds (dropping only its own locks: none)
// and starts without leases. g_mu is held across fork so the child's copy is
// consistent.
void before_fork() { g_mu.lock(); }
void after_fork_parent() { g_mu.unlock(); }
void after_fork_child() {
  g_fork_generation.fetch_add(1, std::memory_order_relaxed);
  for (auto& [root, e] : g_leases) {
    if (e.fd >= 0) ::close(e.fd);
    e = Entry{};
  }
  g_mu.unlock();
}

// Registered before main(): a fork before any lease is taken still counts.
const bool g_atfork_registered = ::pthread_atfork(&before_fork, &after_fork_parent, &after_fork_child) == 0;

// Our entry for `root`. Caller holds g_mu.
Entry& entry(const std::string& root) {
  (void)g_atfork_registered;
  Entry& e = g_leases[root];
  if (e.pid != ::getpid()) {
    // Started without fork() (clone, vfork): the fd may not be ours to close.
    e = Entry{};
    e.pid = ::getpid();
  }
  return e;
}

// The pid namespace we live in, and whether our /proc shows it (its "self" is
// our pid), so /proc answers about owners in that namespace mean something.
struct ProcView {
  pid_t pid = 0;
  std::uint64_t pidns = 0;
  bool proc_is_ours = false;
};

const ProcView& proc_view() {
  static thread_local ProcView v;
  if (v.pid != ::getpid()) {
    v = ProcView{};
    v.pid = ::getpid();
    struct stat st{};
    if (::stat("/proc/self/ns/pid", &st) == 0) v.pidns = st.st_ino;
    char buf[32];
    ssize_t n = ::readlink("/proc/self", buf, sizeof buf - 1);
    if (n > 0) {
      buf[n] = '\0';
      v.proc_is_ours = std::to_string(v.pid) == buf;
    }
  }
  return v;
}

std::uint64_t random_u64() {
  std::uint64_t x = 0;
  while (x == 0) {
    if (::getrandom(&x, sizeof x, 0) != static_cast<ssize_t>(sizeof x)) x = 0;
  }
  return x;
}

struct flock cell_lock(short type, std::uint32_t cell) {
  struct flock l{};
  l.l_type = type;
  l.l_whence = SEEK_SET;
  l.l_start = static_cast<off_t>(cell) * kCellBytes;
  l.l_len = kCellBytes;
  return l;
}

// The whole file locked by a remover (remove_leases_if_unused), or "".
std::string locked_whole(int fd, const std::string& name) {
  struct flock w{};
  w.l_type = F_WRLCK;
  w.l_whence = SEEK_SET;
  if (::fcntl(fd, F_GETLK, &w) < 0 || w.l_type == F_UNLCK || w.l_start != 0 || w.l_len != 0) return "";
  return "the leases file " + name + " is locked whole by " +
         (w.l_pid > 0 ? "pid " + std::to_string(w.l_pid) : std::string("a process in another pid namespace")) +
         ", a cleanup removing it (nobody held a lease)";
}

// Opens (creating and sizing if need be) the leases file, locks a free cell and
// writes a fresh token into it. Caller holds g_mu. kInUse: the file is locked
// whole by a remover; try again once it is done.
Status take_locked(const Namespace& ns, Entry& e) {
  const std::string name = ns.shm_name(kLeasesSuffix);
  for (int round = 0; round < 8; ++round) {
    auto fd = sys::shm_open("lease/open", name, O_RDWR | O_CREAT);
    if (!fd) return std::unexpected(fd.error());
    struct stat st{};
    if (::fstat(fd->get(), &st) < 0) return std::unexpected(sys_error("fstat", name, errno));
    if (st.st_size < kLeaseBytes) {
      // Growing is idempotent, so racing creators need no lock; never shrink.
      if (auto t = sys::ftruncate("lease/open", fd->get(), kLeaseBytes, name); !t) return std::unexpected(t.error());
    }
    if (int e2 = failpoint::check("lease/lock")) return std::unexpected(sys_error("fcntl(F_SETLK)", name, e2));
    if (std::string why = locked_whole(fd->get(), name); !why.empty()) return fail(Code::kInUse, why);
    // The token also picks where the search for a free cell starts, unless a
    // tester packs the holders (failpoint::lease_first_fit).
    const std::uint64_t token = random_u64();
    const std::uint32_t start =
        failpoint::lease_first_fit() ? 0 : static_cast<std::uint32_t>((token >> 17) % kLeaseCells);
    std::int64_t cell = -1;
    for (std::uint32_t i = 0; i < kLeaseCells && cell < 0; ++i) {
      std::uint32_t c = (start + i) % kLeaseCells;
      struct flock l = cell_lock(F_WRLCK, c);
      if (::fcntl(fd->get(), F_SETLK, &l) == 0) {
        cell = c;
      } else if (errno != EAGAIN && errno != EACCES && errno != EINTR) {
        return std::unexpected(sys_error("fcntl(F_SETLK)", name, errno));
      }
    }
    if (cell < 0) {
      // A remover that locked the file after our first look holds every cell.
      if (std::string why = locked_whole(fd->get(), name); !why.empty()) return fail(Code::kInUse, why);
      return fail(Code::kExhausted, "all " + std::to_string(kLeaseCells) + " lease cells of " + name + " are held");
    }
    failpoint::crash_window("crash/lease/locked");
    if (::pwrite(fd->get(), &token, sizeof token, static_cast<off_t>(cell) * kCellBytes) != sizeof token) {
      return std::unexpected(sys_error("pwrite", name, errno));
    }
    // Removal happens only while nobody holds a cell; if it happened between
    // our open and our lock, the name is gone or names a newer file.
    if (shm_inode(name) != st.st_ino) continue;  // closing fd drops our lock
    e.fd = fd->release();
    e.owner = records::Owner{static_cast<std::int32_t>(::getpid()), static_cast<std::uint32_t>(cell), token,
                             self_identity().start_time, proc_view().pidns};
    return {};
  }
  return fail(Code::kIo, "leases file " + name + " keeps being replaced");
}

}  // namespace

Result<LeaseRef> LeaseRef::take(const Namespace& ns, Deadline d) {
  for (int attempt = 0;; ++attempt) {
    Status taken;
    {
      std::lock_guard<std::mutex> l(g_mu);
      Entry& e = entry(ns.root);
      if (e.refs == 0) taken = take_locked(ns, e);
      if (taken) {
        ++e.refs;
        LeaseRef r;
        r.root_ = ns.root;
        r.owner_ = e.owner;
        r.held_ = true;
        return r;
      }
    }
    // A remover holds the whole file: it unlinks it and lets go within
    // microseconds, unless it is stopped. Waited for without g_mu.
    if (taken.error().code != Code::kInUse) return std::unexpected(taken.error());
    if (d.passed()) return fail(Code::kTimeout, "timed out taking a lease: " + taken.error().message);
    backoff(attempt, d);
  }
}

LeaseRef::LeaseRef(LeaseRef&& o) noexcept : root_(std::move(o.root_)), owner_(o.owner_), held_(o.held_) {
  o.held_ = false;
}

LeaseRef& LeaseRef::operator=(LeaseRef&& o) noexcept {
  if (this != &o) {
    if (held_) drop(root_);
    root_ = std::move(o.root_);
    owner_ = o.owner_;
    held_ = o.held_;
    o.held_ = false;
  }
  return *this;
}

LeaseRef::~LeaseRef() {
  if (held_) drop(root_);
}

void LeaseRef::drop(const std::string& root) {
  std::lock_guard<std::mutex> l(g_mu);
  Entry& e = entry(root);
  if (e.refs == 0) return;
  if (--e.refs == 0) {
    ::close(e.fd);  // the kernel drops our lock with it
    e.fd = -1;
    e.owner = records::Owner{};
  }
}

records::Owner LeaseRef::current(const std::string& root) {
  std::lock_guard<std::mutex> l(g_mu);
  Entry& e = entry(root);
  return e.refs > 0 ? e.owner : records::Owner{};
}

LeaseProbe::LeaseProbe(const Namespace& ns) : lock_(g_mu) {
  Entry& e = entry(ns.root);
  if (e.refs > 0) {
    fd_ = e.fd;
    self_ = e.owner;
    return;
  }
  // We hold no lease, so no lock of ours can be dropped by closing this fd.
  int fd = ::shm_open(ns.shm_name(kLeasesSuffix).c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
  if (fd >= 0) {
    fd_ = fd;
    own_fd_ = true;
  } else {
    missing_ = errno == ENOENT;
  }
}

LeaseProbe::~LeaseProbe() {
  if (own_fd_) ::close(fd_);
}

bool LeaseProbe::is_self(const records::Owner& o) const { return same_owner(self_, o); }

template <typename Match>
bool LeaseProbe::cell_alive(std::uint32_t cell, Match match) {
  if (fd_ < 0) return !missing_;
  // F_GETLK reports a lock of another process only: a record naming our own
  // cell with another token is a dead process that had the cell before us.
  struct flock l = cell_lock(F_WRLCK, cell);
  if (::fcntl(fd_, F_GETLK, &l) < 0) return true;
  if (l.l_type == F_UNLCK) return false;
  std::uint64_t token = 0;
  if (::pread(fd_, &token, sizeof token, static_cast<off_t>(cell) * kCellBytes) != sizeof token) return true;
  // A locked cell with another token: the owner died and someone else took it.
  // (Between that someone's lock and its token write we still answer alive.)
  return match(token);
}

bool LeaseProbe::alive(const records::Owner& o) {
  if (o.lease_token == 0 || o.lease_cell >= kLeaseCells) return false;
  if (is_self(o)) return true;
  return cell_alive(o.lease_cell, [&](std::uint64_t token) { return token == o.lease_token; });
}

bool LeaseProbe::alive_id(std::uint64_t id) {
  const std::uint64_t cell = (id >> 48) - 1;
  if (id == 0 || cell >= kLeaseCells) return false;
  if (self_.lease_token != 0 && lock_id(self_) == id) return true;
  records::Owner o{};
  o.lease_cell = static_cast<std::uint32_t>(cell);
  return cell_alive(o.lease_cell, [&](std::uint64_t token) {
    o.lease_token = token;
    return lock_id(o) == id;
  });
}

Liveness LeaseProbe::liveness(const records::Owner& o) {
  if (!alive(o)) return Liveness::kDead;
  const ProcView& v = proc_view();
  if (v.proc_is_ours && v.pidns != 0 && o.pidns == v.pidns &&
      shmcoord::liveness(ProcessId{o.pid, o.start_time}) == Liveness::kStopped) {
    return Liveness::kStopped;
  }
  return Liveness::kAlive;
}

std::string describe_owner(const records::Owner& o) {
  const ProcView& v = proc_view();
  std::string s = "pid " + std::to_string(o.pid);
  if (o.pidns != 0 && v.pidns != 0 && o.pidns != v.pidns) s += " in another pid namespace";
  return s;
}

std::string remove_leases_if_unused(const Namespace& ns) {
  std::lock_guard<std::mutex> l(g_mu);
  if (entry(ns.root).refs > 0) return "this process holds a lease";
  const std::string name = ns.shm_name(kLeasesSuffix);
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
  if (fd < 0) return errno == ENOENT ? "" : sys_error("shm_open", name, errno).message;
  struct stat st{};
  if (::fstat(fd, &st) == 0 && st.st_uid != ::geteuid()) {
    ::close(fd);
    return "owned by uid " + std::to_string(st.st_uid);
  }
  // Locking the whole file succeeds only if no cell is locked; while we hold
  // it nobody can take a cell, and a taker that locks the unlinked file
  // afterwards sees the name gone and starts again.
  struct flock all{};
  all.l_type = F_WRLCK;
  all.l_whence = SEEK_SET;
  std::string why;
  if (::fcntl(fd, F_SETLK, &all) < 0) {
    why = errno == EAGAIN || errno == EACCES ? "a live (or stopped) process holds a lease"
                                             : sys_error("fcntl(F_SETLK)", name, errno).message;
  } else if (auto u = sys::shm_unlink("lease/unlink", name); !u && u.error().code != Code::kNotFound) {
    why = u.error().message;
  }
  ::close(fd);
  return why;
}

bool remove_namespace_if_unused(const Namespace& ns, InitLock& held) {
  auto left = list_owned(ns);
  if (!left || !left->empty() || !remove_leases_if_unused(ns).empty()) return false;
  return static_cast<bool>(held.unlink_held());
}

void remove_namespace_if_unused(const Namespace& ns, Deadline d) {
  const bool had_leases = shm_inode(ns.shm_name(kLeasesSuffix)) != 0;
  const bool had_init = shm_inode(ns.shm_name(kInitSuffix)) != 0;
  if (!had_leases && !had_init) return;
  if (auto left = list_owned(ns); !left || !left->empty())
    return;  // not the last: the last one removes them
  auto lock = InitLock::acquire(ns, d);
  if (lock && !remove_namespace_if_unused(ns, *lock) && !had_init) (void)lock->unlink_held();
}

}  // namespace shmcoord
