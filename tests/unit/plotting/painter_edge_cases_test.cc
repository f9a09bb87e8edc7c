// Every painter (line, heatmap, force2d, stats, histogram) on hostile inputs: empty,
// one element, all equal, all NaN, +-Inf, integer and bool dtypes, 1e38 magnitudes.
// Each must return a CV_8UC3 frame of the requested size that is not blank.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "tensorscope/plotting/frame_painter.h"
#include "tensorscope/plotting/heatmap.h"
#include "tensorscope/plotting/histogram.h"
#include "tensorscope/plotting/line_plot.h"
#include "tensorscope/plotting/stats_history.h"

namespace tensorscope::plotting {
namespace {

struct Case {
  std::string name;
  tensor::ElementType type;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
};

template <typename T>
Case make(const std::string& name, tensor::ElementType type, std::vector<int64_t> shape, const std::vector<T>& values) {
  Case c{name, type, std::move(shape), {}};
  c.bytes.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(c.bytes.data(), values.data(), c.bytes.size());
  return c;
}

std::vector<Case> cases() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> mixed_inf = {1, inf, -inf, 2, inf, 0};
  std::vector<float> huge(64);
  for (size_t i = 0; i < huge.size(); ++i) huge[i] = (i % 2 ? -3e38f : 3e38f) * (i % 5 + 1) / 5;
  std::vector<double> huge64 = {1.7e308, -1.7e308, 1e-300, 0};
  std::vector<int32_t> ints(50);
  for (size_t i = 0; i < ints.size(); ++i) ints[i] = static_cast<int32_t>(i * i) - 300;
  std::vector<uint8_t> bools = {1, 0, 0, 1, 1, 1, 0};
  return {
      make<float>("empty", tensor::ElementType::kFloat32, {0}, {}),
      make<float>("empty2d", tensor::ElementType::kFloat32, {3, 0}, {}),
      make<float>("one", tensor::ElementType::kFloat32, {1}, {3.5f}),
      make<float>("scalar", tensor::ElementType::kFloat32, {}, {-2}),
      make<float>("all_equal", tensor::ElementType::kFloat32, {4, 4}, std::vector<float>(16, 7)),
      make<float>("all_zero", tensor::ElementType::kFloat32, {100}, std::vector<float>(100, 0)),
      make<float>("all_nan", tensor::ElementType::kFloat32, {3, 3}, std::vector<float>(9, nan)),
      make<float>("inf", tensor::ElementType::kFloat32, {6}, mixed_inf),
      make<float>("only_inf", tensor::ElementType::kFloat32, {2}, {inf, -inf}),
      make<float>("huge", tensor::ElementType::kFloat32, {8, 8}, huge),
      make<double>("huge64", tensor::ElementType::kFloat64, {4}, huge64),
      make<int32_t>("int32", tensor::ElementType::kInt32, {5, 10}, ints),
      make<uint8_t>("bool", tensor::ElementType::kBool, {7}, bools),
      make<int64_t>("int64_extremes", tensor::ElementType::kInt64, {2},
                    {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}),
  };
}

void expect_frame(const cv::Mat& frame, const FrameStyle& style, const std::string& what) {
  ASSERT_EQ(frame.type(), CV_8UC3) << what;
  EXPECT_EQ(frame.cols, style.width) << what;
  EXPECT_EQ(frame.rows, style.height) << what;
  cv::Scalar mean, sd;
  cv::meanStdDev(frame, mean, sd);
  EXPECT_GT(sd[0] + sd[1] + sd[2], 1.0) << what << ": blank frame";
}

TEST(PainterEdgeCases, EveryPainterDrawsEveryCase) {
  for (auto [w, h] : {std::pair{640, 480}, {1280, 720}, {64, 48}}) {
    FrameStyle style;
    style.width = w;
    style.height = h;
    for (const Case& c : cases()) {
      const tensor::TensorView view{c.bytes.empty() ? nullptr : c.bytes.data(), c.type, c.shape};
      FrameInfo info;
      info.stream = c.name;
      info.shape = c.shape;
      info.type = c.type;
      const tensor::TensorStats stats = tensor::compute_stats(view);
      const std::string tag = c.name + " @" + std::to_string(w);
      expect_frame(draw_line_frame(info, stats, reduce_line(view, w), style), style, "line " + tag);
      expect_frame(draw_heatmap_frame(info, stats, reduce_heatmap(view, 128, 128), style), style, "heatmap " + tag);
      expect_frame(draw_heatmap_frame(info, stats, reduce_heatmap(view, 2, 2, HeatmapReduction::kMaxAbs), style), style,
                   "heatmap maxabs " + tag);
      expect_frame(draw_heatmap_frame(info, stats, force2d(view, 128), style), style, "force2d " + tag);
      StatsHistory history;
      for (int step = 0; step < 3; ++step) history.add(step, stats);
      expect_frame(draw_stats_frame(info, stats, history, style), style, "stats " + tag);
      expect_frame(draw_stats_frame(info, stats, StatsHistory(), style), style, "stats empty " + tag);
      tensor::TensorStats s2;
      Histogram hist;
      summarize(view, nullptr, 64, 0.05, &s2, &hist);
      expect_frame(draw_histogram_frame(info, s2, hist, {}, style), style, "histogram " + tag);
    }
  }
}

TEST(PainterEdgeCases, InvalidViewsAreEmpty) {
  const float x = 1;
  const tensor::TensorView negative{&x, tensor::ElementType::kFloat32, {-1, 4}};
  const tensor::TensorView null_data{nullptr, tensor::ElementType::kFloat32, {4}};
  const tensor::TensorView bad_type{&x, static_cast<tensor::ElementType>(99), {1}};
  for (const tensor::TensorView& v : {negative, null_data, bad_type}) {
    EXPECT_EQ(reduce_line(v, 100).numel, 0);
    EXPECT_EQ(reduce_heatmap(v, 10, 10).out_rows, 0);
    EXPECT_EQ(force2d(v, 10).out_rows, 0);
  }
}

}  // namespace
}  // namespace tensorscope::plotting
