// heatmap reduction: exact block means / max |x| against a reference, every source row
// and column in exactly one cell, NaN/Inf excluded and counted, force2d padding.
#include "tensorscope/plotting/heatmap.h"

#include <gtest/gtest.h>

#include <opencv2/core.hpp>

#include "tensorscope/tensor/tensor_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace tensorscope::plotting {
namespace {

void expect_matches_reference(const std::vector<double>& m, int64_t rows, int64_t cols, const Heatmap& h) {
  for (int r = 0; r < h.out_rows; ++r) {
    for (int c = 0; c < h.out_cols; ++c) {
      double sum = 0, best = 0;
      int64_t count = 0;
      const int64_t r1 = r + 1 < h.out_rows ? h.row_start(r + 1) : rows;
      const int64_t c1 = c + 1 < h.out_cols ? h.col_start(c + 1) : cols;
      for (int64_t i = h.row_start(r); i < r1; ++i) {
        for (int64_t j = h.col_start(c); j < c1; ++j) {
          const double x = m[i * cols + j];
          if (!std::isfinite(x)) continue;
          sum += x;
          ++count;
          if (std::abs(x) > std::abs(best)) best = x;
        }
      }
      const double got = h.values[r * h.out_cols + c];
      if (count == 0) {
        EXPECT_TRUE(std::isnan(got));
      } else if (h.reduction == HeatmapReduction::kMean) {
        EXPECT_NEAR(got, sum / count, 1e-12) << r << "," << c;
      } else {
        EXPECT_EQ(std::abs(got), std::abs(best)) << r << "," << c;
      }
    }
  }
}

// Blocks of several columns, and a cell per column (the narrow matrices of most layers,
// reduced along rows or not at all).
TEST(Heatmap, BlockMeanAndMaxAbsMatchReference) {
  std::mt19937 rng(3);
  std::normal_distribution<double> normal;
  const int64_t rows = 103, cols = 251;
  std::vector<double> m(rows * cols);
  for (double& x : m) x = normal(rng);
  m[3] = std::numeric_limits<double>::quiet_NaN();  // row 0, column 3
  m[300] = std::numeric_limits<double>::infinity();
  m[cols * 7 + 250] = -std::numeric_limits<double>::infinity();  // the last column of row 7
  const tensor::TensorView view{m.data(), tensor::ElementType::kFloat64, {rows, cols}};
  for (const auto& [max_rows, max_cols] : {std::pair{10, 37}, std::pair{10, 400}, std::pair{200, 400}}) {
    for (auto red : {HeatmapReduction::kMean, HeatmapReduction::kMaxAbs}) {
      SCOPED_TRACE(std::to_string(max_rows) + "x" + std::to_string(max_cols));
      const Heatmap h = reduce_heatmap(view, max_rows, max_cols, red);
      EXPECT_EQ(h.rows, rows);
      EXPECT_EQ(h.cols, cols);
      EXPECT_EQ(h.out_rows, std::min<int64_t>(max_rows, rows));
      EXPECT_EQ(h.out_cols, std::min<int64_t>(max_cols, cols));
      EXPECT_EQ(h.nan_count, 1u);
      EXPECT_EQ(h.pos_inf_count, 1u);
      EXPECT_EQ(h.neg_inf_count, 1u);
      const size_t nan_cell = h.out_cols == cols ? 3 : 0;
      EXPECT_TRUE(h.flags[nan_cell] & kCellNaN);
      expect_matches_reference(m, rows, cols, h);
    }
  }
}

TEST(Heatmap, SmallMatrixIsExactAndShapesFold) {
  std::vector<float> m = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  Heatmap h = reduce_heatmap({m.data(), tensor::ElementType::kFloat32, {2, 3, 2}}, 100, 100);
  EXPECT_EQ(h.rows, 2);
  EXPECT_EQ(h.cols, 6);
  ASSERT_EQ(h.values.size(), 12u);
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(h.values[i], m[i]);
  EXPECT_EQ(h.value_min, 1);
  EXPECT_EQ(h.value_max, 12);
  h = reduce_heatmap({m.data(), tensor::ElementType::kFloat32, {12}}, 100, 4);  // 1-D: one row
  EXPECT_EQ(h.rows, 1);
  ASSERT_EQ(h.out_cols, 4);
  EXPECT_EQ(h.values[0], 2);  // mean of 1, 2, 3
  EXPECT_EQ(h.values[3], 11);
}

TEST(Heatmap, Force2dPadsWithZeros) {
  std::vector<int32_t> v(10, 5);
  const Heatmap h = force2d({v.data(), tensor::ElementType::kInt32, {2, 5}}, 64);
  EXPECT_TRUE(h.square);
  EXPECT_EQ(h.rows, 4);
  EXPECT_EQ(h.cols, 4);
  EXPECT_EQ(h.padded_zeros, 6);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(h.values[i], i < 10 ? 5 : 0) << i;
  // Reduced: 4x4 into 2x2 block means.
  const Heatmap r = force2d({v.data(), tensor::ElementType::kInt32, {10}}, 2);
  ASSERT_EQ(r.values.size(), 4u);
  EXPECT_EQ(r.values[0], 5);
  EXPECT_EQ(r.values[1], 5);
  EXPECT_EQ(r.values[2], 2.5);  // rows 2-3, cols 0-1: 5,5,0,0
  EXPECT_EQ(r.values[3], 0);
  for (int64_t n : {1, 2, 4, 5, 99, 100, 101}) {
    std::vector<uint8_t> b(static_cast<size_t>(n), 1);
    const Heatmap f = force2d({b.data(), tensor::ElementType::kBool, {n}}, 8);
    EXPECT_GE(f.rows * f.rows, n);
    EXPECT_LT((f.rows - 1) * (f.rows - 1), n);
    EXPECT_EQ(f.padded_zeros, f.rows * f.rows - n);
  }
}

TEST(Heatmap, EmptyAndAllNaN) {
  EXPECT_EQ(reduce_heatmap({nullptr, tensor::ElementType::kFloat32, {0, 5}}, 8, 8).out_rows, 0);
  EXPECT_EQ(force2d({nullptr, tensor::ElementType::kFloat32, {0}}, 8).out_rows, 0);
  std::vector<float> nan(9, std::numeric_limits<float>::quiet_NaN());
  const Heatmap h = reduce_heatmap({nan.data(), tensor::ElementType::kFloat32, {3, 3}}, 2, 2);
  EXPECT_EQ(h.nan_count, 9u);
  EXPECT_TRUE(std::isnan(h.value_min));
}

TEST(Heatmap, HugeFloat64MeansStayFinite) {
  std::vector<double> big(16, 1.7e308);
  const Heatmap h = reduce_heatmap({big.data(), tensor::ElementType::kFloat64, {4, 4}}, 1, 1);
  ASSERT_EQ(h.values.size(), 1u);
  EXPECT_TRUE(std::isfinite(h.values[0]));
}

// A few extreme cells do not wash out the rest: the colour limits come from the body,
// the extreme cells are counted beyond them and drawn in the end-cap colours.
TEST(Heatmap, ColorLimitsComeFromTheBodyAndOutliersAreMarked) {
  std::vector<float> m(100 * 100);
  for (size_t i = 0; i < m.size(); ++i) m[i] = std::sin(static_cast<float>(i) * 0.37f);
  m[123] = 1000.f;
  m[4567] = -800.f;
  m[8901] = 950.f;
  const tensor::TensorView view{m.data(), tensor::ElementType::kFloat32, {100, 100}};
  const Heatmap h = reduce_heatmap(view, 256, 256);
  EXPECT_EQ(h.value_max, 1000.0);
  EXPECT_LE(h.color_hi, 1.5);
  EXPECT_GE(h.color_lo, -1.5);
  EXPECT_EQ(h.cells_above, 2);
  EXPECT_EQ(h.cells_below, 1);
  FrameStyle style;
  const cv::Mat frame = draw_heatmap_frame(FrameInfo{}, tensor::compute_stats(view), h, style);
  cv::Mat white, black;
  cv::inRange(frame, cv::Scalar(255, 255, 255), cv::Scalar(255, 255, 255), white);
  cv::inRange(frame, cv::Scalar(0, 0, 0), cv::Scalar(0, 0, 0), black);
  EXPECT_GT(cv::countNonZero(white), 2 * 9);  // two cells of at least 3x3 px, and the cap
  EXPECT_GT(cv::countNonZero(black), 9);
  // The body spreads over the colormap: many distinct colours in the cells.
  std::set<int> colors;
  for (int r = 0; r < frame.rows; ++r) {
    for (int c = 0; c < frame.cols; ++c) {
      const cv::Vec3b p = frame.at<cv::Vec3b>(r, c);
      colors.insert(p[0] << 16 | p[1] << 8 | p[2]);
    }
  }
  EXPECT_GT(colors.size(), 150u);
}

TEST(Heatmap, WellBehavedMatricesKeepTheirFullRange) {
  std::vector<double> m(40 * 30);
  for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<double>(i % 97) - 40.0;
  const Heatmap h = reduce_heatmap(tensor::TensorView{m.data(), tensor::ElementType::kFloat64, {40, 30}}, 256, 256);
  EXPECT_EQ(h.color_lo, h.value_min);
  EXPECT_EQ(h.color_hi, h.value_max);
  EXPECT_EQ(h.cells_above + h.cells_below, 0);
}

// A module's calls stacked into one matrix ("<stream>#calls") label their rows as calls:
// the y axis's strip differs from a plain matrix's, and from nothing else's.
TEST(Heatmap, AStackedCallsMatrixLabelsItsRowsAsCalls) {
  std::vector<float> m(30 * 8);
  for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(std::sin(0.1 * static_cast<double>(i)));
  const tensor::TensorView view{m.data(), tensor::ElementType::kFloat32, {30, 8}};
  const Heatmap h = reduce_heatmap(view, 256, 256);
  const tensor::TensorStats stats = tensor::compute_stats(view);
  auto frame = [&](const std::string& stream) {
    FrameInfo info;
    info.stream = stream;
    info.shape = {30, 8};
    return draw_heatmap_frame(info, stats, h, FrameStyle{});
  };
  auto y_title_strip = [](const cv::Mat& image) {  // above and beside the y axis, below the header
    return image(cv::Rect(0, image.rows / 5, 60, image.rows / 3 - image.rows / 5)).clone();
  };
  const cv::Mat plain = y_title_strip(frame("rnn")), other = y_title_strip(frame("rnx"));
  const cv::Mat calls = y_title_strip(frame("rnn#calls"));
  EXPECT_EQ(cv::norm(plain, other, cv::NORM_L1), 0.0) << "the strip shows only the axis title";
  EXPECT_GT(cv::norm(plain, calls, cv::NORM_L1), 0.0) << "\"call\" instead of \"row\"";
}

}  // namespace
}  // namespace tensorscope::plotting
