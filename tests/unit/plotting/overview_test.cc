// overview_test.cc — the overview frame as a person sees it: the non-finite cell in its
// colour where its row and column are, framed and named; blocks merged by max for
// display without losing a NaN. (The scale: recording/overview_scale_test.cc.)
#include "tensorscope/plotting/overview.h"

#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

namespace tensorscope::plotting {
namespace {

using recording::first_nonfinite_cell;
using recording::fit_overview_grid;
using recording::OverviewGrid;
using recording::OverviewHistory;
using recording::OverviewMetricId;
using tensorscope::TensorSummary;

constexpr size_t kGradNorm = static_cast<size_t>(OverviewMetricId::kGradNorm);

// 24 layers over 300 steps; gradient norms from 1e-4 (first layer) to 1 (last), layer 17
// goes NaN at step 200.
OverviewHistory history(int layers = 24, int steps = 300) {
  OverviewHistory h(200, 1024);
  for (int step = 0; step < steps; ++step) {
    std::vector<TensorSummary> s;
    for (int l = layers - 1; l >= 0; --l) {
      TensorSummary t;
      t.name = "model.layers." + std::to_string(l) + ".mlp.grad";
      t.kind = wire::TensorKind::kGradient;
      t.numel = 4096;
      t.l2 = std::pow(10.0, -4 + 4.0 * l / (layers - 1)) * (1 + 0.2 * std::sin(step * 0.1));
      if (l == 17 && step >= 200) t.nan_count = 10;
      s.push_back(t);
    }
    h.observe(step, s);
  }
  return h;
}

int count_color(const cv::Mat& image, const cv::Vec3b& color, cv::Rect* box) {
  int n = 0, x0 = image.cols, y0 = image.rows, x1 = -1, y1 = -1;
  for (int y = 0; y < image.rows; ++y) {
    for (int x = 0; x < image.cols; ++x) {
      if (image.at<cv::Vec3b>(y, x) != color) continue;
      ++n;
      x0 = std::min(x0, x), y0 = std::min(y0, y), x1 = std::max(x1, x), y1 = std::max(y1, y);
    }
  }
  *box = n > 0 ? cv::Rect(x0, y0, x1 - x0 + 1, y1 - y0 + 1) : cv::Rect();
  return n;
}

TEST(OverviewFrameTest, TheNonFiniteCellsAreWhereTheirRowAndStepsAre) {
  const OverviewGrid g = history().window(kGradNorm);
  size_t row = 0, col = 0;
  ASSERT_TRUE(first_nonfinite_cell(g, &row, &col));
  EXPECT_EQ(g.rows[row], "model.layers.17.mlp.grad");
  EXPECT_EQ(g.first_steps[col], 200);

  FrameStyle style;
  const cv::Mat frame = draw_overview_frame(g, "rank 0 | pid 1", "last 200 summarised steps", style);
  ASSERT_EQ(frame.cols, style.width);
  ASSERT_EQ(frame.rows, style.height);
  cv::imwrite((std::filesystem::temp_directory_path() / "overview_grad_norm.actual.png").string(), frame);
  cv::Rect nan_box;
  ASSERT_GT(count_color(frame, overview_nonfinite_color(), &nan_box), 0);
  // Its cells: the columns of steps 200..299 (the right half of the window 100..299) of
  // one row, 17/24 of the way down, one row high. The legend's swatch is left aside.
  cv::Mat plot_only = frame.clone();
  plot_only(cv::Rect(0, frame.rows - 50, frame.cols, 50)).setTo(cv::Scalar(0, 0, 0));
  ASSERT_GT(count_color(plot_only, overview_nonfinite_color(), &nan_box), 0);
  EXPECT_GT(nan_box.width, frame.cols / 5);
  EXPECT_LT(nan_box.height, frame.rows / 16);
  // Rows in forward order (the first layer at the top, though backward delivered it
  // last): the NaN row, 17 of 24, is below the middle of the frame.
  EXPECT_GT(nan_box.y, frame.rows / 2);
  // Colour everywhere else: the viridis cells, not one flat colour.
  cv::Mat small;
  cv::resize(frame(cv::Rect(frame.cols / 3, frame.rows / 4, frame.cols / 3, frame.rows / 8)), small, {8, 8}, 0, 0,
             cv::INTER_AREA);
  cv::Scalar mean, dev;
  cv::meanStdDev(small, mean, dev);
  EXPECT_GT(dev[0] + dev[1] + dev[2], 10);
}

TEST(OverviewFrameTest, WholeRunFitsAndKeepsTheNaN) {
  const OverviewHistory h = history(300, 3000);
  const OverviewGrid run = h.whole_run(kGradNorm);
  const OverviewGrid fitted = fit_overview_grid(run, 100, 64);
  EXPECT_LE(fitted.rows.size(), 100u);
  EXPECT_LE(fitted.columns(), 64u);
  size_t r = 0, c = 0;
  ASSERT_TRUE(first_nonfinite_cell(fitted, &r, &c));
  EXPECT_LE(fitted.first_steps[c], 200);
  EXPECT_GE(fitted.last_steps[c], 200);
  FrameStyle style;
  style.width = 1280;
  style.height = 1600;
  const cv::Mat png = draw_overview_frame(run, "rank 3 | pid 9", "whole run", style);
  cv::imwrite((std::filesystem::temp_directory_path() / "overview_whole_run.actual.png").string(), png);
  cv::Rect box;
  EXPECT_GT(count_color(png, overview_nonfinite_color(), &box), 0);
}

// An explosion reported at layer 2, step 150 of 4 layers without a NaN: its cell framed
// where its row and step are, and named in the footer.
TEST(OverviewFrameTest, AReportedAnomalyIsFramedAtItsCellAndNamed) {
  const OverviewGrid g = history(4, 300).window(kGradNorm);
  FrameStyle style;
  const cv::Mat plain = draw_overview_frame(g, "rank 0 | pid 1", "x", style);
  const OverviewMark mark{"explosion", "model.layers.2.mlp.grad", 150};
  const cv::Mat marked = draw_overview_frame(g, "rank 0 | pid 1", "x", style, {mark});
  cv::imwrite((std::filesystem::temp_directory_path() / "overview_marked.actual.png").string(), marked);
  cv::Mat diff;
  cv::absdiff(plain, marked, diff);
  cv::Mat changed;
  cv::cvtColor(diff, changed, cv::COLOR_BGR2GRAY);
  const int footer = marked.rows - marked.rows / 12;
  cv::Rect in_plot = cv::boundingRect(changed(cv::Rect(0, 0, marked.cols, footer)));
  ASSERT_GT(in_plot.area(), 0);
  // Rows top to bottom in forward order, layer 0 first: layer 2 is the third of four;
  // the window's steps 100-299: step 150 a quarter from the left.
  const double row_mid = in_plot.y + in_plot.height / 2.0;
  EXPECT_GT(row_mid, marked.rows * 0.35);
  EXPECT_LT(row_mid, marked.rows * 0.75);
  const double col_mid = in_plot.x + in_plot.width / 2.0;
  EXPECT_GT(col_mid, marked.cols * 0.2);
  EXPECT_LT(col_mid, marked.cols * 0.45);
  EXPECT_GT(cv::countNonZero(changed(cv::Rect(0, footer, marked.cols, marked.rows - footer))), 0) << "named";
  // A mark whose row the grid does not have is named, not framed.
  const cv::Mat elsewhere = draw_overview_frame(g, "rank 0 | pid 1", "x", style, {{"dead units", "other.relu", 150}});
  cv::absdiff(plain, elsewhere, diff);
  cv::cvtColor(diff, changed, cv::COLOR_BGR2GRAY);
  EXPECT_EQ(cv::countNonZero(changed(cv::Rect(0, 0, marked.cols, footer))), 0);
  EXPECT_GT(cv::countNonZero(changed), 0);
}

TEST(OverviewFrameTest, EmptyAndTinyGridsDoNotCrash) {
  FrameStyle style;
  OverviewGrid empty;
  EXPECT_EQ(draw_overview_frame(empty, "", "", style).cols, style.width);
  style.width = 16;
  style.height = 16;
  EXPECT_EQ(draw_overview_frame(history(3, 5).window(kGradNorm), "rank 0", "x", style).rows, 16);
}

}  // namespace
}  // namespace tensorscope::plotting
