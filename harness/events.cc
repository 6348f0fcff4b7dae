#include "events.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <ctime>
#include <utility>

namespace harness {

std::int64_t mono_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

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

// Halves the longest strings until the line fits in one atomic write.
void shrink(nlohmann::json& j, std::size_t cap) {
  for (int round = 0; round < 16; ++round) {
    std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (s.size() + 1 <= cap) return;
    std::string* longest = nullptr;
    std::function<void(nlohmann::json&)> walk = [&](nlohmann::json& v) {
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
  }
}

}  // namespace

void EventLog::emit(nlohmann::json event) const {
  if (fd_ < 0) return;
  if (!event.contains("t")) event["t"] = mono_ns();
  shrink(event, PIPE_BUF);
  std::string line = event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (line.size() > PIPE_BUF) return;  // could not shrink: never write a torn line
  ssize_t n;
  do {
    n = ::write(fd_, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
}

}  // namespace harness
