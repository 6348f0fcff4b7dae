// Whole files the harness process reads and writes. Everything it reads was
// written by someone else: a user's scenario, a subject's history, a stored
// run dir that a user may have edited, truncated or replaced. So every read is
// of a regular file (a FIFO would block forever, /dev/zero would fill memory)
// with a size cap, and says why it could not read.
//
// Every file the harness process writes goes through write_output, the one
// place that opens an output path: what is there decides how it is written,
// and nothing that is not a regular file is ever replaced (see below). Not for
// what workers append to (the history, their logs), which the trial
// supervisor opens in a trial dir it made itself.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

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

// Who named an output path, which decides what a symbolic link there means.
enum class OutputOrigin {
  // Named on the command line (--junit, --metrics-file, baseline -o): a
  // symbolic link is followed to what it names, as a shell's `>` would.
  kUser,
  // A file the harness places in a directory (summary.json and report.html
  // in --out, verdict.json and timelines in a trial dir): a symbolic link
  // there was not put there by the harness, so it is neither followed nor
  // replaced (a trial dir from a bug report must not aim a write at
  // /etc/passwd).
  kDerived,
};

// Why an output could not be written, with the exit code it means (DESIGN.md
// §8): 2 when what is at the path is not the harness's to replace (a
// directory, a device it does not write to, a FIFO nobody reads, a derived
// path that is a symbolic link); 3 when the environment failed (ENOSPC,
// EIO, a directory that cannot be written).
struct OutputError {
  int exit_code = 3;
  std::string message;  // starts with the path
};

// Writes `text` at `path`, the one place the harness opens an output path.
// What is there decides how:
// - nothing, or a regular file: a temp file in the same directory, fsync,
//   chmod 0644, rename over it, so a reader (node_exporter, a CI plugin, a
//   browser) sees the old file or the whole new one, never a torn one; no
//   temp file is left behind on failure;
// - the process's own open fd (/dev/stdout, /dev/stderr, /dev/fd/N,
//   /proc/self/fd/N): written to that fd where it stands, never reopened
//   or truncated (stdout redirected to a file keeps what was printed before);
// - /dev/null, /dev/zero, /dev/full, a terminal, or a FIFO with a reader:
//   written in place, never replaced (/dev/full answers ENOSPC: exit 3);
// - anything else that is not a regular file (a directory, a block device,
//   a socket, another character device, a FIFO nobody reads) is refused
//   with exit 2 and left as it is.
// The directory must exist. Returns nullopt once every byte is written.
//
// Durability (replacements only): kSynced fsyncs the temp file before the
// rename, so after a crash the path holds the old file or the whole new one.
// kUnsynced skips the fsync (a reader still never sees a torn file): for a
// trial dir's own files, which are no more durable than the history.jsonl
// beside them (workers append it, nobody fsyncs it) and most of which are
// removed once the trial passes; an fsync each cost a trial 0.4-0.8 ms, and
// at times 160 ms on a busy disk. Also for the run's live summary.json,
// rewritten once a second on the run loop's thread (one took 120 ms with its
// fsync): the final write is synced, and a crash mid-run loses at most that.
enum class Durability { kSynced, kUnsynced };
std::optional<OutputError> write_output(const std::string& path, std::string_view text,
                                        OutputOrigin origin, Durability durability = Durability::kSynced);
// What write_output would refuse with exit 2 whatever the moment (checked
// before a run, so a bad --junit does not cost an hour-long soak): a
// directory, a block device, a socket, a character device it does not write
// to, a derived path that is a symbolic link. A path that does not exist yet
// (nor its directory) passes.
std::optional<OutputError> check_output(const std::string& path, OutputOrigin origin);
// write_output of a file the harness derives (OutputOrigin::kDerived); false
// if it could not be written.
bool write_file(const std::string& path, const std::string& text);
// write_file of one of a trial dir's own files (scenario.toml,
// schedule.json, verdict.json): Durability::kUnsynced.
bool write_trial_file(const std::string& path, const std::string& text);

}  // namespace harness
