// summary.json's one decoder (summary.h): a complete summary decodes into the
// run it is of; a value out of type or range is refused by every command with
// the file, the JSON pointer (and inside "buckets" the line); a key that is
// absent is refused only by the command that needs it. (That what
// reports/summary_json.cc writes decodes back is reports/summary_json_test.cc.)
#include "summary.h"

#include <gtest/gtest.h>

#include <string>

namespace harness {
namespace {

// A whole summary.json as a run writes it, trimmed to one scenario and one violation.
const std::string kComplete = R"({
  "run_id": "r1", "seed": 5, "subject": "native", "elapsed_s": 1.5, "interrupted": false,
  "shard": "0/1", "max_kept": 20, "planned": 4,
  "violations": [
    {"invariant": "prefix.unique", "scenario": "basic", "trial": 3, "seed": 9, "run_seed": 5,
     "trial_dir": "/runs/r1/basic/trial-3", "reproduce": "shmstress run basic.toml --seed 5 --trial 3",
     "problems": ["two holders"]}
  ],
  "unknown": [],
  "buckets": [
    {
      "fingerprint": "prefix.unique/basic/0123456789ab",
      "status": "new", "invariant": "prefix.unique", "scenario": "basic",
      "trials": 1, "first_trial": 3, "last_trial": 3, "shape": "two holders",
      "problem": "two holders", "example_trial": 3, "example_seed": 9,
      "trial_dir": "/runs/r1/basic/trial-3", "reproduce": "shmstress run basic.toml --seed 5 --trial 3"
    }
  ],
  "tally": {
    "totals": {"trials": 4, "failing": 1, "harness_errors": 0, "not_valid_checks": 1,
               "new_violating": 1, "verdict": "invalid", "residual_verdict": "valid"},
    "scenarios": {
      "basic": {"file": "basic.toml", "trials": 4, "violating": 1, "unavailable": 0,
                "harness_errors": 0, "seconds": 2.5,
                "invariants": {"prefix.unique": {"invalid": 1, "unknown": 0, "invalid_new": 1,
                                                 "invalid_known": 0, "worst": "invalid"}},
                "faults": {"sigkill": 2}, "reached": {},
                "acquire": {"counts": [], "count": 0, "sum_s": 0},
                "barrier": {"counts": [], "count": 0, "sum_s": 0},
                "recovery": {"counts": [], "count": 0, "sum_s": 0},
                "first_unavailable": "", "last_unavailable": "", "first_harness_error": ""}
    },
    "sketches": {"acquire": {"count": 2, "min": 0.5, "max": 1.5, "exact": [0.5, 1.5]},
                 "barrier": {"count": 0, "min": 0, "max": 0, "exact": []},
                 "recovery": {"count": 0, "min": 0, "max": 0, "exact": []}},
    "buckets_overflow": 0, "known_seen": []
  }
})";

