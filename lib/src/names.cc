#include "names.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lease.h"
#include "records.h"
#include "sys.h"

namespace shmcoord {

int parse_prefix(std::string_view suffix) {
  if (suffix.size() < 8 || suffix[6] != '_') return -1;
  int p = 0;
  for (int i = 0; i < 6; ++i) {
    char c = suffix[i];
    if (c < '0' || c > '9') return -1;
    p = p * 10 + (c - '0');
  }
  return p;
}

Result<Owned> list_owned(const Namespace& ns, const std::function<bool(int)>& want) {
  Owned out;
  auto scan = [&](const std::string& dir, bool is_lock) -> Status {
    auto names = sys::list_dir(is_lock ? "lock/dir/list" : "shm/dir/list", dir);
    if (!names) {
      if (is_lock && names.error().code == Code::kNotFound) return {};  // no lock dir: no lock files
      return std::unexpected(names.error());
    }
    for (const auto& n : *names) {
      if (n.rfind(ns.root, 0) != 0) continue;
      std::string_view suffix = std::string_view(n).substr(ns.root.size());
      if (suffix.empty() || suffix.find('.') != std::string_view::npos) continue;  // init.lock, or a nested root's
      if (!is_lock && suffix == kLeasesSuffix) continue;
      const int prefix = parse_prefix(suffix);
      if (want && !want(prefix)) continue;
      struct stat st{};
      std::string full = dir + "/" + n;
      if (::lstat(full.c_str(), &st) < 0) continue;  // gone meanwhile
      OwnedEntry e{is_lock ? full : "/" + n, st.st_uid, is_lock};
      out[prefix].push_back(std::move(e));
    }
    return {};
  };
  if (auto s = scan(kShmDir, false); !s) return std::unexpected(s.error());
  if (auto s = scan(ns.lock_dir.string(), true); !s) return std::unexpected(s.error());
  return out;
}

namespace {

// "" if the segment may be removed, else why not: another layout version's
// registry or barrier (its jobs may be live), or first bytes we cannot read.
std::string foreign_version(const std::string& shm_name) {
  auto fd = sys::shm_open("shm/stale/open", shm_name, O_RDONLY);
  if (!fd) return fd.error().code == Code::kNotFound ? "" : "cannot be judged: " + fd.error().message;
  unsigned char head[12];
  const ssize_t n = ::pread(fd->get(), head, sizeof head, 0);
  if (n < 0) return "cannot be judged: " + sys_error("pread", shm_name, errno).message;
  for (std::uint64_t magic : {records::kBarrierMagic, records::kRegistryMagic}) {
    const std::uint32_t v = records::version_of(head, static_cast<std::size_t>(n), magic);
    if (v != 0 && v != records::kVersion) {
      return std::string("a ") + (magic == records::kBarrierMagic ? "barrier" : "registry") +
             " of shmcoord layout version " + std::to_string(v) + " (this library is version " +
             std::to_string(records::kVersion) + ")";
    }
  }
  return "";
}

}  // namespace

bool not_ours(const std::string& why) {
  return why.rfind("owned by", 0) == 0 || why.find(" of shmcoord layout version ") != std::string::npos;
}

std::string remove_entry(const OwnedEntry& e) {
  if (e.uid != ::geteuid()) return "owned by uid " + std::to_string(e.uid);
  if (!e.is_lock) {
    if (std::string why = foreign_version(e.name); !why.empty()) return why;
    auto r = sys::shm_unlink("shm/stale/unlink", e.name);
    if (!r && r.error().code != Code::kNotFound) return r.error().message;
    return "";
  }
  auto fd = sys::open("lock/stale/open", e.name, O_RDWR);
  if (!fd) return fd.error().code == Code::kNotFound ? "" : fd.error().message;
  auto held = sys::flock("lock/stale/flock", fd->get(), LOCK_EX | LOCK_NB, e.name);
  if (!held) {
    return held.error().code == Code::kInUse ? "lock held by a live (or stopped) process" : held.error().message;
  }
  auto r = sys::unlink("lock/stale/unlink", e.name);
  if (!r && r.error().code != Code::kNotFound) return r.error().message;
  return "";
}

}  // namespace shmcoord
