// StatsHistory: bounded size, merged points keep min of mins / max of maxes and the
// NaN/Inf counts, the step range stays covered.
#include "tensorscope/plotting/stats_history.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tensorscope::plotting {
namespace {

tensor::TensorStats stats_of(double mean, double std, double min, double max, uint64_t nan = 0) {
  tensor::TensorStats s;
  s.count = s.finite_count = 10;
  s.mean = mean;
  s.std = std;
  s.min = min;
  s.max = max;
  s.nan_count = nan;
  return s;
}

TEST(StatsHistory, StaysBoundedAndKeepsExtremes) {
  StatsHistory h(64);
  uint64_t nans = 0;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t nan = i % 97 == 0 ? 2 : 0;
    nans += nan;
    h.add(i, stats_of(i, 1, i == 13 ? -1e9 : -i, i == 500 ? 1e9 : i, nan));
    ASSERT_LE(h.size(), 64u);
  }
  EXPECT_EQ(h.added(), 1000u);
  double lo = INFINITY, hi = -INFINITY;
  uint64_t seen_nans = 0, merged = 0;
  int64_t expect_first = 0;
  for (const StatsPoint& p : h.points()) {
    lo = std::min(lo, p.min);
    hi = std::max(hi, p.max);
    seen_nans += p.nan_count;
    merged += p.merged;
    EXPECT_EQ(p.first_step, expect_first);
    expect_first = p.last_step + 1;
  }
  EXPECT_EQ(lo, -1e9);
  EXPECT_EQ(hi, 1e9);
  EXPECT_EQ(seen_nans, nans);
  EXPECT_EQ(merged, 1000u);
  EXPECT_EQ(h.points().back().last_step, 999);
}

TEST(StatsHistory, MergedMeanAndStdArePooled) {
  StatsHistory h(8);
  for (int i = 0; i < 9; ++i) h.add(i, stats_of(i % 2 == 0 ? 0 : 2, 1, -5, 5));
  const StatsPoint& p = h.points().front();
  ASSERT_EQ(p.merged, 2u);
  EXPECT_DOUBLE_EQ(p.mean, 1);
  EXPECT_DOUBLE_EQ(p.std, std::sqrt(2.0));  // within 1 + between 1
}

TEST(StatsHistory, AllNaNStepsHaveNoMean) {
  StatsHistory h;
  tensor::TensorStats s;
  s.count = s.nan_count = 4;
  s.mean = s.std = s.min = s.max = NAN;
  h.add(3, s);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_TRUE(std::isnan(h.points()[0].mean));
  EXPECT_EQ(h.points()[0].nan_count, 4u);
}

}  // namespace
}  // namespace tensorscope::plotting
