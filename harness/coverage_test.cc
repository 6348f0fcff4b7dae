#include "coverage.h"

#include <gtest/gtest.h>

namespace harness {
namespace {

Op op(int job, int pid, const char* name, std::int64_t from, std::int64_t to, Outcome out = Outcome::kOk) {
  Op o;
  o.job = job;
  o.rank = 0;
  o.pid = pid;
  o.op = name;
  o.invoke_t = from;
  o.complete_t = to;
  o.outcome = out;
  return o;
}

constexpr std::int64_t kMs = 1'000'000;

TEST(Coverage, ANeighbourActingAfterACrashReachesTheCrashCell) {
  History h;
  Exit e;
  e.job = 0;
  e.pid = 5;
  e.t = 100 * kMs;
  e.signal = 9;
  e.crash_point = "crash/registry/after-size";
  h.exits.push_back(e);
  h.ops.push_back(op(0, 5, "acquire", 90 * kMs, 100 * kMs, Outcome::kInfo));  // the dead one's own
  h.ops.push_back(op(1, 7, "acquire", 150 * kMs, 160 * kMs));
  h.ops.push_back(op(1, 8, "clean", 2000 * kMs, 2010 * kMs));  // long after: not inside
  std::set<std::string> reached;
  add_window_states(h, &reached);
  EXPECT_EQ(reached, (std::set<std::string>{"window:crash/registry/after-size:crash:acquire"}));
}

TEST(Coverage, OnlyOpsOverlappingAPauseReachThePauseCell) {
  History h;
  Fault f;
  f.kind = "pause-at-point";
  f.job = 0;
  f.pid = 5;
  f.start_t = 1000 * kMs;
  f.end_t = 1300 * kMs;
  f.detail = {{"point", "crash/lease/locked"}, {"nth", 1}};
  h.faults.push_back(f);
  h.ops.push_back(op(0, 5, "barrier", 900 * kMs, 1400 * kMs));   // the paused process itself
  h.ops.push_back(op(1, 7, "clean", 1200 * kMs, 1500 * kMs));    // inside
  h.ops.push_back(op(1, 8, "barrier", 500 * kMs, 900 * kMs));    // before
  h.ops.push_back(op(2, 9, "acquire", 1350 * kMs, 1400 * kMs));  // after
  std::set<std::string> reached;
  add_window_states(h, &reached);
  EXPECT_EQ(reached, (std::set<std::string>{"window:crash/lease/locked:pause:clean"}));
}

TEST(Coverage, AStopEndedByAKillReachesThePauseCellWhileStoppedAndTheCrashCellAfter) {
  History h;
  Fault f;
  f.kind = "pause-at-point";
  f.job = 0;
  f.pid = 5;
  f.start_t = 1000 * kMs;
  f.end_t = 1020 * kMs;  // the kill
  f.detail = {{"point", "crash/registry/poison-half-written"}, {"nth", 1}, {"then", "kill"}};
  h.faults.push_back(f);
  h.ops.push_back(op(1, 7, "clean", 1010 * kMs, 1015 * kMs));    // while it was stopped
  h.ops.push_back(op(2, 9, "acquire", 1500 * kMs, 1600 * kMs));  // after it died there
  h.ops.push_back(op(3, 11, "barrier", 2100 * kMs, 2200 * kMs)); // a second after: not inside
  std::set<std::string> reached;
  add_window_states(h, &reached);
  EXPECT_EQ(reached, (std::set<std::string>{"window:crash/registry/poison-half-written:pause:clean",
                                            "window:crash/registry/poison-half-written:crash:acquire"}));
}

TEST(Coverage, TheTableHasEveryFailpointWithItsCounts) {
  auto rows = coverage_table({{"window:crash/lease/locked:pause:clean", 3}});
  ASSERT_FALSE(rows.empty());
  std::size_t windows = 0;
  for (const auto& r : rows) {
    ASSERT_EQ(r.counts.size(), 6u);
    windows += r.window;
    if (r.point == "crash/lease/locked") {
      EXPECT_TRUE(r.window);
      EXPECT_EQ(r.counts, (std::vector<std::uint64_t>{0, 0, 0, 0, 3, 0}));
    }
  }
  EXPECT_GT(windows, 0u);
}

}  // namespace
}  // namespace harness
