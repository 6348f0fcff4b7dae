#include "sys.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <vector>

#include "shmcoord/failpoint.h"

namespace shmcoord::sys {
namespace {

template <typename F>
auto retry_eintr(F f) {
  decltype(f()) r;
  do {
    r = f();
  } while (r < 0 && errno == EINTR);
  return r;
}

}  // namespace

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Mapping::reset() {
  if (p_) ::munmap(p_, n_);
  p_ = nullptr;
  n_ = 0;
}

Result<Fd> shm_open(const char* fp, const std::string& name, int flags) {
  if (int e = failpoint::check(fp)) return std::unexpected(sys_error("shm_open", name, e));
  int fd = retry_eintr([&] { return ::shm_open(name.c_str(), flags | O_CLOEXEC | O_NOFOLLOW, 0600); });
  if (fd < 0) return std::unexpected(sys_error("shm_open", name, errno));
  return Fd(fd);
}

Status shm_unlink(const char* fp, const std::string& name) {
  if (int e = failpoint::check(fp)) return std::unexpected(sys_error("shm_unlink", name, e));
  if (::shm_unlink(name.c_str()) < 0) return std::unexpected(sys_error("shm_unlink", name, errno));
  return {};
}

Result<Fd> open(const char* fp, const std::string& path, int flags) {
  if (int e = failpoint::check(fp)) return std::unexpected(sys_error("open", path, e));
  int fd = retry_eintr([&] { return ::open(path.c_str(), flags | O_CLOEXEC | O_NOFOLLOW, 0600); });
  if (fd < 0) return std::unexpected(sys_error("open", path, errno));
  return Fd(fd);
}

Status unlink(const char* fp, const std::string& path) {
  if (int e = failpoint::check(fp)) return std::unexpected(sys_error("unlink", path, e));
  if (::unlink(path.c_str()) < 0) return std::unexpected(sys_error("unlink", path, errno));
  return {};
}

Status ftruncate(const char* fp, int fd, off_t size, const std::string& what) {
  if (int e = failpoint::check(fp)) return std::unexpected(sys_error("ftruncate", what, e));
  if (retry_eintr([&] { return ::ftruncate(fd, size); }) < 0) {
    return std::unexpected(sys_error("ftruncate", what, errno));
  }
  return {};
}

Result<struct stat> fstat(const char* fp, int fd, const std::string& what) {
  if (int e = failpoint::check(fp)) return std::unexpected(sys_error("fstat", what, e));
  struct stat st{};
  if (::fstat(fd, &st) < 0) return std::unexpected(sys_error("fstat", what, errno));
  return st;
}

Result<Mapping> mmap(const char* fp, int fd, std::size_t size, const std::string& what) {
  if (int e = failpoint::check(fp)) return std::unexpected(sys_error("mmap", what, e));
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return std::unexpected(sys_error("mmap", what, errno));
  return Mapping(p, size);
}

Status flock(const char* fp, int fd, int op, const std::string& what) {
  if (int e = failpoint::check(fp)) return std::unexpected(sys_error("flock", what, e));
  if (retry_eintr([&] { return ::flock(fd, op); }) < 0) {
    int e = errno;
    if (e == EWOULDBLOCK) {
      return std::unexpected(make_error(Code::kInUse, "flock(" + what + "): held by another process", e));
    }
    return std::unexpected(sys_error("flock", what, e));
  }
  return {};
}

Result<std::vector<std::string>> list_dir(const char* fp, const std::string& dir) {
  if (int e = failpoint::check(fp)) return std::unexpected(sys_error("opendir", dir, e));
  // open + getdents64 + close: opendir() would add an fstat and a heap buffer
  // (the registry lists twice per acquire and twice per release).
  const int fd = retry_eintr([&] { return ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); });
  if (fd < 0) return std::unexpected(sys_error("opendir", dir, errno));
  std::vector<std::string> names;
  alignas(8) char buf[16384];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return std::unexpected(sys_error("getdents64", dir, e));
    }
    if (n == 0) break;
    for (long off = 0; off < n;) {
      const auto* ent = reinterpret_cast<const struct dirent64*>(buf + off);
      std::string_view name(ent->d_name);
      if (name != "." && name != "..") names.emplace_back(name);
      off += ent->d_reclen;
    }
  }
  ::close(fd);
  return names;
}

int futex_wait(std::uint32_t* addr, std::uint32_t expected, const struct timespec* rel) {
  long r = ::syscall(SYS_futex, addr, FUTEX_WAIT, expected, rel, nullptr, 0);
  if (r == 0) return 0;
  if (errno == ETIMEDOUT) return ETIMEDOUT;
  return 0;  // EAGAIN (value changed) or EINTR: caller re-checks
}

int futex_wait_for(std::uint32_t* addr, std::uint32_t expected, std::chrono::nanoseconds rel) {
  struct timespec ts{static_cast<time_t>(rel.count() / 1000000000), static_cast<long>(rel.count() % 1000000000)};
  return futex_wait(addr, expected, &ts);
}

void futex_wake_all(std::uint32_t* addr) {
  ::syscall(SYS_futex, addr, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace shmcoord::sys
