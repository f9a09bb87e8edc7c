// summarize_cpu with a parameter's PreviousValues (client/core/tensor_summary.h): no ratio
// the first time, then the ratio update_ratio_cpu gives against the values kept, the new
// values kept for the next step; a change of shape or dtype starts over; a strided
// parameter is kept in C order; the summary itself is the one without previous values.
#include "tensor_summary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tensor_refs.h"

namespace tensorscope {
namespace {

using testing::make_ref;
using testing::ref_of;

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = scale * (static_cast<float>(i % 97) - 48.0f);
  return x;
}

TEST(TensorSummary, APreviousValuesGivesTheRatioFromTheSecondStepOn) {
  // More than one block of the ratio's pass (4,096 elements), not a multiple of it.
  const size_t n = 10000;
  const std::vector<float> w0 = ramp(n, 1.0f), w1 = ramp(n, 1.01f), w2 = ramp(n, 0.5f);
  PreviousValues previous;
  TensorSummary s;
  std::string why;
  ASSERT_TRUE(summarize_cpu(ref_of(w0, wire::DType::kFloat32), CastFormat::kNone, &previous, &s, &why)) << why;
  EXPECT_FALSE(s.has_update_ratio);
  ASSERT_EQ(previous.bytes.size(), n * sizeof(float));
  EXPECT_EQ(std::memcmp(previous.bytes.data(), w0.data(), previous.bytes.size()), 0);

  const struct {
    const std::vector<float>& now;
    const std::vector<float>& before;
  } steps[] = {{w1, w0}, {w2, w1}};
  for (const auto& step : steps) {
    ASSERT_TRUE(summarize_cpu(ref_of(step.now, wire::DType::kFloat32), CastFormat::kNone, &previous, &s, &why)) << why;
    double expected = 0;
    ASSERT_TRUE(update_ratio_cpu(ref_of(step.now, wire::DType::kFloat32), ref_of(step.before, wire::DType::kFloat32),
                                 &expected, &why))
        << why;
    ASSERT_TRUE(s.has_update_ratio);
    EXPECT_DOUBLE_EQ(s.update_ratio, expected);
    EXPECT_GT(s.update_ratio, 0.0);
    EXPECT_EQ(std::memcmp(previous.bytes.data(), step.now.data(), previous.bytes.size()), 0);
    // The summary is the one summarize_cpu gives alone.
    TensorSummary alone;
    ASSERT_TRUE(summarize_cpu(ref_of(step.now, wire::DType::kFloat32), CastFormat::kNone, &alone, &why)) << why;
    EXPECT_EQ(s.numel, alone.numel);
    EXPECT_EQ(s.zero_count, alone.zero_count);
    EXPECT_EQ(s.l2, alone.l2);
    EXPECT_EQ(s.mean, alone.mean);
    EXPECT_EQ(s.std, alone.std);
    EXPECT_FALSE(alone.has_update_ratio);
  }
  // Unchanged: 0.
  ASSERT_TRUE(summarize_cpu(ref_of(w2, wire::DType::kFloat32), CastFormat::kNone, &previous, &s, &why)) << why;
  ASSERT_TRUE(s.has_update_ratio);
  EXPECT_EQ(s.update_ratio, 0.0);
}

TEST(TensorSummary, AChangeOfShapeOrDtypeStartsOver) {
  const std::vector<float> w = ramp(12, 1.0f);
  const std::vector<double> d(12, 2.0);
  PreviousValues previous;
  TensorSummary s;
  std::string why;
  ASSERT_TRUE(summarize_cpu(ref_of(w, wire::DType::kFloat32), CastFormat::kNone, &previous, &s, &why)) << why;
  // Another shape of the same elements.
  ASSERT_TRUE(
      summarize_cpu(make_ref(w.data(), wire::DType::kFloat32, {3, 4}, {4, 1}), CastFormat::kNone, &previous, &s, &why))
      << why;
  EXPECT_FALSE(s.has_update_ratio);
  EXPECT_EQ(previous.shape, (std::vector<int64_t>{3, 4}));
  // Another dtype.
  ASSERT_TRUE(
      summarize_cpu(make_ref(d.data(), wire::DType::kFloat64, {3, 4}, {4, 1}), CastFormat::kNone, &previous, &s, &why))
      << why;
  EXPECT_FALSE(s.has_update_ratio);
  EXPECT_EQ(previous.dtype, wire::DType::kFloat64);
  EXPECT_EQ(previous.bytes.size(), d.size() * sizeof(double));
  // And then a ratio again: one value changed by 1, 1 / |before| = 1 / sqrt(12 * 2^2).
  std::vector<double> e = d;
  e[5] = 3.0;
  ASSERT_TRUE(
      summarize_cpu(make_ref(e.data(), wire::DType::kFloat64, {3, 4}, {4, 1}), CastFormat::kNone, &previous, &s, &why))
      << why;
  ASSERT_TRUE(s.has_update_ratio);
  EXPECT_DOUBLE_EQ(s.update_ratio, 1.0 / std::sqrt(12 * 4.0));
}

TEST(TensorSummary, AStridedParameterIsKeptInCOrder) {
  // A 3x4 transposed view of a 4x3 buffer: element (i, j) at j * 3 + i.
  std::vector<float> buffer(12);
  for (size_t k = 0; k < buffer.size(); ++k) buffer[k] = static_cast<float>(k + 1);
  const TensorRef transposed = make_ref(buffer.data(), wire::DType::kFloat32, {3, 4}, {1, 3});
  PreviousValues previous;
  TensorSummary s;
  std::string why;
  ASSERT_TRUE(summarize_cpu(transposed, CastFormat::kNone, &previous, &s, &why)) << why;
  ASSERT_EQ(previous.bytes.size(), 12 * sizeof(float));
  std::vector<float> kept(12);
  std::memcpy(kept.data(), previous.bytes.data(), previous.bytes.size());
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) EXPECT_EQ(kept[i * 4 + j], buffer[j * 3 + i]) << i << "," << j;
  }
  // The same values through the same view: no change.
  ASSERT_TRUE(summarize_cpu(transposed, CastFormat::kNone, &previous, &s, &why)) << why;
  ASSERT_TRUE(s.has_update_ratio);
  EXPECT_EQ(s.update_ratio, 0.0);
}

