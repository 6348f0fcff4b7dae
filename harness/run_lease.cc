#include "run_lease.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string_view>

namespace harness {
namespace {

constexpr std::string_view kPrefix = "shmstress.";
constexpr std::string_view kLeaseSuffix = ".lease";

// "<digits>-<16 hex>": the token of a run's names.
bool is_token(std::string_view t) {
  const std::size_t dash = t.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash > 10) return false;
  if (t.substr(0, dash).find_first_not_of("0123456789") != std::string_view::npos) return false;
  const std::string_view hex = t.substr(dash + 1);
  return hex.size() == 16 && hex.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// The token a name of the harness's carries, if it is one: "shmstress.<token>.lease"
// or "shmstress.<token>.<anything>".
std::optional<std::string> token_of(std::string_view name) {
  if (!name.starts_with(kPrefix)) return std::nullopt;
  const std::string_view rest = name.substr(kPrefix.size());
  const std::size_t dot = rest.find('.');
  if (dot == std::string_view::npos || !is_token(rest.substr(0, dot))) return std::nullopt;
  return std::string(rest.substr(0, dot));
}

std::string lease_name(const std::string& token) { return std::string(kPrefix) + token + std::string(kLeaseSuffix); }

}  // namespace

std::optional<RunLease> RunLease::take(std::string* why) {
  std::random_device rd;
  const std::uint64_t r = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(r));
  const std::string token = std::to_string(::getpid()) + "-" + hex;
  const std::string path = "/dev/shm/" + lease_name(token);
  // Unnamed first, locked, then linked in: it is never seen unlocked.
  const int fd = ::open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    *why = std::string("cannot create the run's lease in /dev/shm: ") + std::strerror(errno);
    return std::nullopt;
  }
  if (::flock(fd, LOCK_SH) != 0 ||
      ::linkat(AT_FDCWD, ("/proc/self/fd/" + std::to_string(fd)).c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) !=
          0) {
    *why = "cannot create the run's lease " + path + ": " + std::strerror(errno);
    ::close(fd);
    return std::nullopt;
  }
  return RunLease(token, fd);
}

RunLease::RunLease(RunLease&& o) noexcept : token_(std::move(o.token_)), fd_(o.fd_) { o.fd_ = -1; }

RunLease::~RunLease() {
  if (fd_ < 0) return;
  ::unlink(("/dev/shm/" + lease_name(token_)).c_str());
  ::close(fd_);
}

std::string RunLease::trial_root(std::uint64_t n) const {
  return std::string(kPrefix) + token_ + "." + std::to_string(n) + ".";
}

bool may_use_shared_shm(bool allow_mount_ns) {
  if (!allow_mount_ns) return true;
  // CAP_SYS_ADMIN (bit 21) in the effective set: what mounting a tmpfs needs.
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);) {
    if (!line.starts_with("CapEff:")) continue;
    const unsigned long long caps = std::strtoull(line.c_str() + 7, nullptr, 16);
    return (caps & (1ULL << 21)) == 0;
  }
  return true;
}

std::vector<CleanDecision> clean_dead_runs(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (auto* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n.starts_with(kPrefix)) names.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  std::map<std::string, std::vector<std::string>> by_token;  // token -> its names (lease excluded)
  std::vector<CleanDecision> out;
  for (const auto& n : names) {
    auto token = token_of(n);
    if (!token) {
      out.push_back({n, false, "not a name of a run with a lease (an older shmstress's, or not shmstress's): "
                               "not provably a dead run's"});
      continue;
    }
    if (n != lease_name(*token)) by_token[*token].push_back(n);
    else by_token.try_emplace(*token);
  }
  for (const auto& [token, members] : by_token) {
    const std::string lease = dir + "/" + lease_name(token);
    const int fd = ::open(lease.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
      for (const auto& n : members) out.push_back({n, false, "its run's lease " + lease_name(token) + " is gone: not provably a dead run's"});
      continue;
    }
    struct stat st{};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      for (const auto& n : members) out.push_back({n, false, "its lease is not a file the harness made"});
      continue;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      for (const auto& n : members) out.push_back({n, false, "its run is alive (its lease is locked)"});
      continue;
    }
    // Dead, and ours while we hold the lock: its names, then the lease.
    for (const auto& n : members) {
      const bool gone = ::unlink((dir + "/" + n).c_str()) == 0 || errno == ENOENT;
      out.push_back({n, gone, gone ? "its run is dead" : std::string("cannot remove it: ") + std::strerror(errno)});
    }
    const bool gone = ::unlink(lease.c_str()) == 0 || errno == ENOENT;
    out.push_back({lease_name(token), gone, gone ? "the lease of a dead run" : std::string("cannot remove it: ") + std::strerror(errno)});
    ::close(fd);
  }
  return out;
}

}  // namespace harness
