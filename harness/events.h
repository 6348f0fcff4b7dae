// The event log: history.jsonl in the trial dir, shared by every worker and the
// supervisor. Each event is one JSON object + '\n' written with a single
// write(2) on an O_APPEND fd, at most PIPE_BUF bytes, so lines from concurrent
// writers never interleave and nothing waits in a user-space buffer: a SIGKILL
// loses nothing already logged. Times are CLOCK_MONOTONIC nanoseconds, shared by
// every process on the machine.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace harness {

std::int64_t mono_ns();

class EventLog {
 public:
  EventLog() = default;
  explicit EventLog(const std::string& path);  // opens O_WRONLY|O_APPEND|O_CREAT|O_CLOEXEC
  // Takes an fd already open for append (inherited from the supervisor).
  static EventLog adopt(int fd);
  EventLog(EventLog&& o) noexcept;
  EventLog& operator=(EventLog&& o) noexcept;
  ~EventLog();
  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // Adds "t" (now) unless present; shortens long strings to fit PIPE_BUF.
  void emit(nlohmann::json event) const;

 private:
  int fd_ = -1;
};

}  // namespace harness
