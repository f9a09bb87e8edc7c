// summary_merge.h: a tensor summarized in parts is the tensor summarized whole — its
// counts exactly, its moments to rounding — whatever is in the parts: NaN and Inf, a
// part with no finite value, a mean that dwarfs the spread, values near the float64
// limit, the numerics; the update ratio of the whole from its parts'.
#include "tensorscope/shared/summary_merge.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace tensorscope {
namespace {

// The summary of x[from, to), in long double (the reference), with fp16-like numerics
// (underflow at most 1e-8, overflow from 65520).
TensorSummary reference(const std::vector<double>& x, size_t from, size_t to) {
  TensorSummary s;
  s.name = "w";
  s.cast_format = CastFormat::kFp16;
  long double sum = 0, squares = 0;
  uint64_t finite = 0;
  double smallest = 0;
  for (size_t i = from; i < to; ++i) {
    const double v = x[i];
    ++s.numel;
    if (std::isnan(v)) {
      ++s.nan_count;
      continue;
    }
    if (std::isinf(v)) {
      ++s.inf_count;
      continue;
    }
    ++finite;
    s.zero_count += v == 0 ? 1 : 0;
    sum += v;
    squares += static_cast<long double>(v) * v;
    s.max_abs = std::max(s.max_abs, std::fabs(v));
    if (v != 0 && (smallest == 0 || std::fabs(v) < smallest)) smallest = std::fabs(v);
    s.underflow_count += v != 0 && std::fabs(v) <= 1e-8 ? 1 : 0;
    s.overflow_count += std::fabs(v) >= 65520 ? 1 : 0;
  }
  s.min_abs_nonzero = smallest;
  if (finite > 0) {
    const long double mean = sum / finite;
    long double m2 = 0;
    for (size_t i = from; i < to; ++i) {
      if (std::isfinite(x[i])) m2 += (x[i] - mean) * (x[i] - mean);
    }
    s.mean = static_cast<double>(mean);
    s.std = static_cast<double>(std::sqrt(m2 / finite));
    s.l2 = static_cast<double>(std::sqrt(squares));
  }
  return s;
}

TensorSummary in_parts(const std::vector<double>& x, const std::vector<size_t>& cuts) {
  TensorSummary merged = reference(x, cuts[0], cuts[1]);
  for (size_t i = 1; i + 1 < cuts.size(); ++i) merged = merge_summaries(merged, reference(x, cuts[i], cuts[i + 1]));
  return merged;
}

void expect_same(const TensorSummary& whole, const TensorSummary& parts, double rel) {
  EXPECT_EQ(parts.numel, whole.numel);
  EXPECT_EQ(parts.nan_count, whole.nan_count);
  EXPECT_EQ(parts.inf_count, whole.inf_count);
  EXPECT_EQ(parts.zero_count, whole.zero_count);
  EXPECT_EQ(parts.underflow_count, whole.underflow_count);
  EXPECT_EQ(parts.overflow_count, whole.overflow_count);
  EXPECT_EQ(parts.max_abs, whole.max_abs);
  EXPECT_EQ(parts.min_abs_nonzero, whole.min_abs_nonzero);
  EXPECT_NEAR(parts.mean, whole.mean, rel * std::max(std::fabs(whole.mean), whole.std));
  EXPECT_NEAR(parts.std, whole.std, rel * whole.std);
  EXPECT_NEAR(parts.l2, whole.l2, rel * whole.l2);
  EXPECT_EQ(parts.name, "w");
  EXPECT_FALSE(parts.has_update_ratio);
}

TEST(SummaryMerge, MergedPartsAreTheWholeTensorsSummary) {
  std::mt19937 rng(8);
  std::normal_distribution<double> normal(0.5, 2.0);
  std::vector<double> x(30000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = i % 5 == 0 ? 0.0 : normal(rng) * (i < 10000 ? 1.0 : 100.0);
  x[17] = std::numeric_limits<double>::quiet_NaN();
  x[20001] = -std::numeric_limits<double>::infinity();
  for (size_t i = 12000; i < 12100; ++i) x[i] = std::numeric_limits<double>::quiet_NaN();  // a part of no finite value
  x[25000] = 1e-9;
  x[25001] = 70000.0;
  const TensorSummary whole = reference(x, 0, x.size());
  expect_same(whole, in_parts(x, {0, 12000, 12100, 20000, 30000}), 1e-12);
  expect_same(whole, in_parts(x, {0, 1, 29999, 30000}), 1e-12);
  EXPECT_EQ(whole.min_abs_nonzero, 1e-9);
  EXPECT_EQ(whole.overflow_count, 1u);
}

TEST(SummaryMerge, MergedPartsKeepALargeMeansSpreadAndHugeValues) {
  std::vector<double> offset(20000), huge(20000);
  for (size_t i = 0; i < offset.size(); ++i) {
    offset[i] = 1e6 + (i % 2 == 0 ? 1e-3 : -1e-3) * (i < 10000 ? 1.0 : 3.0);
    huge[i] = (i % 3 == 0 ? -1e300 : 1e300) * (i < 7000 ? 1.0 : 0.5);
  }
  for (const auto* x : {&offset, &huge}) {
    const TensorSummary parts = in_parts(*x, {0, 7000, 10000, 20000});
    const TensorSummary whole = reference(*x, 0, x->size());
    EXPECT_NEAR(parts.mean, whole.mean, 1e-9 * std::max(std::fabs(whole.mean), whole.std));
    EXPECT_NEAR(parts.std, whole.std, 1e-9 * whole.std);
    EXPECT_TRUE(std::isfinite(parts.l2) && std::isfinite(parts.std));
  }
}

TEST(SummaryMerge, NothingFiniteInEitherPartGivesZeroMoments) {
  const std::vector<double> x = {std::nan(""), std::numeric_limits<double>::infinity(), std::nan("")};
  const TensorSummary parts = in_parts(x, {0, 1, 3});
  EXPECT_EQ(parts.nan_count, 2u);
  EXPECT_EQ(parts.inf_count, 1u);
  EXPECT_EQ(parts.mean, 0.0);
  EXPECT_EQ(parts.std, 0.0);
  EXPECT_EQ(parts.l2, 0.0);
}

TEST(SummaryMerge, TheUpdateRatioOfTheWholeFromItsParts) {
  // Parts before {3, 4} and {0, 0} (norms 5 and 0); now {3, 4 + 1} and {0, 2}: the whole's
  // change is |(0, 1, 0, 2)| = sqrt(5), its norm before 5.
  const double ratio = merged_update_ratio({{1.0 / 5.0, 5.0, std::hypot(3.0, 5.0)}, {0.0, 0.0, 2.0}});
  EXPECT_NEAR(ratio, std::sqrt(5.0) / 5.0, 1e-15);
  EXPECT_EQ(merged_update_ratio({{0.0, 0.0, 0.0}, {0.0, 0.0, 0.0}}), 0.0);
  EXPECT_TRUE(std::isinf(merged_update_ratio({{0.0, 0.0, 1.0}})));
  EXPECT_TRUE(std::isnan(merged_update_ratio({{std::nan(""), 1.0, 1.0}, {0.1, 1.0, 1.0}})));
  EXPECT_EQ(merged_update_ratio({}), 0.0);
}

}  // namespace
}  // namespace tensorscope
