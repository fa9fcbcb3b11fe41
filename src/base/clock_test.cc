#include "base/clock.h"

#include <gtest/gtest.h>

namespace ecoserve {
namespace {

TEST(ClockTest, ManualClockMovesOnlyWhenTold) {
  ManualClock clock;
  EXPECT_EQ(clock.now().time_since_epoch().count(), 0);
  clock.advance(from_ms(1.5));
  EXPECT_EQ(clock.now().time_since_epoch().count(), 1'500'000);
  EXPECT_DOUBLE_EQ(seconds_since_epoch(clock.now()), 0.0015);
  clock.set(TimePoint(from_seconds(2)));
  EXPECT_DOUBLE_EQ(to_ms(clock.now().time_since_epoch()), 2000.0);
}

TEST(ClockTest, SteadyClockIsMonotonic) {
  SteadyClock clock;
  TimePoint a = clock.now();
  TimePoint b = clock.now();
  EXPECT_LE(a, b);
}

}  // namespace
}  // namespace ecoserve
