// Triage: which violations are the same flaw. A problem line a checker wrote
// is reduced to its *shape* (what is left once every pid, time, duration,
// path, shm name, seed and number is stripped), and a violation's
// *fingerprint* is its invariant + scenario + the shape of its problem. The
// same flaw found by 40 trials is one fingerprint; two different flaws under
// one invariant are two, because checkers describe them in different words.
//
// The normalizer is deliberately blind to wording: it knows token classes
// (numbers, times, paths, hex), not phrases, so a checker that rewords a line
// still gets a stable shape (a new one: fingerprints are as stable as the
// checkers' wording, and a baseline written before a rewording will see the
// reworded problem as new).
//
// Process contract: pure functions in the harness process. Fingerprints are
// stable across processes, builds and machines (FNV-1a over the text, never
// std::hash), so shards of one nightly and the nights after agree on them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checker.h"

namespace harness {

// The shape of one problem line: paths (and shm names) become <path>, times
// and durations <t>, numbers and hex strings <n>, other words with digits
// keep their letters (digits -> #); a list of equal placeholders collapses to
// one, and a clause repeated in a comma- or semicolon-separated list is kept
// once, so "pids 101,102" reads as "pids 7", and two ranks disagreeing as
// three. Whitespace is collapsed. At most kMaxShapeLength bytes.
std::string problem_shape(std::string_view problem);
inline constexpr std::size_t kMaxShapeLength = 400;

// "<invariant>/<scenario>/<12 lowercase hex digits>".
struct Fingerprint {
  std::string id;
  std::string shape;  // what the hash is over, besides invariant and scenario
};
Fingerprint make_fingerprint(std::string_view invariant, std::string_view scenario,
                             std::string_view shape);

// The parts of a fingerprint id, if it is well formed: an invariant and a
// scenario name ([A-Za-z0-9._-]+, no '/') and 12 hex digits.
struct FingerprintParts {
  std::string invariant, scenario, hash;
};
std::optional<FingerprintParts> parse_fingerprint(std::string_view id);

// The fingerprints of one violation (a check with verdict invalid): one per
// distinct shape among its problems, in the order they first appear, at most
// kMaxShapesPerViolation of them. A violation without problem text gets the
// shape "(no problem text)".
inline constexpr std::size_t kMaxShapesPerViolation = 8;
std::vector<Fingerprint> violation_fingerprints(std::string_view scenario, const CheckResult& c);

}  // namespace harness
