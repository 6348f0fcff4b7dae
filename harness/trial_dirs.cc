#include "trial_dirs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>

namespace harness {

namespace fs = std::filesystem;

namespace {

// The entries of `dir`, listed before any is touched; nullopt if it cannot be read.
std::optional<std::vector<fs::path>> entries(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> out;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    out.push_back(it->path());
  }
  if (ec) return std::nullopt;
  return out;
}

// `p` empty (if a file), ours and `mode`, each changed only where it is not
// already: most kept entries are, and on this kind of disk every inode
// written costs more than the lstat that saves it. False on any error.
bool reset(const fs::path& p, const struct stat& st, mode_t mode) {
  if (S_ISREG(st.st_mode) && st.st_size != 0 && ::truncate(p.c_str(), 0) != 0) return false;
  if ((st.st_uid != ::geteuid() || st.st_gid != ::getegid()) && ::lchown(p.c_str(), ::geteuid(), ::getegid()) != 0)
    return false;
  return (st.st_mode & 07777) == mode || ::chmod(p.c_str(), mode) == 0;
}

// Leaves in `dir` only its real dirs named job*, each emptied but for its
// regular stdout.log and stderr.log (truncated); everything kept is ours
// again and 0755 (0644 the logs). False on any error.
bool scrub(const fs::path& dir) {
  std::error_code ec;
  auto top = entries(dir);
  if (!top) return false;
  struct stat st {};
  for (const fs::path& e : *top) {
    if (::lstat(e.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || e.filename().string().rfind("job", 0) != 0) {
      fs::remove_all(e, ec);
      if (ec) return false;
      continue;
    }
    const struct stat dir_st = st;
    auto inner = entries(e);
    if (!inner) return false;
    for (const fs::path& f : *inner) {
      const std::string name = f.filename().string();
      if ((name == "stdout.log" || name == "stderr.log") && ::lstat(f.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
        if (!reset(f, st, 0644)) return false;
        continue;
      }
      fs::remove_all(f, ec);
      if (ec) return false;
    }
    if (!reset(e, dir_st, 0755)) return false;
  }
  return ::lstat(dir.c_str(), &st) == 0 && reset(dir, st, 0755);
}

// Scrubbed when given, and nothing touches a spare since (the run keeps
// spares only where no process of a trial outlives it): in a spare taken,
// only the worker dirs this trial does not start are left to go.
bool keep_only(const fs::path& dir, const std::set<std::string>& labels) {
  auto workers = entries(dir);
  if (!workers) return false;
  std::error_code ec;
  for (const fs::path& w : *workers) {
    if (labels.contains(w.filename().string())) continue;
    fs::remove_all(w, ec);
    if (ec) return false;
  }
  return true;
}

}  // namespace

SpareDirs::SpareDirs(std::string root, std::size_t cap) : root_(std::move(root)), cap_(cap) {}

SpareDirs::~SpareDirs() {
  std::error_code ec;
  if (next_ > 0) fs::remove_all(root_, ec);
}

void SpareDirs::give(const std::string& dir) {
  std::error_code ec;
  if (spares_.size() >= cap_) {
    fs::remove_all(dir, ec);
    return;
  }
  const std::string spare = root_ + "/" + std::to_string(next_++);
  fs::create_directories(root_, ec);
  // Scrubbed once out of the trial's place: a dir a reader may be walking is
  // never emptied under it.
  if (ec || std::rename(dir.c_str(), spare.c_str()) != 0) {
    fs::remove_all(dir, ec);
    return;
  }
  if (!scrub(spare)) {
    fs::remove_all(spare, ec);
    return;
  }
  spares_.push_back(spare);
}

bool SpareDirs::take(const std::string& dir, const std::set<std::string>& labels) {
  std::error_code ec;
  while (!spares_.empty()) {
    const std::string spare = spares_.back();
    spares_.pop_back();
    if (std::rename(spare.c_str(), dir.c_str()) != 0) {
      fs::remove_all(spare, ec);
      continue;
    }
    if (keep_only(dir, labels)) return true;
    fs::remove_all(dir, ec);
    return false;
  }
  return false;
}

}  // namespace harness
