// Tests of SteadyAxis: still under jitter, wider at once, narrower after `patience`
// frames, always holding the data.
#include <gtest/gtest.h>

#include <cmath>

#include "tensorscope/plotting/steady_axis.h"

namespace tensorscope::plotting {
namespace {

bool holds(const AxisLimits& l, double lo, double hi) { return l.lo <= lo && hi <= l.hi; }

TEST(SteadyAxis, JitterDoesNotMoveTheAxis) {
  SteadyAxis axis;
  for (int i = 0; i < 200; ++i) {
    const double wobble = 0.04 * std::sin(i * 0.7);
    const AxisLimits l = axis.update(-1.0 + wobble, 1.0 - wobble);
    EXPECT_TRUE(holds(l, -1.0 + wobble, 1.0 - wobble)) << i;
  }
  EXPECT_EQ(axis.changes(), 1);
}

TEST(SteadyAxis, WidensAtOnceAndNarrowsAfterPatience) {
  SteadyAxis axis(5);
  AxisLimits l = axis.update(0, 1);
  EXPECT_TRUE(holds(l, 0, 1));
  l = axis.update(0, 30);  // grows: at once
  EXPECT_TRUE(holds(l, 0, 30));
  EXPECT_LT(l.hi, 40);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(axis.update(0, 1), l) << i;  // waits
  const AxisLimits narrow = axis.update(0, 1);
  EXPECT_TRUE(holds(narrow, 0, 1));
  EXPECT_LT(narrow.hi, 2);
}

TEST(SteadyAxis, FollowsAScaleShrinking100xWithFewChanges) {
  SteadyAxis axis;
  for (int i = 0; i < 500; ++i) {
    const double s = std::pow(100.0, -i / 499.0);
    const AxisLimits l = axis.update(-s, 2 * s);
    ASSERT_TRUE(holds(l, -s, 2 * s)) << i;
    // Never more than about 4x the data (half, plus patience frames of shrinking).
    EXPECT_LT(l.hi - l.lo, 5 * 3 * s) << i;
  }
  EXPECT_LT(axis.changes(), 30);
}

TEST(SteadyAxis, DegenerateAndNonFiniteInput) {
  SteadyAxis axis;
  const AxisLimits a = axis.update(3, 3);
  EXPECT_TRUE(holds(a, 3, 3));
  EXPECT_LT(a.lo, a.hi);
  EXPECT_EQ(axis.update(NAN, 1), a);
  EXPECT_EQ(axis.update(0, INFINITY), a);
  const AxisLimits z = SteadyAxis().update(0, 0);
  EXPECT_LT(z.lo, 0);
  EXPECT_GT(z.hi, 0);
  const AxisLimits huge = SteadyAxis().update(-1e308, 1e308);
  EXPECT_TRUE(std::isfinite(huge.lo) && std::isfinite(huge.hi));
  EXPECT_LT(huge.lo, huge.hi);
}

}  // namespace
}  // namespace tensorscope::plotting
