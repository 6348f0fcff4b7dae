#include "files.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>

namespace harness {
namespace {

std::string not_regular(mode_t mode) {
  if (S_ISDIR(mode)) return "is a directory, not a regular file";
  if (S_ISFIFO(mode)) return "is a FIFO, not a regular file";
  if (S_ISCHR(mode)) return "is a character device, not a regular file";
  if (S_ISBLK(mode)) return "is a block device, not a regular file";
  if (S_ISSOCK(mode)) return "is a socket, not a regular file";
  return "is not a regular file";
}

std::string limit_text(std::size_t max_bytes) {
  if (max_bytes >= (1u << 20) && max_bytes % (1u << 20) == 0)
    return std::to_string(max_bytes >> 20) + " MiB";
  return std::to_string(max_bytes) + " bytes";
}

}  // namespace

std::optional<std::string> read_regular_file(const std::string& path, std::size_t max_bytes,
                                             std::string* why) {
  std::string scratch;
  if (why == nullptr) why = &scratch;
  if (path.find('\0') != std::string::npos) {
    *why = "the path holds a NUL byte";
    return std::nullopt;
  }
  // stat first, so a device is never opened (opening some has side effects).
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    *why = std::strerror(errno);
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    *why = not_regular(st.st_mode);
    return std::nullopt;
  }
  // O_NONBLOCK: if the path was swapped for a FIFO since the stat, open does
  // not wait for a writer; fstat then refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    *why = std::strerror(errno);
    return std::nullopt;
  }
  std::optional<std::string> out;
  if (::fstat(fd, &st) != 0) {
    *why = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    *why = not_regular(st.st_mode);
  } else if (static_cast<unsigned long long>(st.st_size) > max_bytes) {
    *why = "is " + std::to_string(st.st_size) + " bytes, over the " + limit_text(max_bytes) +
           " limit";
  } else {
    // st_size is a hint (files in /proc say 0, a file may grow): read to EOF,
    // at most one byte past the cap.
    std::string text;
    text.resize(static_cast<std::size_t>(st.st_size) + 1);
    std::size_t got = 0;
    bool failed = false;
    for (;;) {
      if (got == text.size()) {
        if (text.size() > max_bytes) break;
        text.resize(std::min(max_bytes + 1, std::max<std::size_t>(text.size() * 2, 4096)));
      }
      const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        *why = std::strerror(errno);
        failed = true;
        break;
      }
      if (n == 0) break;
      got += static_cast<std::size_t>(n);
    }
    if (!failed && got > max_bytes) {
      *why = "is over the " + limit_text(max_bytes) + " limit";
    } else if (!failed) {
      text.resize(got);
      out = std::move(text);
    }
  }
  ::close(fd);
  return out;
}

std::string read_file(const std::string& path) {
  return read_regular_file(path, kMaxHistoryBytes, nullptr).value_or(std::string());
}

namespace {

// The path split where write_output needs it: the directory, resolved (it
// must exist), and the last component as given.
struct Place {
  std::string dir;   // realpath of the directory
  std::string base;  // the last component
  std::string path() const { return dir == "/" ? "/" + base : dir + "/" + base; }
};

std::optional<OutputError> refuse(const std::string& path, const std::string& why) {
  return OutputError{2, path + ": " + why};
}
std::optional<OutputError> failed(const std::string& path, const std::string& what, int err) {
  return OutputError{3, path + ": " + what + ": " + std::strerror(err)};
}

std::optional<OutputError> place_of(const std::string& path, Place* out) {
  if (path.empty()) return refuse("''", "an empty path");
  if (path.find('\0') != std::string::npos) return refuse(path, "the path holds a NUL byte");
  const std::size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty() || base == "." || base == "..") return refuse(path, "names a directory, not a file");
  char real[PATH_MAX];
  if (::realpath(dir.c_str(), real) == nullptr) {
    const int e = errno;
    if (e == ENOTDIR) return refuse(path, "part of the path is not a directory");
    return failed(path, "its directory " + dir + " cannot be used", e);
  }
  out->dir = real;
  out->base = std::move(base);
  return std::nullopt;
}

