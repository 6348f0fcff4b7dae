// The one interval rule of the live outputs (reports/throttle.h).
#include "reports/throttle.h"

#include <gtest/gtest.h>

namespace reports {
namespace {

TEST(Throttle, IsDueFirstThenOnlyOnceTheIntervalHasPassed) {
  using std::chrono::milliseconds;
  const std::chrono::steady_clock::time_point t0{std::chrono::seconds(100)};
  Throttle th(milliseconds(1000));
  EXPECT_TRUE(th.due(t0));
  EXPECT_FALSE(th.due(t0 + milliseconds(1)));
  EXPECT_FALSE(th.due(t0 + milliseconds(999)));
  EXPECT_TRUE(th.due(t0 + milliseconds(1000)));
  EXPECT_FALSE(th.due(t0 + milliseconds(1500)));  // counted from the last write, not from t0
  EXPECT_TRUE(th.due(t0 + milliseconds(2000)));
}

}  // namespace
}  // namespace reports
