// The scatter and PCA painters return frames of exactly the requested size for edge
// inputs (no points, one point, all equal, NaN/Inf, huge values, many points) and draw
// points where the data is. Set TENSORSCOPE_SCATTER_PNG_DIR to also write the frames
// as PNGs for a look.
#include "tensorscope/plotting/scatter_plot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>

namespace tensorscope::plotting {
namespace {

FrameInfo info_for(const std::string& name) {
  FrameInfo info;
  info.stream = "encoder.layers.3.mlp.out";
  info.device = "cuda0";
  info.label = name;
  info.kind = "output";
  info.step = 1200;
  info.shape = {16, 16536, 1000};
  return info;
}

void maybe_write(const std::string& name, const cv::Mat& image) {
  const char* dir = std::getenv("TENSORSCOPE_SCATTER_PNG_DIR");
  if (dir != nullptr) cv::imwrite(std::string(dir) + "/" + name + ".png", image);
}

Eigen::MatrixXf clusters(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  Eigen::MatrixXf p(n, 2);
  for (int i = 0; i < n; ++i) {
    const int c = i * 3 / n;
    p(i, 0) = normal(rng) * 0.6f + (c == 0 ? -4.f : c == 1 ? 0.f : 5.f);
    p(i, 1) = normal(rng) * (c == 1 ? 2.f : 0.5f) + (c == 2 ? 3.f : 0.f);
  }
  return p;
}

TEST(ScatterPlotTest, RightSizeForEdgeInputs) {
  const float nan = NAN, inf = INFINITY;
  std::vector<std::pair<std::string, Eigen::MatrixXf>> cases;
  cases.push_back({"empty", Eigen::MatrixXf(0, 2)});
  cases.push_back({"no_columns", Eigen::MatrixXf(5, 0)});
  cases.push_back({"one_column", Eigen::MatrixXf::Random(50, 1)});
  Eigen::MatrixXf one(1, 2);
  one << 3.f, -2.f;
  cases.push_back({"one_point", one});
  cases.push_back({"all_equal", Eigen::MatrixXf::Constant(100, 2, 7.f)});
  cases.push_back({"all_zero", Eigen::MatrixXf::Zero(10, 2)});
  Eigen::MatrixXf bad(4, 2);
  bad << nan, 1.f, inf, 2.f, 3.f, -inf, 1.f, 1.f;
  cases.push_back({"nan_inf", bad});
  cases.push_back({"all_nan", Eigen::MatrixXf::Constant(10, 2, nan)});
  Eigen::MatrixXf huge(3, 2);
  huge << 3e38f, -3e38f, -3e38f, 3e38f, 0.f, 1.f;
  cases.push_back({"huge", huge});
  cases.push_back({"clusters_200", clusters(200, 1)});
  cases.push_back({"clusters_200k", clusters(200000, 2)});
  for (auto [w, h] : {std::pair{640, 480}, std::pair{1280, 720}, std::pair{16, 16}, std::pair{100000, 3}}) {
    FrameStyle style;
    style.width = w;
    style.height = h;
    for (const auto& [name, points] : cases) {
      for (bool by_index : {true, false}) {
        ScatterLabels labels;
        labels.x_title = "x axis";
        labels.y_title = "y axis";
        labels.note = "note: " + name;
        labels.color_by_index = by_index;
        const cv::Mat image = draw_scatter_frame(info_for(name), nullptr, points, labels, style);
        EXPECT_EQ(image.type(), CV_8UC3);
        EXPECT_EQ(image.cols, std::clamp(w, kMinFrameSide, kMaxFrameSide)) << name;
        EXPECT_EQ(image.rows, std::clamp(h, kMinFrameSide, kMaxFrameSide)) << name;
        if (w == 640 || w == 1280) {
          maybe_write("scatter_" + name + "_" + std::to_string(w) + (by_index ? "" : "_plain"), image);
        }
      }
    }
  }
}

TEST(ScatterPlotTest, PointsAreDrawnWhereTheDataIs) {
  // Two points: bottom-left and top-right corners of the data range. The plot's left
  // and right halves both get coloured pixels.
  Eigen::MatrixXf p(2, 2);
  p << 0.f, 0.f, 1.f, 1.f;
  ScatterLabels labels;
  labels.color_by_index = false;
  FrameStyle style;
  style.bar = cv::Scalar(0, 0, 255);  // pure red points
  const cv::Mat image = draw_scatter_frame(info_for("two"), nullptr, p, labels, style);
  int left_bottom = 0, right_top = 0;
  for (int y = 0; y < image.rows; ++y) {
    for (int x = 0; x < image.cols; ++x) {
      const cv::Vec3b c = image.at<cv::Vec3b>(y, x);
      if (c[2] > 150 && c[0] < 100 && c[1] < 100) {
        if (x < image.cols / 2 && y > image.rows / 2) ++left_bottom;
        if (x > image.cols / 2 && y < image.rows / 2) ++right_top;
      }
    }
  }
  EXPECT_GT(left_bottom, 5);
  EXPECT_GT(right_top, 5);
}

TEST(ScatterPlotTest, PcaFrameForResultsAndMessages) {
  FrameStyle style;
  PcaResult failed;
  failed.message = "1 row: PCA needs at least 2 rows";
  const cv::Mat a = draw_pca_frame(info_for("failed"), nullptr, failed, style);
  EXPECT_EQ(a.size(), cv::Size(640, 480));
  maybe_write("pca_message", a);

  PcaResult r;
  r.projection = clusters(3000, 4);
  r.explained_variance_ratio = {0.432f, 0.12f};
  r.rows = 3000;
  r.features = 16536000;
  r.randomized = true;
  r.note = "12 NaN/Inf values replaced by column means";
  tensor::TensorStats stats;
  stats.count = 10;
  stats.finite_count = 10;
  stats.mean = 0.5;
  stats.std = 1;
  stats.min = -3;
  stats.max = 4;
  for (auto [w, h] : {std::pair{640, 480}, std::pair{1280, 720}}) {
    style.width = w;
    style.height = h;
    const cv::Mat b = draw_pca_frame(info_for("pca"), &stats, r, style);
    EXPECT_EQ(b.size(), cv::Size(w, h));
    maybe_write("pca_" + std::to_string(w), b);
  }
  // One component only: plotted against 0.
  PcaResult one;
  one.projection = Eigen::MatrixXf::Random(20, 1);
  one.explained_variance_ratio = {1.0f};
  one.rows = 20;
  one.features = 1;
  style.width = 640;
  style.height = 480;
  EXPECT_EQ(draw_pca_frame(info_for("one"), nullptr, one, style).size(), cv::Size(640, 480));
}

}  // namespace
}  // namespace tensorscope::plotting