// An fd of this process named through /proc (/dev/stdout -> /proc/self/fd/1,
// /dev/fd/N -> /proc/<pid>/fd/N, /proc/<pid>/task/<tid>/fd/N).
std::optional<int> own_fd(const Place& p) {
  if (p.base.empty() || p.base.size() > 9 || p.base.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  const std::string proc = "/proc/" + std::to_string(::getpid());
  const bool fd_dir = p.dir == proc + "/fd" ||
                      (p.dir.starts_with(proc + "/task/") && p.dir.ends_with("/fd") &&
                       p.dir.find('/', proc.size() + 6) == p.dir.size() - 3);
  if (!fd_dir) return std::nullopt;
  return std::stoi(p.base);
}

// Character devices the harness writes a report into in place: the memory
// devices that swallow or refuse what they get (null 1:3, zero 1:5, full
// 1:7) and terminals (tty 4:*, /dev/tty 5:0, /dev/console 5:1, pts
// 136-143:*). Never /dev/mem, /dev/port, /dev/kmsg or a disk's raw node.
bool writable_device(dev_t rdev) {
  const unsigned maj = major(rdev), min = minor(rdev);
  if (maj == 1) return min == 3 || min == 5 || min == 7;
  if (maj == 4) return true;
  if (maj == 5) return min == 0 || min == 1;
  return maj >= 136 && maj <= 143;
}

std::string device_text(const struct stat& st) {
  return std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
}

std::optional<OutputError> write_all(int fd, std::string_view text, const std::string& path) {
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return failed(path, "cannot write", errno);
    if (n == 0) return failed(path, "cannot write", EIO);
    p += n, left -= static_cast<std::size_t>(n);
  }
  return std::nullopt;
}

// The file at `where` (absent or regular) replaced by a new one: temp file
// in the same directory (the rename never crosses a filesystem), rename.
std::optional<OutputError> replace_atomically(const Place& where, std::string_view text, Durability durability) {
  const std::string path = where.path();
  std::string tmpl = (where.dir == "/" ? "" : where.dir) + "/." + where.base + ".tmp.XXXXXX";
  const int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd < 0) return failed(path, "cannot create a temp file in " + where.dir, errno);
  auto undo = [&](std::optional<OutputError> e) {
    ::close(fd);
    ::unlink(tmpl.c_str());
    return e;
  };
  if (auto e = write_all(fd, text, tmpl)) return undo(e);
  // mkostemp makes the file 0600; node_exporter and web servers usually run
  // as another user, and these reports hold nothing secret.
  if (::fchmod(fd, 0644) != 0 || (durability == Durability::kSynced && ::fsync(fd) != 0))
    return undo(failed(tmpl, "cannot finish", errno));
  if (::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmpl.c_str());
    return failed(tmpl, "cannot finish", e);
  }
  if (std::rename(tmpl.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmpl.c_str());
    return failed(path, "cannot rename " + tmpl + " over it", e);
  }
  return std::nullopt;
}

// What to do with an output path, decided once for both write_output and check_output.
struct Decision {
  enum Kind { kReplace, kOwnFd, kInPlace } kind = kReplace;
  Place where;
  int fd = -1;        // kOwnFd
  bool fifo = false;  // kInPlace
};

