#include "trial_dirs.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
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

namespace {

// The mount namespace `path` names (a /proc ns link), by its inode; 0 if unknown.
ino_t namespace_of(const char* path) {
  struct stat st {};
  return ::stat(path, &st) == 0 ? st.st_ino : 0;
}

// A mount namespace of our own, entered once: every later run of the process
// (shrink runs many) mounts its scratch there. Slave, not private: a mount
// the host makes later (a disk a user plugs in) still shows. unshare() moves
// only the calling thread (CLONE_NEWNS implies CLONE_FS alone), so a thread
// that is not in it - another than the first caller - gets an error, never
// a mount in the host's namespace.
std::error_code own_mount_namespace() {
  static const ino_t ours = [] {
    if (::unshare(CLONE_NEWNS) != 0) return ino_t{0};
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) return ino_t{0};
    return namespace_of("/proc/thread-self/ns/mnt");
  }();
  if (ours == 0) return std::make_error_code(std::errc::operation_not_permitted);
  if (namespace_of("/proc/thread-self/ns/mnt") != ours)
    return std::make_error_code(std::errc::invalid_argument);
  return {};
}

}  // namespace

std::unique_ptr<TrialScratch> TrialScratch::make(const std::string& out_dir, std::string* why) {
  auto fail = [&](const std::string& w) -> std::unique_ptr<TrialScratch> {
    if (why) *why = w;
    return nullptr;
  };
  if (::geteuid() != 0) return fail("not root: no mount of our own");
  const std::string root = out_dir + "/.trials";
  std::error_code ec;
  const auto st = fs::symlink_status(root, ec);
  const bool made = st.type() == fs::file_type::not_found;
  if (!made) {
    // Ours only if it is what a killed run of ours leaves: an empty dir.
    if (st.type() != fs::file_type::directory || !fs::is_empty(root, ec) || ec)
      return fail(root + " exists and is not an empty dir: not ours, left alone");
  } else if (::mkdir(root.c_str(), 0755) != 0) {
    return fail("cannot create " + root + ": " + std::strerror(errno));
  }
  auto undo = [&] {
    if (made) ::rmdir(root.c_str());
  };
  if (auto e = own_mount_namespace()) {
    undo();
    return fail("no mount namespace of our own: " + e.message());
  }
  // tmpfs is memory (or swap): the bound on what the run's running trials
  // hold at once. The native worker's logs are cut at 1 MiB each and a
  // history at kMaxHistoryBytes; a subject that writes its own files without
  // end fills it, and then every trial running at that moment meets ENOSPC,
  // as they all met a full out dir before.
  if (::mount("shmstress-trials", root.c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
              "mode=0755,size=1g") != 0) {
    const int e = errno;
    undo();
    return fail("cannot mount a tmpfs at " + root + ": " + std::strerror(e));
  }
  return std::unique_ptr<TrialScratch>(new TrialScratch(root));
}

TrialScratch::~TrialScratch() {
  ::umount2(root_.c_str(), MNT_DETACH);
  ::rmdir(root_.c_str());
}

std::error_code move_trial_dir(const std::string& from, const std::string& to) {
  // renameat2(RENAME_NOREPLACE), both for the move and for a copy's last
  // step: rename() would replace an empty dir at `to`, and nothing there,
  // whenever it was made, is ever replaced.
  auto rename_noreplace = [](const fs::path& a, const std::string& b) {
    return ::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_NOREPLACE) == 0
               ? std::error_code()
               : std::error_code(errno, std::generic_category());
  };
  std::error_code ec = rename_noreplace(from, to);
  if (!ec) return ec;
  if (ec != std::errc::cross_device_link) return ec;
  // Copied under a name no trial dir has (a scenario's name never starts
  // with '.'), then renamed: a run killed mid-copy leaves no half a trial
  // under the trial's own name, which a later run would refuse to replace
  // (no schedule.json yet) or `check` would read.
  const fs::path dest(to);
  const fs::path tmp = dest.parent_path() /
                       ("." + dest.filename().string() + ".partial-" + std::to_string(::getpid()));
  // By hand, not fs::copy: a FIFO or a socket a subject left in its dir
  // (fs::copy refuses both) must not cost the trial its evidence. They are
  // left out; a symlink is copied as one, never followed.
  auto copy = [&]() -> std::error_code {
    std::error_code e;
    fs::remove_all(tmp, e);  // ours: a run of this pid killed mid-copy
    if (!fs::create_directory(tmp, from, e) && !e) e = std::make_error_code(std::errc::file_exists);
    if (e) return e;
    for (auto it = fs::recursive_directory_iterator(from, e);
         !e && it != fs::recursive_directory_iterator(); it.increment(e)) {
      // Lexically: fs::relative() would resolve a symlink to where it points.
      const fs::path dst = tmp / it->path().lexically_relative(from);
      switch (it->symlink_status(e).type()) {
        case fs::file_type::directory:
          fs::create_directory(dst, it->path(), e);
          break;
        case fs::file_type::symlink:
          fs::copy_symlink(it->path(), dst, e);
          break;
        case fs::file_type::regular:
          fs::copy_file(it->path(), dst, e);
          break;
        default:
          break;
      }
      if (e) return e;  // before increment() clears it
    }
    return e;
  };
  // Every signal waits until the copy is done: a handler installed without
  // SA_RESTART (the run's tick, its stop) would cut a sendfile() inside
  // copy_file() short with EINTR, which libstdc++ reports, not retries, and
  // the trial would be lost for a tick that came at the wrong moment.
  // The mask comes back however this scope is left (a path that throws
  // bad_alloc included): a loop left with every signal blocked would never
  // wake for its tick or its stop again.
  struct HeldSignals {
    sigset_t before;
    HeldSignals() {
      sigset_t all;
      ::sigfillset(&all);
      ::pthread_sigmask(SIG_BLOCK, &all, &before);
    }
    ~HeldSignals() { ::pthread_sigmask(SIG_SETMASK, &before, nullptr); }
    HeldSignals(const HeldSignals&) = delete;
    HeldSignals& operator=(const HeldSignals&) = delete;
  };
  std::error_code rm;
  {
    const HeldSignals held;
    if (!(ec = copy())) ec = rename_noreplace(tmp, to);
    if (ec) fs::remove_all(tmp, rm);
  }
  if (ec) return ec;
  fs::remove_all(from, rm);
  return {};
}

}  // namespace harness
