// The one seam between shmcoord and the kernel. Every call names its failpoint
// (docs/failpoints.md), maps errno once with the syscall and the object in the
// message, and retries EINTR. File descriptors are owned by Fd (closed on scope
// exit), so the number of fds a call holds is what is in scope: O(1).
#pragma once

#include <dirent.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

#include "shmcoord/error.h"

namespace shmcoord::sys {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  explicit operator bool() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_ = -1;
};

// A mapping; unmapped on scope exit.
class Mapping {
 public:
  Mapping() = default;
  Mapping(void* p, std::size_t n) : p_(p), n_(n) {}
  Mapping(Mapping&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  Mapping& operator=(Mapping&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  ~Mapping() { reset(); }
  void* get() const { return p_; }
  std::size_t size() const { return n_; }
  void reset();

 private:
  void* p_ = nullptr;
  std::size_t n_ = 0;
};

// All opens add O_CLOEXEC|O_NOFOLLOW; creates use mode 0600.
Result<Fd> shm_open(const char* fp, const std::string& name, int flags);
Status shm_unlink(const char* fp, const std::string& name);
Result<Fd> open(const char* fp, const std::string& path, int flags);
Status unlink(const char* fp, const std::string& path);
Status ftruncate(const char* fp, int fd, off_t size, const std::string& what);
Result<struct stat> fstat(const char* fp, int fd, const std::string& what);
Result<Mapping> mmap(const char* fp, int fd, std::size_t size, const std::string& what);
// flock with LOCK_EX etc; `nonblock` adds LOCK_NB and maps EWOULDBLOCK to kInUse.
Status flock(const char* fp, int fd, int op, const std::string& what);

// Lists names in a directory (no fds kept).
Result<std::vector<std::string>> list_dir(const char* fp, const std::string& dir);

// Futex on a 32-bit word in shared memory (not private: other processes wait on it).
// Returns 0 on wake or value change, ETIMEDOUT on timeout.
int futex_wait(std::uint32_t* addr, std::uint32_t expected, const struct timespec* rel);
int futex_wait_for(std::uint32_t* addr, std::uint32_t expected, std::chrono::nanoseconds rel);
void futex_wake_all(std::uint32_t* addr);

// Words other processes read without our lock (futex words, flags): acquire
// loads and release stores, so what was written before a store is seen after
// the matching load.
inline std::uint32_t load(const std::uint32_t& w) {
  return std::atomic_ref<std::uint32_t>(const_cast<std::uint32_t&>(w)).load(std::memory_order_acquire);
}
inline void store(std::uint32_t& w, std::uint32_t v) {
  std::atomic_ref<std::uint32_t>(w).store(v, std::memory_order_release);
}

}  // namespace shmcoord::sys
