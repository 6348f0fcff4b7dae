// schedule.json as the run writes it (plan.h to_json) is what the offline
// commands decode (stored.h): the trial, both seeds, the scenario's name and file.
#include <gtest/gtest.h>

#include "plan.h"
#include "stored.h"

namespace harness {
namespace {

TEST(StoredSchedule, DecodesWhatThePlanWrites) {
  ScenarioError e;
  auto s = parse_scenario("name = \"basic\"\n[[job]]\nranks = 2\n", "scenarios/basic.toml", &e);
  ASSERT_TRUE(s) << e.to_string();
  const TrialPlan plan = base_plan(*s, 18446744073709551615u, 2147483647);
  StoredError err;
  auto back = parse_schedule(to_json(plan).dump(2), "schedule.json", &err);
  ASSERT_TRUE(back) << err.to_string();
  EXPECT_EQ(back->trial, 2147483647);
  EXPECT_EQ(back->run_seed, 18446744073709551615u);
  EXPECT_EQ(back->seed, plan.seed);
  EXPECT_EQ(back->scenario, "basic");
  EXPECT_EQ(back->scenario_file, "scenarios/basic.toml");
}

}  // namespace
}  // namespace harness
