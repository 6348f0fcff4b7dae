// A baseline: the failures a nightly already knows about. With one, a run
// reports each bucket (triage.h) as known or new, only a new bucket fails it
// (exit 1), and a known bucket that did not recur is named. docs/ci.md has a
// worked example.
//
// Two inputs are accepted, told apart by their first character:
// - a baseline file, written by `shmstress baseline` and edited by hand, one
//   known failure per line (blank lines and lines starting with '#' are
//   ignored):
//       FINGERPRINT  EXPIRES  REASON
//   FINGERPRINT as triage.h spells it ("cleanup.safety/basic/3f2a9c1b07de"),
//   EXPIRES "YYYY-MM-DD" (known through the end of that day, UTC) or "never",
//   REASON free text to the end of the line (required: say why it is known);
// - a run's summary.json (it starts with '{'): its buckets, with the reasons
//   and expiries they were known by, or "seen in run <id>".
// Either is parsed once, here, into a Baseline; bad input is an error value
// naming file:line.
//
// Process contract: plain values in the harness process; the file is read
// once, before the run.
#pragma once

#include <expected>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "known.h"

namespace harness {

// Parses baseline text (either format) as of `today`: entries whose expiry is
// before today go to Baseline::expired. `file` names it in errors.
std::expected<Baseline, BaselineError> parse_baseline(std::string_view text,
                                                      const std::string& file, Day today);
// Reads and parses a file.
std::expected<Baseline, BaselineError> load_baseline(const std::string& path, Day today);

// A baseline file's text for these entries (in this order), with a header
// saying what the columns are. `notes[i]`, if not empty, is written as
// comment lines above entry i (the problem's shape, a reproduce command).
std::string baseline_text(const std::vector<KnownFailure>& entries,
                          const std::vector<std::string>& notes = {});

}  // namespace harness