TEST(TensorSummary, AnUnreadableTensorLeavesThePreviousValuesAsTheyWere) {
  const std::vector<float> w = ramp(8, 1.0f);
  PreviousValues previous;
  TensorSummary s;
  std::string why;
  ASSERT_TRUE(summarize_cpu(ref_of(w, wire::DType::kFloat32), CastFormat::kNone, &previous, &s, &why)) << why;
  TensorRef cuda = ref_of(w, wire::DType::kFloat32);
  cuda.device = DeviceType::kCuda;
  EXPECT_FALSE(summarize_cpu(cuda, CastFormat::kNone, &previous, &s, &why));
  EXPECT_FALSE(why.empty());
  EXPECT_EQ(std::memcmp(previous.bytes.data(), w.data(), previous.bytes.size()), 0);
}

}  // namespace
}  // namespace tensorscope

namespace tensorscope {
namespace {

// A tensor large enough to be summarized in ranges on the summary threads (where the
// process has more than one core): the whole tensor's summary and update ratio.
TEST(TensorSummary, ALargeTensorsSummaryAndRatioAreTheWholeTensors) {
  const size_t n = (size_t{3} << 20) + 123;
  std::vector<float> w0(n), w1(n);
  double squares = 0, sum = 0, diff = 0, base = 0;
  uint64_t zeros = 0;
  for (size_t i = 0; i < n; ++i) {
    w0[i] = i % 11 == 0 ? 0.0f : static_cast<float>(std::sin(0.001 * static_cast<double>(i))) + 0.25f;
    w1[i] = w0[i] * 1.01f + (i > n / 2 ? 0.001f : 0.0f);
    squares += static_cast<double>(w1[i]) * w1[i];
    sum += w1[i];
    zeros += w1[i] == 0.0f ? 1 : 0;
    const double d = static_cast<double>(w1[i]) - w0[i];
    diff += d * d;
    base += static_cast<double>(w0[i]) * w0[i];
  }
  PreviousValues previous;
  TensorSummary s;
  std::string why;
  ASSERT_TRUE(summarize_cpu(ref_of(w0, wire::DType::kFloat32), CastFormat::kNone, &previous, &s, &why)) << why;
  ASSERT_TRUE(summarize_cpu(ref_of(w1, wire::DType::kFloat32), CastFormat::kNone, &previous, &s, &why)) << why;
  EXPECT_EQ(s.numel, n);
  EXPECT_EQ(s.nan_count, 0u);
  EXPECT_EQ(s.zero_count, zeros);
  EXPECT_NEAR(s.l2, std::sqrt(squares), 1e-6 * std::sqrt(squares));
  EXPECT_NEAR(s.mean, sum / static_cast<double>(n), 1e-6);
  ASSERT_TRUE(s.has_update_ratio);
  EXPECT_NEAR(s.update_ratio, std::sqrt(diff / base),
              1e-10 * std::sqrt(diff / base));  // (sums of 3M, in another order)
  EXPECT_EQ(std::memcmp(previous.bytes.data(), w1.data(), n * sizeof(float)), 0) << "the new values kept";

  // A NaN near the end (in the last range): counted, left out of the sums.
  const size_t at = n - 5;
  squares -= static_cast<double>(w1[at]) * w1[at];
  w1[at] = std::nanf("");
  ASSERT_TRUE(summarize_cpu(ref_of(w1, wire::DType::kFloat32), CastFormat::kNone, &s, &why)) << why;
  EXPECT_EQ(s.nan_count, 1u);
  EXPECT_NEAR(s.l2, std::sqrt(squares), 1e-6 * std::sqrt(squares));
}

}  // namespace
}  // namespace tensorscope
