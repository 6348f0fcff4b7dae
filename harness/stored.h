// What a run directory stores that the offline commands (check, report,
// replay, shrink) read back: each trial's schedule.json and verdict.json, and
// the run's summary.json (its record is summary.h's). The run wrote them, but
// by the time they are read anyone may have edited, truncated or replaced
// them, so each is decoded once into a typed record: a file that does not fit
// is a StoredError naming the file and where in it (a JSON pointer such as
// /violations/2/reproduce, or the line and column of a syntax error), never an
// exception.
//
// Keys the offline commands do not use are ignored (a newer harness may add
// some); the ones they use must have the type and range the run writes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checker.h"

namespace harness {

struct StoredError {
  std::string file;
  std::string where;  // "/trial", "line 3", or empty (the file as a whole)
  std::string message;
  int line = 0;  // the line of `where` in the file, where the decoder knows it; 0: not known
  // "file: /trial: must be an integer, got "abc"", "file:4: /buckets/0/trials: ..."
  std::string to_string() const;
};

// The text of a file a user or an earlier run left for us to read back: a
// regular file within kMaxUserFileBytes, else an error naming it. Every
// stored-file loader (schedule, verdict, summary) reads through this.
std::optional<std::string> read_stored(const std::string& path, StoredError* err);

// A stored JSON document nested deeper than this is refused before it is
// parsed: nothing the harness writes is deeper than 6.
inline constexpr int kMaxStoredJsonDepth = 64;

// A count no run reaches (2^40: a trial a microsecond for twelve days, a
// million times over). Stored counts are at most this, so the sums of the
// shards of one nightly (at most 100000, summary.h) fit in 64 bits.
inline constexpr std::uint64_t kMaxStoredCount = std::uint64_t{1} << 40;

// schedule.json: which trial of which run this is (plan.cc writes it).
struct StoredSchedule {
  int trial = 0;               // >= 0
  std::uint64_t run_seed = 0;  // the run's master seed
  std::uint64_t seed = 0;      // the trial's own seed
  std::optional<std::string> scenario;       // its name: a valid scenario name
  std::optional<std::string> scenario_file;  // the file the run loaded it from
  std::optional<std::string> subject;        // the subject the trial ran (empty: native)
};

// verdict.json: what the run's check said (run.cc writes it).
struct StoredCheck {
  std::string invariant;
  Verdict verdict = Verdict::kValid;
  std::optional<std::string> excused;  // the scenario excused it: shown, counts for nothing
  std::vector<std::string> problems;   // what it found (shrink fingerprints them)
};
struct StoredVerdict {
  Verdict verdict = Verdict::kValid;
  std::vector<StoredCheck> checks;
};

// Decoders of a file's text (`file` names it in errors).
std::optional<StoredSchedule> parse_schedule(std::string_view text, const std::string& file,
                                             StoredError* err);
std::optional<StoredVerdict> parse_verdict(std::string_view text, const std::string& file,
                                           StoredError* err);

// The same, reading the file first (a regular file of at most
// kMaxUserFileBytes, files.h).
std::optional<StoredSchedule> load_schedule(const std::string& path, StoredError* err);
std::optional<StoredVerdict> load_verdict(const std::string& path, StoredError* err);

// The deepest nesting of arrays and objects in JSON text (strings skipped),
// stopping early once past `limit`; and the 1-based line where it got there.
int json_depth(std::string_view text, int limit, int* line);

}  // namespace harness
