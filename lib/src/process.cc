#include "shmcoord/process.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace shmcoord {
namespace {

struct Stat {
  char state = '?';
  std::uint64_t start_time = 0;
};

// Reads /proc/<pid>/stat with raw syscalls (no allocation): also used in the
// resource tracker after fork. Returns errno on failure, 0 on success.
int read_stat(pid_t pid, Stat* out) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buf[1024];
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof buf - 1);
  } while (n < 0 && errno == EINTR);
  int saved = errno;
  ::close(fd);
  if (n <= 0) return n < 0 ? saved : ESRCH;
  buf[n] = '\0';
  // comm may hold spaces and ')': fields resume after the last ')'.
  char* p = std::strrchr(buf, ')');
  if (!p || p[1] != ' ') return EINVAL;
  p += 2;
  out->state = *p;
  // state is field 3; starttime is field 22.
  int field = 3;
  while (*p && field < 22) {
    if (*p == ' ') ++field;
    ++p;
  }
  if (field != 22) return EINVAL;
  out->start_time = std::strtoull(p, nullptr, 10);
  return 0;
}

}  // namespace

std::string ProcessId::to_string() const { return "pid " + std::to_string(pid); }

ProcessId self_identity() {
  static ProcessId cached;
  pid_t me = ::getpid();
  if (cached.pid != me) {
    Stat st;
    cached = ProcessId{me, read_stat(me, &st) == 0 ? st.start_time : 0};
  }
  return cached;
}

Result<ProcessId> identity_of(pid_t pid) {
  Stat st;
  if (int e = read_stat(pid, &st); e != 0) {
    return std::unexpected(sys_error("read", "/proc/" + std::to_string(pid) + "/stat", e));
  }
  return ProcessId{pid, st.start_time};
}

Liveness liveness(const ProcessId& id) {
  if (id.pid <= 0) return Liveness::kDead;
  Stat st;
  int e = read_stat(id.pid, &st);
  if (e == ENOENT || e == ESRCH) return Liveness::kDead;
  if (e != 0) return Liveness::kAlive;
  if (st.state == 'Z' || st.state == 'X' || st.state == 'x') return Liveness::kDead;
  if (id.start_time != 0 && st.start_time != id.start_time) return Liveness::kDead;
  if (st.state == 'T' || st.state == 't') return Liveness::kStopped;
  return Liveness::kAlive;
}

}  // namespace shmcoord
