#include "files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

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

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  return static_cast<bool>(f);
}

}  // namespace harness