// kComplete with the first `from` replaced by `to`.
std::string With(const std::string& from, const std::string& to) {
  std::string s = kComplete;
  const auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

std::string DecodeError(const std::string& text) {
  StoredError e;
  EXPECT_FALSE(parse_summary(text, "s.json", &e)) << text;
  return e.to_string();
}

std::string RunResultError(const std::string& text) {
  StoredError e;
  auto s = parse_summary(text, "s.json", &e);
  EXPECT_TRUE(s) << e.to_string();
  if (!s) return "";
  EXPECT_FALSE(run_result_of(*s, &e));
  return e.to_string();
}

TEST(Summary, ACompleteSummaryIsTheRunItWasWrittenFrom) {
  StoredError e;
  auto s = parse_summary(kComplete, "s.json", &e);
  ASSERT_TRUE(s) << e.to_string();
  ASSERT_TRUE(s->buckets);
  EXPECT_EQ((*s->buckets)[0].line, 12);  // its "fingerprint" key
  auto r = run_result_of(*s, &e);
  ASSERT_TRUE(r) << e.to_string();
  EXPECT_EQ(r->run_id, "r1");
  EXPECT_EQ(r->seed, 5u);
  EXPECT_EQ(r->max_listed, 20u);
  EXPECT_EQ(r->tally.trials(), 4u);
  EXPECT_EQ(r->tally.acquire_ms().count(), 2u);
  ASSERT_EQ(r->listed.size(), 1u);
  EXPECT_EQ(r->listed[0].dir, "/runs/r1/basic/trial-3");
  EXPECT_EQ(r->listed[0].scenario_file, "basic.toml");
  EXPECT_EQ(r->listed[0].verdict, Verdict::kInvalid);
  ASSERT_EQ(r->tally.buckets().buckets().size(), 1u);
  EXPECT_EQ(r->tally.buckets().buckets().begin()->second.first_trial, 3);
  EXPECT_EQ(r->exit_code(), 1);
}

// `report` and `baseline` read a summary.json an older shmstress or a hand
// wrote; `merge` needs every key, and names the one that is not there.
TEST(Summary, AnAbsentKeyIsRefusedOnlyByTheCommandThatNeedsIt) {
  EXPECT_EQ(RunResultError(With(R"("seed": 5, )", "")), "s.json: /seed: is missing");
  EXPECT_EQ(RunResultError(With(R"("scenario": "basic", "trial": 3,)", R"("trial": 3,)")),
            "s.json: /violations/0/scenario: is missing");
  EXPECT_EQ(RunResultError(
                With(R"("status": "new", "invariant": "prefix.unique",)", R"("status": "new",)")),
            "s.json:12: /buckets/0/invariant: is missing");
}

TEST(Summary, AValueOutOfRangeIsRefusedWithItsPointerAndInBucketsItsLine) {
  EXPECT_EQ(DecodeError(With(R"("trials": 1,)", R"("trials": -1,)")),
            "s.json:14: /buckets/0/trials: must be a count (an integer in 0..2^40), got -1");
  EXPECT_EQ(DecodeError(With(R"("status": "new")", R"("status": "old")")),
            "s.json:13: /buckets/0/status: must be \"new\" or \"known\", got the string \"old\"");
  EXPECT_EQ(DecodeError(With(R"("planned": 4)", R"("planned": -2)")),
            "s.json: /planned: must be an integer in -1..1099511627776, got -2");
  EXPECT_EQ(
      DecodeError(With(R"("faults": {"sigkill": 2})", R"("faults": {"sigkill": 1099511627777})")),
      "s.json: /tally/scenarios/basic/faults/sigkill: 1099511627777 is past any run's count (at "
      "most 2^40)");
  EXPECT_EQ(DecodeError(With(R"("invalid_new": 1,)", R"("invalid_new": 0,)")),
            "s.json: /tally/scenarios/basic/invariants/prefix.unique: invalid_new + invalid_known "
            "!= invalid");
  EXPECT_EQ(DecodeError(With(R"("shard": "0/1")", R"("shard": "1")")),
            "s.json: /shard: \"1\" is not i/n (0 <= i < n)");
}

TEST(Summary, ASketchNoRunCouldHaveSavedIsRefused) {
  EXPECT_EQ(DecodeError(With(R"("count": 2, "min": 0.5)", R"("count": 3, "min": 0.5)")),
            "s.json: /tally/sketches/acquire: is not a consistent quantile sketch");
  EXPECT_EQ(
      DecodeError(With(R"("exact": [0.5, 1.5])", R"("exact": [0.5, "x"])")),
      "s.json: /tally/sketches/acquire/exact/1: must be a finite number, got the string \"x\"");
}

// Keys are the file's too: a scenario name in a pointer is made printable as a
// value is, so an escape sequence never reaches the terminal raw.
TEST(Summary, KeysAndValuesInMessagesAreShortAndPrintable) {
  EXPECT_EQ(DecodeError(With(R"("basic": {"file": "basic.toml", "trials": 4,)",
                             R"("\u001b[2J\u00c2\u009b": {"file": "basic.toml", "trials": "x",)")),
            "s.json: /tally/scenarios/?[2J\xc3\x82?/trials: must be a count (an integer in "
            "0..2^40), got the "
            "string \"x\"");
  EXPECT_EQ(
      DecodeError(With(R"("status": "new")", R"("status": "\u009b2J\u001b[2J")")),
      "s.json:13: /buckets/0/status: must be \"new\" or \"known\", got the string \"?2J?[2J\"");
}

}  // namespace
}  // namespace harness
