// Whole files the harness process reads and writes. Everything it reads was
// written by someone else: a user's scenario, a subject's history, a stored
// run dir that a user may have edited, truncated or replaced. So every read is
// of a regular file (a FIFO would block forever, /dev/zero would fill memory)
// with a size cap, and says why it could not read. Not for reports, which are
// written atomically (reports/files.cc), nor for what workers append to.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace harness {

// A user's file: a scenario, a subject.toml, schedule.json, verdict.json,
// summary.json, a baseline. Far above any real one (a scenario is a few KB, a
// summary.json with --max-kept 0 a few MB).
inline constexpr std::size_t kMaxUserFileBytes = std::size_t{16} << 20;
// A trial's history.jsonl: every event is at most PIPE_BUF, and the largest
// scenario the limits allow (256 ranks, 10,000 rounds) is far past what a
// trial timeout lets happen; a real one is under 1 MB. Past this the history
// is not read: it is a history error and the trial is unknown.
inline constexpr std::size_t kMaxHistoryBytes = std::size_t{64} << 20;

// The whole of the regular file at `path` (symlinks followed), if it has at
// most `max_bytes`. Otherwise nullopt, and *why (if non-null) says why in a
// few words that follow the path: "is a FIFO, not a regular file", "is
// 17825792 bytes, over the 16 MiB limit", "No such file or directory". Never
// blocks on a FIFO or a device and never reads more than max_bytes + 1 bytes.
std::optional<std::string> read_regular_file(const std::string& path, std::size_t max_bytes,
                                             std::string* why);

// The file's contents (read_regular_file with kMaxHistoryBytes); empty if it
// cannot be read.
std::string read_file(const std::string& path);
// Creates or truncates; false if it cannot be written.
bool write_file(const std::string& path, const std::string& text);

}  // namespace harness
