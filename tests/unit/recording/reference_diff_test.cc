// reference_diff_test.cc — a summary against the reference run's: tolerances by element
// type, the scales (a mean near 0 is not a large change), counts exactly, shapes.
#include "tensorscope/recording/reference_diff.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace tensorscope::recording {
namespace {

using wire::DType;

TensorSummary summary(double l2, double mean = 0.01, double std = 0.5, double max_abs = 2) {
  TensorSummary s;
  s.name = "net.3";
  s.numel = 10000;
  s.l2 = l2;
  s.mean = mean;
  s.std = std;
  s.max_abs = max_abs;
  return s;
}

TEST(ReferenceDiffTest, IdenticalSummariesAreWithinAnyTolerance) {
  const SummaryDiff d = diff_summaries(summary(50), summary(50), default_tolerance(DType::kInt32, DType::kInt32));
  EXPECT_TRUE(d.comparable);
  EXPECT_FALSE(d.leaves());
  EXPECT_EQ(d.worst, 0);
  EXPECT_EQ(d.relative, 0);
}

TEST(ReferenceDiffTest, Float32AllowsReductionNoiseNotAChangedLayer) {
  const DiffTolerance fp32 = default_tolerance(DType::kFloat32, DType::kFloat32);
  EXPECT_EQ(fp32, (DiffTolerance{1e-5, 0}));
  const SummaryDiff noise = diff_summaries(summary(50 * (1 + 1e-7)), summary(50), fp32);
  EXPECT_FALSE(noise.leaves());
  EXPECT_NEAR(noise.worst, 0.01, 1e-4);
  EXPECT_NEAR(noise.relative, 1e-7, 1e-9);
  const SummaryDiff changed = diff_summaries(summary(50 * 1.001), summary(50), fp32);
  EXPECT_TRUE(changed.leaves());
  EXPECT_EQ(changed.metric, "l2");
  EXPECT_DOUBLE_EQ(changed.value, 50 * 1.001);
  EXPECT_DOUBLE_EQ(changed.reference, 50);
  EXPECT_NEAR(changed.worst, 1e-3 / 1.001 / 1e-5, 1e-6);
  EXPECT_NEAR(changed.relative, 1e-3 / 1.001, 1e-9);
}

TEST(ReferenceDiffTest, LowPrecisionAgainstFloat32IsLooserAndTheLooserOfThePairWins) {
  EXPECT_EQ(default_tolerance(DType::kBFloat16, DType::kFloat32), (DiffTolerance{5e-2, 0}));
  EXPECT_EQ(default_tolerance(DType::kFloat32, DType::kBFloat16), (DiffTolerance{5e-2, 0}));
  EXPECT_EQ(default_tolerance(DType::kFloat16, DType::kFloat64), (DiffTolerance{1e-2, 0}));
  EXPECT_EQ(default_tolerance(DType::kFloat64, DType::kFloat64), (DiffTolerance{1e-9, 0}));
  EXPECT_EQ(default_tolerance(DType::kInvalid, DType::kFloat32), (DiffTolerance{1e-5, 0}));
  EXPECT_EQ(default_tolerance(DType::kInt64, DType::kBool), (DiffTolerance{0, 0}));
  const DiffTolerance bf16 = default_tolerance(DType::kBFloat16, DType::kFloat32);
  EXPECT_FALSE(diff_summaries(summary(50 * 1.01), summary(50), bf16).leaves());
  const SummaryDiff far = diff_summaries(summary(50 * 1.2), summary(50), bf16);
  EXPECT_TRUE(far.leaves());
  EXPECT_EQ(far.metric, "l2");
}

TEST(ReferenceDiffTest, AMeanNearZeroIsMeasuredAgainstTheTensorsMagnitude) {
  // rms = 50 / sqrt(10000) = 0.5: a mean that went from +1e-8 to -1e-8 moved 4e-8 of it.
  const SummaryDiff d =
      diff_summaries(summary(50, -1e-8), summary(50, 1e-8), default_tolerance(DType::kFloat32, DType::kFloat32));
  EXPECT_FALSE(d.leaves()) << d.metric << " " << d.worst;
  EXPECT_NEAR(d.relative, 2e-8 / 0.5, 1e-12);
}

TEST(ReferenceDiffTest, ANanCountThatDiffersLeavesAtOnceWhateverTheTolerance) {
  TensorSummary run = summary(49), reference = summary(50);
  run.nan_count = 3;
  const SummaryDiff d = diff_summaries(run, reference, DiffTolerance{1e9, 1e9});
  EXPECT_TRUE(d.leaves());
  EXPECT_EQ(d.metric, "nan_count");
  EXPECT_EQ(d.value, 3);
  EXPECT_EQ(d.reference, 0);
  EXPECT_TRUE(std::isinf(d.worst));
  EXPECT_TRUE(std::isinf(d.relative));
  reference.inf_count = 1;
  run = reference;
  run.inf_count = 2;
  EXPECT_EQ(diff_summaries(run, reference, DiffTolerance{1, 0}).metric, "inf_count");
}

TEST(ReferenceDiffTest, AnotherShapeIsNotComparable) {
  TensorSummary run = summary(50);
  run.numel = 20000;
  const SummaryDiff d = diff_summaries(run, summary(50), DiffTolerance{1, 1});
  EXPECT_FALSE(d.comparable);
  EXPECT_TRUE(d.leaves());
  EXPECT_EQ(d.metric, "numel");
  EXPECT_EQ(d.value, 20000);
  EXPECT_EQ(d.reference, 10000);
}

TEST(ReferenceDiffTest, ExactTypesAllowNoDifferenceAndZerosCountAsAFraction) {
  const SummaryDiff ints = diff_summaries(summary(50.5), summary(50), default_tolerance(DType::kInt64, DType::kInt64));
  EXPECT_TRUE(ints.leaves());
  EXPECT_TRUE(std::isinf(ints.worst));
  TensorSummary run = summary(50), reference = summary(50);
  run.zero_count = 1500;  // 0.15 of the elements against 0.10
  reference.zero_count = 1000;
  const SummaryDiff fp32 = diff_summaries(run, reference, default_tolerance(DType::kFloat32, DType::kFloat32));
  EXPECT_TRUE(fp32.leaves());
  EXPECT_EQ(fp32.metric, "zero_fraction");
  EXPECT_EQ(fp32.relative, 0);  // (not one of the values' metrics)
  run.zero_count = 1400;        // 0.04 apart: within bf16's 0.05
  EXPECT_FALSE(diff_summaries(run, reference, default_tolerance(DType::kBFloat16, DType::kFloat32)).leaves());
}

TEST(ReferenceDiffTest, ANanValueIsWithinNothing) {
  TensorSummary run = summary(50);
  run.std = std::numeric_limits<double>::quiet_NaN();
  const SummaryDiff d = diff_summaries(run, summary(50), DiffTolerance{1e9, 1e9});
  EXPECT_TRUE(d.leaves());
  EXPECT_EQ(d.metric, "std");
  EXPECT_TRUE(std::isinf(d.relative));
}

}  // namespace
}  // namespace tensorscope::recording
