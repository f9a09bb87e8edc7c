// line_plot reduction: every value kept when short, exact min/max per column when long
// (a single spike always survives), NaN/Inf counted apart and flagged.
#include "tensorscope/plotting/line_plot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace tensorscope::plotting {
namespace {

TEST(LinePlot, ShortSeriesKeepsEveryValue) {
  std::vector<float> v = {1, -2, 3.5f, 0};
  const LineSeries s = reduce_line({v.data(), tensor::ElementType::kFloat32, {2, 2}}, 640);
  ASSERT_EQ(s.numel, 4);
  EXPECT_FALSE(s.reduced);
  ASSERT_EQ(s.first.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(s.first[i], static_cast<int64_t>(i));
    EXPECT_EQ(s.lo[i], v[i]);
    EXPECT_EQ(s.hi[i], v[i]);
  }
  EXPECT_EQ(s.finite_min, -2);
  EXPECT_EQ(s.finite_max, 3.5);
}

TEST(LinePlot, LongSeriesMatchesReferenceMinMaxPerColumn) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  const int64_t n = 100003;
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  v[4321] = 1000;  // spike
  v[99] = std::numeric_limits<float>::quiet_NaN();
  v[100] = std::numeric_limits<float>::infinity();
  v[50000] = -std::numeric_limits<float>::infinity();
  const int columns = 317;
  const LineSeries s = reduce_line({v.data(), tensor::ElementType::kFloat32, {n}}, columns);
  ASSERT_TRUE(s.reduced);
  ASSERT_EQ(s.first.size(), static_cast<size_t>(columns));
  EXPECT_EQ(s.nan_count, 1u);
  EXPECT_EQ(s.pos_inf_count, 1u);
  EXPECT_EQ(s.neg_inf_count, 1u);
  EXPECT_EQ(s.finite_max, 1000);
  int64_t covered = 0;
  for (int c = 0; c < columns; ++c) {
    const int64_t a = s.first[c], b = c + 1 < columns ? s.first[c + 1] : n;
    ASSERT_EQ(a, covered);
    covered = b;
    double lo = INFINITY, hi = -INFINITY;
    uint8_t flags = 0;
    for (int64_t i = a; i < b; ++i) {
      if (std::isnan(v[i]))
        flags |= kHasNaN;
      else if (std::isinf(v[i]))
        flags |= v[i] > 0 ? kHasPosInf : kHasNegInf;
      else {
        lo = std::min(lo, double(v[i]));
        hi = std::max(hi, double(v[i]));
      }
    }
    EXPECT_EQ(s.lo[c], lo) << c;
    EXPECT_EQ(s.hi[c], hi) << c;
    EXPECT_EQ(s.flags[c], flags) << c;
  }
  EXPECT_EQ(covered, n);
}

TEST(LinePlot, AllNaNAndEmptyAndIntegers) {
  std::vector<double> nan(10, std::numeric_limits<double>::quiet_NaN());
  LineSeries s = reduce_line({nan.data(), tensor::ElementType::kFloat64, {10}}, 4);
  EXPECT_EQ(s.nan_count, 10u);
  EXPECT_TRUE(std::isnan(s.finite_min));
  for (double x : s.lo) EXPECT_TRUE(std::isnan(x));

  s = reduce_line({nullptr, tensor::ElementType::kFloat32, {0}}, 100);
  EXPECT_EQ(s.numel, 0);
  EXPECT_TRUE(s.first.empty());

  std::vector<int64_t> ints = {-5, 7, INT64_MAX};
  s = reduce_line({ints.data(), tensor::ElementType::kInt64, {3}}, 0);  // columns clamped to 1
  ASSERT_EQ(s.first.size(), 1u);
  EXPECT_EQ(s.lo[0], -5);
  EXPECT_EQ(s.hi[0], static_cast<double>(INT64_MAX));
}

TEST(LinePlot, FrameHasRequestedSize) {
  std::vector<float> v(5000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(i * 0.01f);
  const tensor::TensorView view{v.data(), tensor::ElementType::kFloat32, {5000}};
  FrameInfo info;
  info.shape = view.shape;
  for (auto [w, h] : {std::pair{640, 480}, {1280, 720}, {16, 16}, {100000, -3}}) {
    FrameStyle style;
    style.width = w;
    style.height = h;
    const cv::Mat frame = draw_line_frame(info, tensor::compute_stats(view), reduce_line(view, 640), style);
    EXPECT_EQ(frame.cols, std::clamp(w, kMinFrameSide, kMaxFrameSide));
    EXPECT_EQ(frame.rows, std::clamp(h, kMinFrameSide, kMaxFrameSide));
    EXPECT_EQ(frame.type(), CV_8UC3);
  }
}

}  // namespace
}  // namespace tensorscope::plotting