std::optional<OutputError> decide(const std::string& path, OutputOrigin origin, bool probe, Decision* d) {
  std::string current = path;
  for (int hops = 0;; ++hops) {
    if (hops > 40) return refuse(path, "too many levels of symbolic links");
    Place p;
    if (auto e = place_of(current, &p)) {
      // Checked before a run: a directory that does not exist yet is made then.
      if (probe && e->exit_code == 3) return std::nullopt;
      return e;
    }
    const std::string here = p.path();
    if (auto fd = own_fd(p)) {
      d->kind = Decision::kOwnFd;
      d->fd = *fd;
      d->where = p;
      return std::nullopt;
    }
    struct stat st{};
    if (::lstat(here.c_str(), &st) != 0) {
      if (errno == ENOENT) {
        d->kind = Decision::kReplace;
        d->where = p;
        return std::nullopt;
      }
      return failed(path, "cannot inspect it", errno);
    }
    if (S_ISLNK(st.st_mode)) {
      if (origin == OutputOrigin::kDerived) {
        return refuse(here, "is a symbolic link, which shmstress did not make: not followed, not replaced");
      }
      char target[PATH_MAX];
      const ssize_t n = ::readlink(here.c_str(), target, sizeof target - 1);
      if (n < 0) return failed(here, "cannot read the link", errno);
      target[n] = 0;
      current = target[0] == '/' ? std::string(target) : (p.dir == "/" ? "" : p.dir) + "/" + target;
      continue;
    }
    d->where = p;
    if (S_ISREG(st.st_mode)) {
      d->kind = Decision::kReplace;
      return std::nullopt;
    }
    if (S_ISDIR(st.st_mode)) return refuse(here, "is a directory");
    if (S_ISBLK(st.st_mode)) return refuse(here, "is a block device (" + device_text(st) + "): never written");
    if (S_ISSOCK(st.st_mode)) return refuse(here, "is a socket: not a file to write a report into");
    if (S_ISCHR(st.st_mode)) {
      if (!writable_device(st.st_rdev)) {
        return refuse(here, "is a character device (" + device_text(st) +
                                "); shmstress writes a report only into a regular file, /dev/null, "
                                "/dev/full, a terminal, a FIFO or its own stdout/stderr");
      }
      d->kind = Decision::kInPlace;
      return std::nullopt;
    }
    if (S_ISFIFO(st.st_mode)) {
      d->kind = Decision::kInPlace;
      d->fifo = true;
      return std::nullopt;
    }
    return refuse(here, "is not a regular file");
  }
}

}  // namespace

std::optional<OutputError> check_output(const std::string& path, OutputOrigin origin) {
  Decision d;
  return decide(path, origin, true, &d);
}

std::optional<OutputError> write_output(const std::string& path, std::string_view text, OutputOrigin origin,
                                        Durability durability) {
  Decision d;
  if (auto e = decide(path, origin, false, &d)) return e;
  const std::string here = d.where.path();
  switch (d.kind) {
    case Decision::kReplace:
      return replace_atomically(d.where, text, durability);
    case Decision::kOwnFd: {
      // What this process printed there so far goes first.
      if (d.fd == STDOUT_FILENO) std::fflush(stdout);
      if (d.fd == STDERR_FILENO) std::fflush(stderr);
      if (::fcntl(d.fd, F_GETFD) < 0) return refuse(path, "names fd " + std::to_string(d.fd) + ", which is not open");
      return write_all(d.fd, text, path);
    }
    case Decision::kInPlace: {
      // O_NONBLOCK: a FIFO nobody reads is refused at once instead of
      // blocking; once open, writes wait for the reader as a shell's would.
      const int fd = ::open(here.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC | (d.fifo ? O_NONBLOCK : 0));
      if (fd < 0) {
        if (d.fifo && errno == ENXIO) return refuse(here, "is a FIFO that nobody reads");
        return failed(here, "cannot open it", errno);
      }
      struct stat st{};
      if (::fstat(fd, &st) != 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
        ::close(fd);  // swapped since the look: decide again next time, write nothing now
        return failed(here, "changed while it was being opened", EAGAIN);
      }
      if (d.fifo) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      auto e = write_all(fd, text, here);
      ::close(fd);
      return e;
    }
  }
  return std::nullopt;
}

bool write_file(const std::string& path, const std::string& text) {
  return !write_output(path, text, OutputOrigin::kDerived);
}

bool write_trial_file(const std::string& path, const std::string& text) {
  return !write_output(path, text, OutputOrigin::kDerived, Durability::kUnsynced);
}

}  // namespace harness
