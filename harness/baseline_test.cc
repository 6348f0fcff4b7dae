// Baselines are parsed once into types; bad input is an error naming
// file:line and what is wrong, never a silently empty baseline.
#include "baseline.h"

#include <gtest/gtest.h>

namespace harness {
namespace {

const Day kToday = *parse_day("2026-06-15");

TEST(Baseline, ParsesFingerprintsExpiriesAndReasons) {
  auto b = parse_baseline(
      "# known failures\n"
      "\n"
      "cleanup.safety/basic/3f2a9c1b07de  2026-06-30  Streaming removes live segments (upstream #712)\n"
      "  prefix.unique/kill-holder/0123456789ab never reuse of a dead job's prefix\n"
      "barrier.liveness/barrier-kill/aaaaaaaaaaaa 2026-06-15 expires today: still in force\n"
      "barrier.liveness/barrier-kill/bbbbbbbbbbbb 2026-06-14 expired yesterday\n",
      "known.txt", kToday);
  ASSERT_TRUE(b) << b.error().to_string();
  EXPECT_EQ(b->file, "known.txt");
  ASSERT_EQ(b->known.size(), 3u);
  const KnownFailure* k = b->find("cleanup.safety/basic/3f2a9c1b07de");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->reason, "Streaming removes live segments (upstream #712)");
  EXPECT_EQ(day_text(*k->expires), "2026-06-30");
  EXPECT_EQ(k->line, 3);
  EXPECT_FALSE(b->find("prefix.unique/kill-holder/0123456789ab")->expires);
  EXPECT_NE(b->find("barrier.liveness/barrier-kill/aaaaaaaaaaaa"), nullptr);
  EXPECT_EQ(b->find("barrier.liveness/barrier-kill/bbbbbbbbbbbb"), nullptr);
  ASSERT_EQ(b->expired.size(), 1u);
  EXPECT_EQ(b->expired[0].line, 6);
}

TEST(Baseline, BadLinesNameFileLineAndWhat) {
  struct Case {
    const char* text;
    const char* error;
  } cases[] = {
      {"x/y/z never because\n", "known.txt:1: 'x/y/z' is not a fingerprint (expected INVARIANT/SCENARIO/HASH, "
                                "HASH 12 hex digits, as `shmstress baseline` writes it)"},
      {"# c\ncleanup.safety/basic/3f2a9c1b07de\n",
       "known.txt:2: expected FINGERPRINT EXPIRES REASON, got only a fingerprint (EXPIRES is YYYY-MM-DD or never)"},
      {"cleanup.safety/basic/3f2a9c1b07de 2026-02-30 why\n",
       "known.txt:1: expiry '2026-02-30' is not a date (YYYY-MM-DD) or never"},
      {"cleanup.safety/basic/3f2a9c1b07de tomorrow why\n",
       "known.txt:1: expiry 'tomorrow' is not a date (YYYY-MM-DD) or never"},
      {"cleanup.safety/basic/3f2a9c1b07de never   \n",
       "known.txt:1: no reason for cleanup.safety/basic/3f2a9c1b07de: say why it is known"},
      {"cleanup.safety/basic/3f2a9c1b07de never a\n\ncleanup.safety/basic/3f2a9c1b07de never b\n",
       "known.txt:3: cleanup.safety/basic/3f2a9c1b07de is listed twice (first on line 1)"},
  };
  for (const auto& c : cases) {
    auto b = parse_baseline(c.text, "known.txt", kToday);
    ASSERT_FALSE(b) << c.text;
    EXPECT_EQ(b.error().to_string(), c.error);
  }
}

TEST(Baseline, ASummaryJsonIsABaselineToo) {
  const std::string summary = R"({
  "run_id": "20260614-010000-7",
  "buckets": [
    {
      "fingerprint": "cleanup.safety/basic/3f2a9c1b07de",
      "status": "new"
    },
    {
      "fingerprint": "prefix.unique/kill-holder/0123456789ab",
      "status": "known",
      "known_reason": "reuse of a dead job's prefix",
      "known_expires": "2026-07-01"
    }
  ]
})";
  auto b = parse_baseline(summary, "summary.json", kToday);
  ASSERT_TRUE(b) << b.error().to_string();
  ASSERT_EQ(b->known.size(), 2u);
  EXPECT_EQ(b->find("cleanup.safety/basic/3f2a9c1b07de")->reason, "seen in run 20260614-010000-7");
  EXPECT_EQ(b->find("cleanup.safety/basic/3f2a9c1b07de")->line, 5);
  EXPECT_EQ(b->find("prefix.unique/kill-holder/0123456789ab")->reason, "reuse of a dead job's prefix");
  EXPECT_EQ(day_text(*b->find("prefix.unique/kill-holder/0123456789ab")->expires), "2026-07-01");
}

