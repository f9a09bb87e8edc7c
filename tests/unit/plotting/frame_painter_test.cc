// Frames come back CV_8UC3 at exactly the requested size for every kind of input, and
// nothing is drawn into the outer margin (text is elided, not clipped).
#include "tensorscope/plotting/frame_painter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

namespace tensorscope::plotting {
namespace {

FrameInfo long_info() {
  FrameInfo info;
  info.stream = "model.encoder.layers.11.self_attention.output_projection.weight.grad.with.a.long.tail";
  info.device = "cuda0-with-an-unreasonably-long-device-name";
  info.label = std::string(300, 'L') + " epoch 3 \xc3\xa9t\xc3\xa9 \t tab";  // non-ASCII too
  info.kind = "output-of-a-kind-with-a-long-name";
  info.rank = 123456;
  info.step = 9223372036854775807LL;
  info.shape = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  info.type = tensor::ElementType::kBFloat16;
  return info;
}

// True when the outer `border` pixels on every side are background.
bool border_is_background(const cv::Mat& image, int border, const cv::Scalar& bg) {
  const cv::Vec3b b(static_cast<uchar>(bg[0]), static_cast<uchar>(bg[1]), static_cast<uchar>(bg[2]));
  for (int y = 0; y < image.rows; ++y) {
    for (int x = 0; x < image.cols; ++x) {
      const bool edge = y < border || y >= image.rows - border || x < border || x >= image.cols - border;
      if (edge && image.at<cv::Vec3b>(y, x) != b) return false;
    }
  }
  return true;
}

struct Case {
  std::string name;
  std::vector<float> values;
};

std::vector<Case> cases() {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> random(10000);
  for (float& x : random) x = normal(rng);
  random[3] = NAN;
  random[4] = INFINITY;
  return {{"empty", {}},
          {"one", {42.0f}},
          {"all_nan", std::vector<float>(50, NAN)},
          {"all_equal", std::vector<float>(50, -7.0f)},
          {"huge", {3e38f, -3e38f, 1.0f}},
          {"random", random}};
}

TEST(FramePainter, SizesAndInputs) {
  for (const auto& [width, height] : {std::pair{640, 480}, {1280, 720}, {320, 240}, {1920, 1080}}) {
    for (const Case& c : cases()) {
      SCOPED_TRACE(c.name + " " + std::to_string(width) + "x" + std::to_string(height));
      FrameStyle style;
      style.width = width;
      style.height = height;
      const tensor::TensorView view{
          c.values.data(), tensor::ElementType::kFloat32, {static_cast<int64_t>(c.values.size())}};
      tensor::TensorStats stats;
      Histogram hist;
      summarize(view, nullptr, 64, 0.05, &stats, &hist);
      FrameInfo info = long_info();
      info.shape = view.shape;
      const cv::Mat frame = draw_histogram_frame(info, stats, hist, {}, style);
      EXPECT_EQ(frame.type(), CV_8UC3);
      EXPECT_EQ(frame.cols, width);
      EXPECT_EQ(frame.rows, height);
      // The painters keep a margin of about 12 px per 480 px of height; tick labels
      // may use half of it.
      const int border = std::max(2, static_cast<int>(5 * std::min(width / 640.0, height / 480.0)));
      EXPECT_TRUE(border_is_background(frame, border, style.background));
      EXPECT_GT(cv::norm(frame, cv::Mat(frame.size(), CV_8UC3, style.background), cv::NORM_L1), 0)
          << "something is drawn";
    }
  }
}

TEST(FramePainter, FixedRangeWithEverythingOutside) {
  const std::vector<float> v = {10, 11, 12};
  const tensor::TensorView view{v.data(), tensor::ElementType::kFloat32, {3}};
  const HistogramRange fixed{-1, 1, 16};
  tensor::TensorStats stats;
  Histogram hist;
  summarize(view, &fixed, 0, 0, &stats, &hist);
  const cv::Mat frame = draw_histogram_frame(long_info(), stats, hist, {}, FrameStyle{});
  EXPECT_EQ(frame.size(), cv::Size(640, 480));
}

TEST(FramePainter, StepChangesTheFrame) {
  const std::vector<float> v = {1, 2, 3};
  const tensor::TensorView view{v.data(), tensor::ElementType::kFloat32, {3}};
  tensor::TensorStats stats;
  Histogram hist;
  summarize(view, nullptr, 8, 0.05, &stats, &hist);
  FrameInfo info;
  info.stream = "s";
  info.step = 1;
  const cv::Mat a = draw_histogram_frame(info, stats, hist, {}, FrameStyle{});
  info.step = 2;
  const cv::Mat b = draw_histogram_frame(info, stats, hist, {}, FrameStyle{});
  EXPECT_GT(cv::norm(a, b, cv::NORM_L1), 0);
}

// A log count axis lifts small bins next to two huge ones: more bar pixels than linear.
TEST(FramePainter, LogCountScaleShowsSmallBins) {
  std::vector<float> v(100000, 0.f);
  for (size_t i = 50000; i < v.size(); ++i) v[i] = 2.f;
  for (int i = 0; i < 50; ++i) v[static_cast<size_t>(i)] = 0.5f + 0.02f * static_cast<float>(i);
  const tensor::TensorView view{v.data(), tensor::ElementType::kFloat32, {static_cast<int64_t>(v.size())}};
  tensor::TensorStats stats;
  Histogram hist;
  summarize(view, nullptr, 32, 0.05, &stats, &hist);
  FrameInfo info;
  info.stream = "skewed";
  const FrameStyle linear;
  HistogramDisplay log;
  log.log_counts = true;
  const cv::Mat a = draw_histogram_frame(info, stats, hist, {}, linear);
  const cv::Mat b = draw_histogram_frame(info, stats, hist, log, linear);
  ASSERT_EQ(b.size(), cv::Size(640, 480));
  auto bar_pixels = [&](const cv::Mat& m) {
    cv::Mat mask;
    cv::inRange(m, linear.bar - cv::Scalar(2, 2, 2), linear.bar + cv::Scalar(2, 2, 2), mask);
    return cv::countNonZero(mask);
  };
  EXPECT_GT(bar_pixels(b), bar_pixels(a) + 500);
}

TEST(FramePainter, InconsistentHistogramDoesNotCrash) {
  Histogram hist;  // counts missing, absurd range
  hist.range = HistogramRange{5, -5, 0};
  tensor::TensorStats stats;
  const cv::Mat frame = draw_histogram_frame(FrameInfo{}, stats, hist, {}, FrameStyle{});
  EXPECT_EQ(frame.size(), cv::Size(640, 480));
  hist.range = HistogramRange{0, 1, 3};
  hist.counts = {UINT64_MAX, 0, 1};
  EXPECT_EQ(draw_histogram_frame(FrameInfo{}, stats, hist, {}, FrameStyle{}).size(), cv::Size(640, 480));
}

TEST(FramePainter, ArbitraryStatsAndRangesDoNotCrash) {
  std::mt19937_64 rng(9);
  const double specials[] = {0.0, -0.0, 1.0, -1e308, 1e308, 5e-324, NAN, INFINITY, -INFINITY, 1e-300};
  auto any = [&]() {
    return rng() % 2 ? specials[rng() % std::size(specials)]
                     : std::ldexp(static_cast<double>(rng() % 2000) - 1000, static_cast<int>(rng() % 200) - 100);
  };
  for (int i = 0; i < 200; ++i) {
    tensor::TensorStats stats;
    stats.count = rng();
    stats.finite_count = rng() % 100;
    stats.nan_count = rng();
    stats.mean = any();
    stats.std = any();
    stats.min = any();
    stats.max = any();
    Histogram hist;
    hist.range = HistogramRange{any(), any(), static_cast<int>(rng() % 300) - 10};
    hist.counts.resize(rng() % 200);
    for (uint64_t& c : hist.counts) c = rng() % 4 == 0 ? rng() : rng() % 1000;
    hist.underflow = rng();
    FrameStyle style;
    style.width = 100 + static_cast<int>(rng() % 1300);
    style.height = 60 + static_cast<int>(rng() % 800);
    const cv::Mat frame = draw_histogram_frame(long_info(), stats, hist, {}, style);
    ASSERT_EQ(frame.size(), cv::Size(style.width, style.height));
  }
}

TEST(FramePainter, MessageFrame) {
  for (const auto& [width, height] : {std::pair{640, 480}, {1280, 720}}) {
    FrameStyle style;
    style.width = width;
    style.height = height;
    FrameInfo info = long_info();
    info.shape = {0, 128};
    for (const std::string& message : {std::string(), std::string("empty tensor (0 elements)"), std::string(2000, 'x'),
                                       std::string("many words ") + std::string(100, ' ') +
                                           "and more words to wrap around "
                                           "the frame several times over so that wrapping really happens here"}) {
      const cv::Mat frame = draw_message_frame(info, message, style);
      EXPECT_EQ(frame.type(), CV_8UC3);
      EXPECT_EQ(frame.size(), cv::Size(width, height));
      EXPECT_TRUE(border_is_background(frame, 4, style.background));
    }
  }
}

TEST(FramePainter, TinyAndAbsurdSizesAreClamped) {
  FrameStyle style;
  style.width = 16;
  style.height = 16;
  tensor::TensorStats stats;
  Histogram hist;
  const std::vector<float> v = {1, 2};
  summarize(tensor::TensorView{v.data(), tensor::ElementType::kFloat32, {2}}, nullptr, 4, 0, &stats, &hist);
  EXPECT_EQ(draw_histogram_frame(long_info(), stats, hist, {}, style).size(), cv::Size(16, 16));
  style.width = -5;
  style.height = 0;
  EXPECT_EQ(draw_histogram_frame(long_info(), stats, hist, {}, style).size(), cv::Size(kMinFrameSide, kMinFrameSide));
  EXPECT_EQ(draw_message_frame(long_info(), "x", style).size(), cv::Size(kMinFrameSide, kMinFrameSide));
}

TEST(FormatShape, Brackets) {
  EXPECT_EQ(format_shape({}), "[]");
  EXPECT_EQ(format_shape({3}), "[3]");
  EXPECT_EQ(format_shape({64, 128, 768}), "[64, 128, 768]");
}

int color_pixels(const cv::Mat& m, const cv::Scalar& color, const cv::Rect& roi) {
  cv::Mat mask;
  cv::inRange(m(roi), color - cv::Scalar(2, 2, 2), color + cv::Scalar(2, 2, 2), mask);
  return cv::countNonZero(mask);
}

// Half zeros: the zero bar is cut, so the other bars fill the plot (uncut, they would
// be under 7 % of its height: about 10,000 bar pixels in all).
TEST(FramePainter, ASpikeIsCutAndTheBodyKeepsItsHeight) {
  std::vector<float> v(65536);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (float& x : v) x = std::max(0.f, normal(rng));
  const tensor::TensorView view{v.data(), tensor::ElementType::kFloat32, {65536}};
  tensor::TensorStats stats;
  Histogram hist;
  summarize(view, nullptr, 64, 0.1, &stats, &hist);
  const FrameStyle style;
  const cv::Mat frame = draw_histogram_frame(FrameInfo{}, stats, hist, {}, style);
  EXPECT_GT(color_pixels(frame, style.bar, cv::Rect(0, 0, 640, 480)), 20000);
}

TEST(FramePainter, ARangeChangeIsWrittenAboveThePlot) {
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<float>(i));
  const tensor::TensorView view{v.data(), tensor::ElementType::kFloat32, {1000}};
  tensor::TensorStats stats;
  Histogram hist;
  summarize(view, nullptr, 32, 0.1, &stats, &hist);
  const FrameStyle style;
  HistogramDisplay noted;
  noted.range_note = "range changed at step 7 (values shrank; was -6 .. 6)";
  HistogramDisplay changed = noted;
  changed.range_changed = true;
  // Pixels in `roi` nearer the accent (orange) than anything else on the frame.
  auto orange = [&](const cv::Mat& m, const cv::Rect& roi) {
    int n = 0;
    for (int y = roi.y; y < roi.y + roi.height; ++y) {
      for (int x = roi.x; x < roi.x + roi.width; ++x) {
        const cv::Vec3b p = m.at<cv::Vec3b>(y, x);
        n += p[2] > p[1] + 30 && p[1] > p[0] + 30 ? 1 : 0;
      }
    }
    return n;
  };
  const cv::Mat plain = draw_histogram_frame(FrameInfo{}, stats, hist, {}, style);
  const cv::Mat note = draw_histogram_frame(FrameInfo{}, stats, hist, noted, style);
  const cv::Mat axes = draw_histogram_frame(FrameInfo{}, stats, hist, changed, style);
  const cv::Rect band(0, 105, 640, 40);  // just under the header
  EXPECT_GT(orange(note, band), orange(plain, band) + 300);
  const cv::Rect all(0, 0, 640, 480);
  EXPECT_GT(orange(axes, all), orange(note, all) + 500);  // the first frame: axes too
}

TEST(FramePainter, DegenerateTensorsAreNamed) {
  auto stats_of = [](std::vector<float> v) {
    return tensor::compute_stats(
        tensor::TensorView{v.data(), tensor::ElementType::kFloat32, {static_cast<int64_t>(v.size())}});
  };
  EXPECT_EQ(degenerate_description(stats_of({})), "empty tensor: nothing to plot");
  EXPECT_EQ(degenerate_description(stats_of(std::vector<float>(4096, 0.f))), "all 4096 values are 0");
  EXPECT_EQ(degenerate_description(stats_of(std::vector<float>(20, 1.5f))), "constant: all 20 values are 1.5");
  EXPECT_EQ(degenerate_description(stats_of({0.25f})), "single element: 0.25");
  EXPECT_EQ(degenerate_description(stats_of(std::vector<float>(8, NAN))), "all 8 values are NaN");
  EXPECT_EQ(degenerate_description(stats_of({NAN, INFINITY, -INFINITY, NAN})),
            "no finite values: 2 NaN, 1 +Inf, 1 -Inf");
  EXPECT_EQ(degenerate_description(stats_of({2.f, 2.f, NAN})),
            "constant: all 2 finite values are 2 (besides 1 NaN/Inf)");
  EXPECT_EQ(degenerate_description(stats_of({1.f, 2.f})), "");
}

TEST(FramePainter, SymlogAxesAreStated) {
  std::vector<float> v(4096);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::pow(10.f, static_cast<float>(i % 60) / 10.f - 3.f);
  const tensor::TensorView view{v.data(), tensor::ElementType::kFloat32, {4096}};
  tensor::TensorStats stats;
  Histogram linear_hist, symlog_hist;
  summarize(view, nullptr, 64, 0.1, &stats, &linear_hist);
  symlog_hist = compute_histogram(view, HistogramRange{0, 1000, 64, HistogramAxis::kSymlog, 0.001});
  EXPECT_EQ(symlog_hist.range.axis, HistogramAxis::kSymlog);
  EXPECT_EQ(symlog_hist.total(), 4096u);
  const FrameStyle style;
  const cv::Mat a = draw_histogram_frame(FrameInfo{}, stats, linear_hist, {}, style);
  const cv::Mat b = draw_histogram_frame(FrameInfo{}, stats, symlog_hist, {}, style);
  // "64 bins, symlog x" in the bottom-right corner: more text than "64 bins".
  const cv::Rect corner(400, 450, 240, 30);
  auto ink = [&](const cv::Mat& m) { return 640 * 480 / 16 - color_pixels(m, style.background, corner); };
  EXPECT_GT(ink(b), ink(a) + 100);
}

}  // namespace
}  // namespace tensorscope::plotting
