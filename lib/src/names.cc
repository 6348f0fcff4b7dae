#include "names.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lease.h"
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

std::map<int, std::vector<OwnedEntry>> list_owned(const Namespace& ns, const std::function<bool(int)>& want) {
  std::map<int, std::vector<OwnedEntry>> out;
  auto scan = [&](const std::string& dir, bool is_lock) {
    auto names = sys::list_dir(is_lock ? "lock/dir/list" : "shm/dir/list", dir);
    if (!names) return;
    for (const auto& n : *names) {
      if (n.rfind(ns.root, 0) != 0) continue;
      std::string_view suffix = std::string_view(n).substr(ns.root.size());
      if (!is_lock && (suffix == "init.lock" || suffix == kLeasesSuffix)) continue;
      const int prefix = parse_prefix(suffix);
      if (want && !want(prefix)) continue;
      struct stat st{};
      std::string full = dir + "/" + n;
      if (::lstat(full.c_str(), &st) < 0) continue;
      OwnedEntry e{is_lock ? full : "/" + n, st.st_uid, is_lock};
      out[prefix].push_back(std::move(e));
    }
  };
  scan(kShmDir, false);
  scan(ns.lock_dir.string(), true);
  return out;
}

std::string remove_entry(const OwnedEntry& e) {
  if (e.uid != ::geteuid()) return "owned by uid " + std::to_string(e.uid);
  if (!e.is_lock) {
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
