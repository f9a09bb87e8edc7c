// Tests of ValueSketch: quantiles against the sorted values at every scale, exact
// extremes and zeros, the non-zero magnitude quantiles, and empty input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "tensorscope/plotting/value_sketch.h"

namespace tensorscope::plotting {
namespace {

double exact_quantile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(std::lround(p * static_cast<double>(v.size() - 1)))];
}

ValueSketch sketch_of(const std::vector<double>& v) {
  ValueSketch s;
  s.add_block(v.data(), v.size());
  return s;
}

TEST(ValueSketch, QuantilesWithinABucketAtEveryScale) {
  std::mt19937 rng(7);
  std::normal_distribution<double> normal;
  for (double scale : {1e-30, 1e-4, 1.0, 3e5, 1e30}) {
    std::vector<double> v(20000);
    for (double& x : v) x = scale * normal(rng);
    const ValueSketch s = sketch_of(v);
    for (double p : {0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99}) {
      const double want = exact_quantile(v, p);
      const double got = s.quantile(p);
      // A bucket spans 1/8 of its values' magnitude; neighbouring ranks differ too.
      EXPECT_NEAR(got, want, std::abs(want) * 0.07 + scale * 0.01) << "scale " << scale << " p " << p;
    }
    EXPECT_EQ(s.quantile(0), *std::min_element(v.begin(), v.end()));
    EXPECT_EQ(s.quantile(1), *std::max_element(v.begin(), v.end()));
    EXPECT_EQ(s.count(), v.size());
  }
}

TEST(ValueSketch, HeavyTailsDoNotMoveTheBody) {
  std::vector<double> v(10000, 0.0);
  for (size_t i = 0; i < v.size(); ++i) v[i] = (static_cast<double>(i) / 10000.0 - 0.5) * 1e-3;
  v[0] = -1e30;
  v[1] = 1e30;
  const ValueSketch s = sketch_of(v);
  EXPECT_NEAR(s.quantile(0.01), -0.00049, 0.00005);
  EXPECT_NEAR(s.quantile(0.99), 0.00049, 0.00005);
  EXPECT_EQ(s.min(), -1e30);
  EXPECT_EQ(s.max(), 1e30);
}

TEST(ValueSketch, ZerosAndMagnitudes) {
  std::vector<double> v;
  for (int i = 0; i < 500; ++i) v.push_back(0.0);
  for (int i = 0; i < 500; ++i) v.push_back(-0.0);
  for (int i = 1; i <= 1000; ++i) v.push_back((i % 2 ? 1 : -1) * 0.001 * i);
  const ValueSketch s = sketch_of(v);
  EXPECT_EQ(s.zeros(), 1000u);
  // |x| of the non-zero values is 0.001 .. 1.0, uniform.
  EXPECT_NEAR(s.nonzero_abs_quantile(0.05), 0.05, 0.05 * 0.07 + 0.001);
  EXPECT_NEAR(s.nonzero_abs_quantile(0.5), 0.5, 0.5 * 0.07);
  EXPECT_NEAR(s.nonzero_abs_quantile(1.0), 1.0, 1e-6);
  EXPECT_NEAR(s.quantile(0.5), 0.0, 1e-30);
}

TEST(ValueSketch, EmptyAndAllZero) {
  const ValueSketch empty;
  EXPECT_TRUE(std::isnan(empty.quantile(0.5)));
  EXPECT_TRUE(std::isnan(empty.nonzero_abs_quantile(0.5)));
  const ValueSketch zeros = sketch_of(std::vector<double>(100, 0.0));
  EXPECT_EQ(zeros.quantile(0.3), 0.0);
  EXPECT_TRUE(std::isnan(zeros.nonzero_abs_quantile(0.5)));
}

TEST(ValueSketch, ExtremeDoublesStayInBounds) {
  const std::vector<double> v = {-1.7e308, -5e-324, 0.0, 5e-324, 1.7e308, 1e-300, -1e300};
  const ValueSketch s = sketch_of(v);
  for (double p = 0; p <= 1.0; p += 0.05) {
    const double q = s.quantile(p);
    EXPECT_GE(q, -1.7e308);
    EXPECT_LE(q, 1.7e308);
  }
  EXPECT_TRUE(std::isfinite(s.nonzero_abs_quantile(0.5)));
}

}  // namespace
}  // namespace tensorscope::plotting
