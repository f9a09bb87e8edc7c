// overview_scale_test.cc — the overview's one color scale: decades around the values on a
// log scale (a few tiny values do not squeeze the rest), 0..1 (or up to the largest) for a
// fraction, nothing to scale without a finite value.
#include "tensorscope/recording/overview_scale.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace tensorscope::recording {
namespace {

constexpr size_t kGradNorm = static_cast<size_t>(OverviewMetricId::kGradNorm);
constexpr size_t kZeros = static_cast<size_t>(OverviewMetricId::kZeroFraction);
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(OverviewScaleTest, LogDecadesAroundTheValues) {
  const OverviewScale s = overview_scale(kGradNorm, {0.8e-4f, 1e-3f, 1e-2f, 1.2f, kNaN, 0.0f});
  ASSERT_TRUE(s.valid);
  EXPECT_TRUE(s.log);
  EXPECT_EQ(s.lo, -5);  // 1e-4 * 0.8 is in the decade below 1e-4
  EXPECT_EQ(s.hi, 1);   // 1.2 is above 1
  EXPECT_LT(s.position(0), 0);
  EXPECT_NEAR(s.position(1e-2), 0.5, 1e-9);
}

TEST(OverviewScaleTest, AFewTinyValuesStartTwoDecadesBelowTheFirstPercentile) {
  std::vector<float> values(1000, 1.0f);
  for (int i = 0; i < 5; ++i) values[i] = 1e-20f;
  values.back() = 100;
  const OverviewScale s = overview_scale(kGradNorm, values);
  EXPECT_EQ(s.lo, -2);
  EXPECT_EQ(s.hi, 2);
}

TEST(OverviewScaleTest, FractionsAreLinearFromZeroToOneOrTheLargest) {
  const OverviewScale s = overview_scale(kZeros, {0.25f, 0.5f});
  ASSERT_TRUE(s.valid);
  EXPECT_FALSE(s.log);
  EXPECT_EQ(s.lo, 0);
  EXPECT_EQ(s.hi, 1);
  EXPECT_NEAR(s.position(0.25), 0.25, 1e-12);
  EXPECT_EQ(overview_scale(kZeros, {3.0f}).hi, 3);
}

TEST(OverviewScaleTest, NoFiniteValueGivesNoScale) {
  EXPECT_FALSE(overview_scale(kGradNorm, {kNaN, 0.0f, -1.0f}).valid) << "a log scale needs a positive value";
  EXPECT_FALSE(overview_scale(kZeros, {}).valid);
  EXPECT_TRUE(overview_scale(kZeros, {0.0f}).valid);
}

TEST(OverviewScaleTest, TheGridsScaleIsItsValuesScale) {
  OverviewGrid grid;
  grid.metric = kGradNorm;
  grid.values = {1e-3f, 10.0f};
  const OverviewScale s = overview_scale(grid);
  EXPECT_EQ(s.lo, -3);
  EXPECT_EQ(s.hi, 1);
}

}  // namespace
}  // namespace tensorscope::recording