TEST(Baseline, BadSummaryJsonNamesTheLine) {
  auto b = parse_baseline("{\n  \"buckets\": [\n    {\"fingerprint\": 3}\n  ]\n}\n", "s.json", kToday);
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().to_string(), "s.json:3: /buckets/0/fingerprint: must be a string, got 3");
  b = parse_baseline("{\n  \"buckets\": [\n    {\"status\": \"new\"}\n  ]\n}\n", "s.json", kToday);
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().to_string(), "s.json:3: /buckets/0/fingerprint: is missing");
  b = parse_baseline("{\n  \"buckets\": [\n    {\"fingerprint\": \"a/b/c\"}\n  ]\n}\n", "s.json", kToday);
  ASSERT_FALSE(b);
  EXPECT_TRUE(b.error().to_string().starts_with("s.json:3: 'a/b/c' is not a fingerprint")) << b.error().to_string();
  b = parse_baseline("{\n  \"buckets\": [\n    {\"fingerprint\": \"a\",\n", "s.json", kToday);
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().to_string(),
            "s.json: not valid JSON: parse error at line 4, column 1: syntax error while parsing object key - "
            "unexpected end of input; expected string literal");
  b = parse_baseline("{\"trials\": 3}", "s.json", kToday);
  ASSERT_FALSE(b);
  EXPECT_TRUE(b.error().to_string().starts_with("s.json:1: a JSON baseline must be a run's summary.json"));
}

// A known bucket's reason is written into a line that must have one: blank
// is refused in a summary.json as it is in a baseline file.
TEST(Baseline, ABlankKnownReasonIsRefusedAsABlankLineReasonIs) {
  const std::string fp = "cleanup.safety/basic/3f2a9c1b07de";
  auto b = parse_baseline("{\n  \"buckets\": [\n    {\"fingerprint\": \"" + fp +
                              "\",\n     \"known_reason\": \" \\t\"}\n  ]\n}\n",
                          "s.json", kToday);
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().to_string(), "s.json:4: /buckets/0/known_reason: must be a non-blank string");
  b = parse_baseline(fp + "  never   \t \n", "known.txt", kToday);
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().to_string(), "known.txt:1: no reason for " + fp + ": say why it is known");
}

TEST(Baseline, WhatItWritesParsesBack) {
  std::vector<KnownFailure> entries = {
      {"cleanup.safety/basic/3f2a9c1b07de", "two\nlines", parse_day("2026-07-01"), 0},
      {"prefix.unique/kill-holder/0123456789ab", "known since run r", std::nullopt, 0},
  };
  const std::string text = baseline_text(entries, {"cleanup by <n> removed <path>\nreproduce: x", ""});
  auto b = parse_baseline(text, "out.txt", kToday);
  ASSERT_TRUE(b) << b.error().to_string() << "\n" << text;
  ASSERT_EQ(b->known.size(), 2u);
  EXPECT_EQ(b->find("cleanup.safety/basic/3f2a9c1b07de")->reason, "two lines");
  EXPECT_NE(text.find("# cleanup by <n> removed <path>\n# reproduce: x\n"), std::string::npos) << text;
}

TEST(Baseline, Days) {
  EXPECT_EQ(parse_day("1970-01-01")->days, 0);
  EXPECT_EQ(day_text(*parse_day("2024-02-29")), "2024-02-29");
  EXPECT_FALSE(parse_day("2023-02-29"));
  EXPECT_FALSE(parse_day("2023-2-28"));
  EXPECT_FALSE(parse_day("2023-02-28x"));
  EXPECT_LT(*parse_day("2026-06-14"), *parse_day("2026-06-15"));
}

}  // namespace
}  // namespace harness
