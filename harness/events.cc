#include "events.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <functional>
#include <utility>

namespace harness {

std::int64_t mono_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

namespace {

// The second field of a schedstat file ("run_ns run_delay_ns timeslices").
// A kernel without schedstats prints "0 0 0": unknown, not "never waited".
// (The first field, time on a CPU, lags by up to a tick for a running
// thread: cpu_times() reads that from the CPU-time clock instead.)
std::int64_t read_run_delay(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[128];
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof buf - 1);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  unsigned long long run = 0, delay = 0, slices = 0;
  if (std::sscanf(buf, "%llu %llu %llu", &run, &delay, &slices) != 3 || slices == 0) return -1;
  return delay > static_cast<unsigned long long>(INT64_MAX) ? -1 : static_cast<std::int64_t>(delay);
}

std::int64_t read_clock(clockid_t c) {
  struct timespec ts;
  if (clock_gettime(c, &ts) != 0) return -1;
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

std::int64_t cpu_wait_ns() { return read_run_delay("/proc/thread-self/schedstat"); }

std::int64_t cpu_wait_ns_of(int pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/schedstat", pid);
  return read_run_delay(path);
}

std::int64_t cpu_run_ns_of(int pid) {
  clockid_t clock;
  return clock_getcpuclockid(pid, &clock) == 0 ? read_clock(clock) : -1;
}

CpuTimes cpu_times() { return {read_clock(CLOCK_PROCESS_CPUTIME_ID), cpu_wait_ns()}; }

CpuTimes cpu_times_of(int pid) { return {cpu_run_ns_of(pid), cpu_wait_ns_of(pid)}; }

EventLog::EventLog(const std::string& path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}
EventLog EventLog::adopt(int fd) {
  EventLog l;
  if (fd >= 0 && ::fcntl(fd, F_GETFL) >= 0 && (::fcntl(fd, F_GETFL) & O_APPEND)) {
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // not for the worker's own children
    l.fd_ = fd;
  }
  return l;
}

EventLog::EventLog(EventLog&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
EventLog& EventLog::operator=(EventLog&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}
EventLog::~EventLog() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

using Json = nlohmann::json;

std::string dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

// The arrays reachable from `j` through objects only (not inside other
// arrays), longest dump first: the candidates for splitting.
void arrays_of(Json& j, std::vector<Json*>* out) {
  if (!j.is_object()) return;
  for (auto& item : j.items()) {
    Json& v = item.value();
    if (v.is_array()) {
      out->push_back(&v);
    } else if (v.is_object()) {
      arrays_of(v, out);
    }
  }
}

// Halves the longest strings until the line fits; marks what it cut.
void cut_strings(Json& j, std::size_t cap) {
  for (int round = 0; round < 64; ++round) {
    if (dump(j).size() <= cap) return;
    std::string* longest = nullptr;
    std::function<void(Json&)> walk = [&](Json& v) {
      if (v.is_string()) {
        auto* p = v.get_ptr<std::string*>();
        if (!longest || p->size() > longest->size()) longest = p;
      } else if (v.is_structured()) {
        for (auto& c : v) walk(c);
      }
    };
    walk(j);
    if (!longest || longest->size() < 16) return;
    longest->resize(longest->size() / 2);
    *longest += "...";
    j["truncated"] = true;
  }
}

void split_into(Json event, std::size_t cap, std::vector<std::string>* out, int depth) {
  std::string line = dump(event);
  if (line.size() <= cap) {
    out->push_back(std::move(line));
    return;
  }
  std::vector<Json*> arrays;
  arrays_of(event, &arrays);
  Json* longest = nullptr;
  std::size_t longest_size = 0;
  for (Json* a : arrays) {
    if (a->size() < 2) continue;
    std::size_t n = dump(*a).size();
    if (n > longest_size) longest = a, longest_size = n;
  }
  if (longest != nullptr && depth < 64) {
    // first: the event with the first half of the list; rest: the second half,
    // every other list emptied so the reader's concatenation counts each once.
    const std::size_t half = longest->size() / 2;
    Json second(Json::value_t::array);
    for (std::size_t i = half; i < longest->size(); ++i) second.push_back(std::move((*longest)[i]));
    longest->erase(longest->begin() + static_cast<std::ptrdiff_t>(half), longest->end());
    Json rest = event;
    std::vector<Json*> rest_arrays;
    arrays_of(rest, &rest_arrays);
    // The same walk order finds the same list in the copy.
    for (std::size_t i = 0; i < arrays.size(); ++i) {
      *rest_arrays[i] = arrays[i] == longest ? std::move(second) : Json::array();
    }
    const bool rest_continues = event.contains("continues");
    event["continues"] = true;
    split_into(std::move(event), cap, out, depth + 1);
    if (!rest_continues) rest.erase("continues");
    split_into(std::move(rest), cap, out, depth + 1);
    return;
  }
  cut_strings(event, cap);
  if (dump(event).size() > cap) {
    // Still too long (e.g. thousands of keys): keep what identifies it.
    Json keep = Json::object();
    for (const char* k : {"t", "type", "pid", "job", "rank", "local_rank", "op", "id", "continues",
                          "kind", "phase"}) {
      if (event.contains(k)) keep[k] = event[k];
    }
    keep["truncated"] = true;
    event = std::move(keep);
  }
  out->push_back(dump(event));
}

}  // namespace

std::vector<std::string> split_event(const nlohmann::json& event, std::size_t cap) {
  std::vector<std::string> out;
  split_into(event, cap, &out, 0);
  return out;
}

namespace {

void write_all_once(int fd, const char* data, std::size_t size) {
  ssize_t n;
  do {
    n = ::write(fd, data, size);
  } while (n < 0 && errno == EINTR);
}

}  // namespace

std::size_t page_padding(std::int64_t end, std::size_t line, std::size_t page) {
  if (end < 0 || page == 0 || line > page) return 0;
  const std::size_t used = static_cast<std::size_t>(end) % page;
  return used + line > page ? page - used : 0;
}

// A SIGKILL stops a write(2) to a regular file between the pages it copies
// (the kernel checks for a fatal signal before each one), so a line that
// spans a page boundary of the file can be cut in two by a kill, and a torn
// event makes its trial unknown; the harness kills workers right after their
// events on purpose (signal-on-event). A line that fits the page it starts in
// is copied whole or not at all: when the next line would cross, spaces fill
// the page first, so the line starts on the next page (JSON allows the
// leading whitespace: every line still parses alone). Another writer appending
// between the lseek and the write can still shift the line over a boundary:
// rarer by far, and then the reader's torn-event recovery applies as before.
void write_padded_line(int fd, const char* data, std::size_t size, std::size_t page) {
  static constexpr auto kSpaces = [] {
    std::array<char, 4096> a{};
    a.fill(' ');
    return a;
  }();
  // Where the file ends (-1 for a pipe or a terminal: nothing to pad). The
  // offset it moves is irrelevant: O_APPEND writes go to the end anyway.
  for (std::size_t pad = page_padding(::lseek(fd, 0, SEEK_END), size, page); pad > 0;) {
    const std::size_t n = std::min(pad, kSpaces.size());
    write_all_once(fd, kSpaces.data(), n);
    pad -= n;
  }
  write_all_once(fd, data, size);
}

void EventLog::emit(nlohmann::json event) const {
  if (fd_ < 0) return;
  if (!event.contains("t")) event["t"] = mono_ns();
  static const std::size_t page = [] {
    const long p = ::sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<std::size_t>(p) : std::size_t{4096};
  }();
  for (const std::string& line : split_event(event, PIPE_BUF))
    write_padded_line(fd_, line.data(), line.size(), page);
}

}  // namespace harness
