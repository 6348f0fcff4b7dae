// Atomic report files: the only place reports/ writes to disk.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "reports/reports.h"

namespace reports {

bool write_file_atomic(const std::string& path, const std::string& text, std::string* err) {
  auto fail = [&](const std::string& what) {
    if (err != nullptr) *err = what + ": " + std::strerror(errno);
    return false;
  };
  // Same directory as the target, so the rename never crosses a filesystem.
  std::filesystem::path target(path);
  std::string dir = target.has_parent_path() ? target.parent_path().string() : ".";
  std::string tmpl = dir + "/." + target.filename().string() + ".tmp.XXXXXX";
  int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd < 0) return fail("cannot create a temp file in " + dir);
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd), ::unlink(tmpl.c_str());
      errno = e;
      return fail("cannot write " + tmpl);
    }
    p += n, left -= static_cast<std::size_t>(n);
  }
  // mkostemp makes the file 0600; node_exporter and web servers usually run as
  // another user, and these reports hold nothing secret.
  if (::fchmod(fd, 0644) != 0 || ::fsync(fd) != 0) {
    int e = errno;
    ::close(fd), ::unlink(tmpl.c_str());
    errno = e;
    return fail("cannot finish " + tmpl);
  }
  ::close(fd);
  if (std::rename(tmpl.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmpl.c_str());
    errno = e;
    return fail("cannot rename " + tmpl + " to " + path);
  }
  return true;
}

}  // namespace reports
