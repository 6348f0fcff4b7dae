// A checker decides one invariant of DESIGN.md §4 over a finished History. It
// is pure: no files, no processes, no clocks. One checker per file in
// checkers/, registered with one line: SHMSTRESS_REGISTER_CHECKER(fn).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "history.h"

namespace harness {

enum class Verdict { kValid, kUnknown, kInvalid };  // ordered: compose with max()

inline Verdict compose(Verdict a, Verdict b) { return a > b ? a : b; }
const char* verdict_name(Verdict v);  // "valid" / "unknown" / "invalid"

struct CheckResult {
  std::string invariant;              // e.g. "prefix.unique"
  Verdict verdict = Verdict::kValid;
  std::vector<std::string> problems;  // one line each, naming ops/pids/times
  std::vector<std::string> reached;   // reached-state names this history shows
  // Set by the run (not the checker) when the scenario excuses this invariant:
  // the reason. Its verdict is then shown but does not count.
  std::string excused;
};

struct CheckerInfo {
  std::string invariant;
  std::string summary;  // one line for `shmstress list`
  std::function<CheckResult(const History&)> check;
  // Every reached-state name `check` may report, so a scenario's
  // expect_reached can be validated before anything runs.
  std::vector<std::string> reached_states = {};
  // Its invalid verdict on the record of a running trial up to a cut
  // (History::cut_t) holds for every record the trial can go on to write:
  // each rule that says invalid was checked to stay invalid however the
  // trial continues (docs/architecture.md, "Judging a running trial"). Only
  // such checkers judge a cut; the others are not run on one.
  bool judges_cuts = false;
};

// The text a checker that does not judge cuts gets as its `excused`, on a cut record.
inline constexpr char kNotJudgedAtCut[] =
    "not judged: the trial was stopped at its first violation, and this invariant is judged only "
    "on a whole trial";

std::vector<CheckerInfo>& checker_registry();

struct CheckerRegistration {
  explicit CheckerRegistration(CheckerInfo info) { checker_registry().push_back(std::move(info)); }
};

#define SHMSTRESS_CONCAT2(a, b) a##b
#define SHMSTRESS_CONCAT(a, b) SHMSTRESS_CONCAT2(a, b)
#define SHMSTRESS_REGISTER_CHECKER(...) \
  static ::harness::CheckerRegistration SHMSTRESS_CONCAT(checker_reg_, __LINE__)(::harness::CheckerInfo{__VA_ARGS__})

// Runs every registered checker (or those named) over h. On a cut record
// (h.cut_t), a checker without judges_cuts is not run: its result is valid,
// with kNotJudgedAtCut as its excuse.
std::vector<CheckResult> run_checkers(const History& h, const std::vector<std::string>& only = {});

}  // namespace harness
