// The event log: history.jsonl in the trial dir, shared by every worker and the
// supervisor. Each line is one JSON object + '\n' written with a single
// write(2) on an O_APPEND fd, at most PIPE_BUF bytes, so lines from concurrent
// writers never interleave and nothing waits in a user-space buffer: a SIGKILL
// loses nothing already logged. Times are CLOCK_MONOTONIC nanoseconds, shared by
// every process on the machine. Nothing is ever dropped: an event too long for
// one line is split into continuation lines (docs/worker-protocol.md), and
// whatever still cannot fit is cut and marked "truncated".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace harness {

std::int64_t mono_ns();

// Nanoseconds the calling thread has spent runnable but waiting for a CPU
// since it started: the kernel's run_delay (/proc/thread-self/schedstat,
// CONFIG_SCHED_INFO). Cumulative, so the difference of two readings is the
// time the scheduler kept this thread off a CPU between them: what an
// oversubscribed machine, not the code, added to a latency. -1 where the
// kernel does not account it or the file cannot be opened (e.g. at the
// RLIMIT_NOFILE limit). Opens, reads and closes one small /proc file.
std::int64_t cpu_wait_ns();
// The same for the main thread of process `pid` (as this process's /proc
// names it), also while it is a zombie: a parent reads a child's final value
// between waitid(WNOWAIT) and the reap. -1 if unavailable.
std::int64_t cpu_wait_ns_of(int pid);

// Nanoseconds process `pid` has spent on a CPU since it started (user and
// system, every thread: the native worker has one), cumulative too, from its
// CPU-time clock, which the kernel brings up to date for a running process
// at each read (schedstat's own run field lags by up to a tick). A waiter
// that sleeps adds little to it however long it waits; one that spins adds
// all the CPU the scheduler gives it (docs/worker-protocol.md, cpu_run_ns).
// Two system calls, no /proc file. -1 if unavailable.
std::int64_t cpu_run_ns_of(int pid);

// Both, for the calling process (its run_ns from CLOCK_PROCESS_CPUTIME_ID) or
// for process `pid`.
struct CpuTimes {
  std::int64_t run_ns = -1;
  std::int64_t wait_ns = -1;
};
CpuTimes cpu_times();
CpuTimes cpu_times_of(int pid);

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
  // Adds "t" (now) unless present, then writes split_event()'s lines.
  void emit(nlohmann::json event) const;

 private:
  int fd_ = -1;
};

// Writes one line (its '\n' included) to the O_APPEND fd `fd`, after
// page_padding()'s spaces: a line that fits a page is then torn by no kill.
// Async-signal-safe (lseek and write only): the worker's signal handler
// writes its line through it too.
void write_padded_line(int fd, const char* data, std::size_t size, std::size_t page);

// How many spaces to write first so that a `line`-byte line
// appended at offset `end` does not cross a `page` boundary of the file (0:
// it fits, or it is longer than a page anyway).
std::size_t page_padding(std::int64_t end, std::size_t line, std::size_t page);

// The lines (each with its '\n', each at most `cap` bytes) that carry `event`:
// one line when it fits; else its longest list split in two, every line but
// the last marked "continues": true, each other list in the first line only;
// a single value that still cannot fit is cut and the line marked "truncated".
std::vector<std::string> split_event(const nlohmann::json& event, std::size_t cap);

}  // namespace harness
