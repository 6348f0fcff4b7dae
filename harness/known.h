// What a run knows about failures it has seen before (baseline.h reads it
// from a file): plain values, free of the file formats, so results.h and
// run.h take them without <expected> (the clang 14 fuzz build of the harness
// cannot compile libstdc++ 12's <expected>).
//
// Process contract: plain values in the harness process.
#pragma once

#include <compare>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace harness {

// A date as the baseline spells it: days since 1970-01-01 (UTC).
struct Day {
  int days = 0;
  auto operator<=>(const Day&) const = default;
};
// "YYYY-MM-DD" (a real calendar date), or nothing.
std::optional<Day> parse_day(std::string_view text);
std::string day_text(Day d);
Day today_utc();

struct KnownFailure {
  std::string fingerprint;
  std::string reason;
  std::optional<Day> expires;  // none: never
  int line = 0;                // where the baseline says so
  // Read from a run's summary.json (not from a baseline file): whether that
  // run already reported the bucket as known, and what `shmstress baseline`
  // writes above the entry (the problem's shape, its trials, the run, the
  // reproduce command).
  bool known_in_run = false;
  std::string note;
};

struct Baseline {
  std::string file;
  std::string run_id = "?";  // a summary.json's run; "?" if it names none (a baseline file names none)
  // In force on the day the baseline was read for, by fingerprint.
  std::map<std::string, KnownFailure> known;
  // Listed, but their expiry has passed: their buckets count as new again.
  std::vector<KnownFailure> expired;

  const KnownFailure* find(std::string_view fingerprint) const;
};

struct BaselineError {
  std::string file;
  int line = 0;  // 0: the file as a whole
  std::string message;
  std::string to_string() const;  // "file:line: message"
};

// Parses baseline text, either format (baseline.h says which), as of `today`:
// entries whose expiry is before today go to Baseline::expired. `file` names
// it in errors. nullopt with *err (file:line: what is wrong) on bad input.
// baseline.h's parse_baseline is this, as a std::expected.
std::optional<Baseline> decode_baseline(std::string_view text, const std::string& file, Day today,
                                        BaselineError* err);

}  // namespace harness
