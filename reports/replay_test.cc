#include <gtest/gtest.h>

#include "reports/reports.h"

namespace reports {
namespace {

using harness::Verdict;

harness::StoredVerdict VerdictOf(std::vector<std::pair<std::string, Verdict>> checks) {
  harness::StoredVerdict v;
  v.verdict = Verdict::kInvalid;
  for (const auto& [inv, verdict] : checks) v.checks.push_back({inv, verdict});
  return v;
}

harness::RunResult Replay(std::vector<std::pair<std::string, Verdict>> checks,
                          bool harness_error = false) {
  harness::RunResult r;
  harness::TrialResult t;
  for (const auto& [inv, v] : checks) {
    harness::CheckResult c;
    c.invariant = inv;
    c.verdict = v;
    t.checks.push_back(c);
  }
  t.harness_error = harness_error;
  r.add(t);
  return r;
}

TEST(Replay, TargetsAreTheInvalidInvariantsElseTheUnknownOnes) {
  EXPECT_EQ(replay_targets(VerdictOf({{"a", Verdict::kValid},
                                      {"b", Verdict::kInvalid},
                                      {"c", Verdict::kUnknown},
                                      {"d", Verdict::kInvalid}})),
            (std::vector<std::string>{"b", "d"}));
  EXPECT_EQ(replay_targets(VerdictOf({{"a", Verdict::kValid}, {"c", Verdict::kUnknown}})),
            (std::vector<std::string>{"c"}));
  EXPECT_TRUE(replay_targets(VerdictOf({{"a", Verdict::kValid}})).empty());
  EXPECT_TRUE(replay_targets(VerdictOf({})).empty());
}

TEST(Replay, CountsHowOftenEachTargetFailsAgain) {
  ReplayTally t;
  t.targets = {"prefix.unique"};
  add_replay(&t,
             Replay({{"prefix.unique", Verdict::kInvalid}, {"cleanup.safety", Verdict::kValid}}));
  add_replay(&t,
             Replay({{"prefix.unique", Verdict::kValid}, {"cleanup.safety", Verdict::kInvalid}}));
  add_replay(&t, Replay({{"prefix.unique", Verdict::kUnknown}}, true));
  EXPECT_EQ(t.replays, 3);
  EXPECT_EQ(t.harness_errors, 1);
  EXPECT_TRUE(t.reproduced());
  EXPECT_EQ(replay_text(t),
            "  prefix.unique: 1/3 (inconclusive in 1)\n"
            "  cleanup.safety: 1/3 (did not fail originally)\n"
            "  harness errors in 1/3 replays\n");
}

TEST(Replay, NotReproducedWhenOnlyOtherInvariantsFail) {
  ReplayTally t;
  t.targets = {"prefix.unique"};
  add_replay(&t, Replay({{"cleanup.safety", Verdict::kInvalid}}));
  EXPECT_FALSE(t.reproduced());
  EXPECT_EQ(replay_text(t),
            "  prefix.unique: 0/1\n  cleanup.safety: 1/1 (did not fail originally)\n");
}

TEST(CommandFlag, ReadsFlagsAsRunQuotesThem) {
  EXPECT_EQ(command_flag("build/shmstress run s.toml --worker-bin build/m/x --seed 3 --trial 0",
                         "--worker-bin"),
            "build/m/x");
  EXPECT_EQ(command_flag("shmstress run 'a b.toml' --worker-bin '/opt/it'\\''s here/w' --seed 3",
                         "--worker-bin"),
            "/opt/it's here/w");
  EXPECT_EQ(command_flag("shmstress run x --worker-bin=\"/a \\\"b\\\"\"", "--worker-bin"),
            "/a \"b\"");
  EXPECT_EQ(command_flag("shmstress run x --seed 3", "--worker-bin"), std::nullopt);
  EXPECT_EQ(command_flag("shmstress run x --worker-bin", "--worker-bin"), std::nullopt);
}

}  // namespace
}  // namespace reports
