// The worker's renderers draw what plotting/ draws, with the config's settings: histogram
// streams through AdaptiveHistogram (bins, margin, re-range interval, per-stream axes),
// and in every mode but stats a tensor with nothing to plot gets the frame that says so;
// pca and tsne frames of labelled rows colour them by class and hand the live view their
// legend.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>

#include "tensorscope/plotting/adaptive_histogram.h"
#include "tensorscope/plotting/point_classes.h"
#include "worker/frame_renderer.h"

namespace tensorscope::daemon {
namespace {

// A float32 record over `values` (kept alive by the caller).
std::unique_ptr<RecordView> record(const char* name, const std::vector<float>& values, std::vector<int64_t> shape) {
  auto r = std::make_unique<RecordView>();
  std::snprintf(r->header.name, wire::kNameBytes, "%s", name);
  r->header.dtype = static_cast<uint8_t>(wire::DType::kFloat32);
  r->header.ndim = static_cast<uint8_t>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) r->header.shape[d] = shape[d];
  r->header.payload_bytes = values.size() * sizeof(float);
  r->payload = reinterpret_cast<const uint8_t*>(values.data());
  return r;
}

plotting::FrameInfo info_of(const char* name, std::vector<int64_t> shape, int64_t step) {
  plotting::FrameInfo info;
  info.stream = name;
  info.device = "cpu";
  info.step = step;
  info.shape = std::move(shape);
  return info;
}

bool same(const cv::Mat& a, const cv::Mat& b) {
  return a.size() == b.size() && a.type() == b.type() && cv::norm(a, b, cv::NORM_INF) == 0;
}

// Deterministic values with a spread: a sine wave of growing amplitude, scaled.
std::vector<float> wave(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * static_cast<float>(i)) * (1 + i % 7);
  return v;
}

TEST(FrameRenderer, HistogramFramesFollowTheConfiguredAdaptiveHistogram) {
  RenderConfig config;
  config.histogram_bins = 40;
  config.histogram_margin = 0.05;
  config.histogram_rerange_frames = 3;
  config.histogram_axis_streams = {{"\\.w$", ValueAxis::kSymlog}};
  for (const char* name : {"layer.out", "layer.w"}) {
    auto renderer = make_frame_renderer(RenderMode::kHistogram, config, 640, name);
    ASSERT_NE(renderer, nullptr);
    plotting::AdaptiveHistogramOptions o;
    o.bins = 40;
    o.margin = 0.05;
    o.rerange.min_frames = 3;
    o.axis = std::string(name) == "layer.w" ? plotting::AxisChoice::kSymlog : plotting::AxisChoice::kAuto;
    plotting::AdaptiveHistogram want(o);
    bool changed = false;
    for (int step = 0; step < 12; ++step) {
      const std::vector<float> v = wave(5000, step < 6 ? 1.f : 0.01f);  // shrinks 100x at step 6
      const auto r = record(name, v, {50, 100});
      const plotting::FrameInfo info = info_of(name, {50, 100}, step);
      const cv::Mat got = renderer->prepare(*r, info)(plotting::FrameStyle{}, nullptr);
      const tensor::TensorView view{v.data(), tensor::ElementType::kFloat32, {50, 100}};
      const plotting::HistogramFrame f = want.next(view, step);
      EXPECT_EQ(f.hist.counts.size(), 40u);
      EXPECT_EQ(f.hist.range.axis == plotting::HistogramAxis::kSymlog, std::string(name) == "layer.w");
      changed = changed || f.display.range_changed;
      EXPECT_TRUE(same(got, plotting::draw_histogram_frame(info, f.stats, f.hist, f.display, plotting::FrameStyle{})))
          << name << " step " << step;
    }
    EXPECT_TRUE(changed) << name;
  }
}

TEST(FrameRenderer, NothingToPlotIsSaidInEveryModeButStats) {
  const RenderConfig config;
  EXPECT_EQ(make_frame_renderer(RenderMode::kAuto, config, 640, "s"), nullptr);  // resolved before
  const std::vector<float> zeros(64, 0.f);
  const std::vector<float> nans(64, NAN);
  for (uint8_t value = 1; value <= wire::kMaxRenderHint; ++value) {  // every mode (render_modes.h)
    const auto mode = static_cast<RenderMode>(value);
    if (mode == RenderMode::kAuto || mode == RenderMode::kStats) continue;
    for (const auto* values : {&zeros, &nans}) {
      auto renderer = make_frame_renderer(mode, config, 640, "s");
      ASSERT_NE(renderer, nullptr) << wire::render_mode_name(mode);
      const auto r = record("s", *values, {8, 8});
      const plotting::FrameInfo info = info_of("s", {8, 8}, 5);
      const cv::Mat got = renderer->prepare(*r, info)(plotting::FrameStyle{}, nullptr);
      const tensor::TensorStats stats =
          tensor::compute_stats(tensor::TensorView{values->data(), tensor::ElementType::kFloat32, {8, 8}});
      const std::string text = plotting::degenerate_description(stats);
      EXPECT_EQ(text, values == &zeros ? "all 64 values are 0" : "all 64 values are NaN");
      EXPECT_TRUE(same(got, plotting::draw_message_frame(info, text, plotting::FrameStyle{}, &stats)))
          << wire::render_mode_name(mode);
    }
  }
  // The stats mode draws one point per step: a constant is a value like any other.
  auto stats_renderer = make_frame_renderer(RenderMode::kStats, config, 640, "s");
  const auto r = record("s", zeros, {8, 8});
  const plotting::FrameInfo info = info_of("s", {8, 8}, 5);
  const tensor::TensorStats stats =
      tensor::compute_stats(tensor::TensorView{zeros.data(), tensor::ElementType::kFloat32, {8, 8}});
  EXPECT_FALSE(same(stats_renderer->prepare(*r, info)(plotting::FrameStyle{}, nullptr),
                    plotting::draw_message_frame(info, "all 64 values are 0", plotting::FrameStyle{}, &stats)));
}

TEST(FrameRenderer, ProjectionsOfLabelledRowsShowTheirClassesAndHandOverTheLegend) {
  // Three classes of 40 rows each, far apart in 16 features.
  std::mt19937 rng(4);
  std::normal_distribution<float> noise(0, 0.3f);
  std::vector<float> values(120 * 16);
  auto labels = std::make_shared<RowLabels>();
  labels->names = {"ant", "bee", "cow"};
  for (int row = 0; row < 120; ++row) {
    const int c = row % 3;
    labels->values.push_back(c);
    for (int f = 0; f < 16; ++f) values[static_cast<size_t>(row * 16 + f)] = (f % 3 == c ? 5.f : 0.f) + noise(rng);
  }
  RenderConfig config;
  config.tsne_iterations = 300;
  for (const RenderMode mode : {RenderMode::kPca, RenderMode::kTsne}) {
    auto renderer = make_frame_renderer(mode, config, 640, "enc.out");
    auto r = record("enc.out", values, {120, 16});
    r->row_labels = labels;
    FrameNotes notes;
    const cv::Mat frame = renderer->prepare(*r, info_of("enc.out", {120, 16}, 3))(plotting::FrameStyle{}, &notes);
    ASSERT_FALSE(frame.empty());
    ASSERT_TRUE(notes.classes_shown);
    EXPECT_EQ(notes.classes, 3u);
    EXPECT_EQ(notes.points, 120u);
    EXPECT_GT(notes.silhouette, 0.7) << wire::render_mode_name(mode);  // three clusters far apart
    const nlohmann::json parsed = nlohmann::json::parse(notes.legend, nullptr, false);
    ASSERT_TRUE(parsed.is_object()) << wire::render_mode_name(mode) << ": " << notes.legend;
    ASSERT_EQ(parsed["classes"].size(), 3u);
    EXPECT_EQ(parsed["classes"][1]["name"], "bee");
    const auto color = plotting::class_palette()[1];  // BGR
    EXPECT_EQ(parsed["classes"][1]["color"], nlohmann::json::array({color[2], color[1], color[0]}));
    const auto& box = parsed["classes"][0]["box"];
    const auto& plot = parsed["plot"];
    EXPECT_LT(box[3].get<double>(), plot[1].get<double>() + 1e-9) << "the legend sits above the plot";
    EXPECT_GT(plot[2].get<double>() - plot[0].get<double>(), 0.5);
    // The class colours are on the frame.
    int colored = 0;
    for (int y = 0; y < frame.rows; ++y) {
      for (int x = 0; x < frame.cols; ++x) colored += frame.at<cv::Vec3b>(y, x) == color ? 1 : 0;
    }
    EXPECT_GT(colored, 30) << wire::render_mode_name(mode);

    FrameNotes none;
    auto plain = make_frame_renderer(mode, config, 640, "enc.out");
    plain->prepare(*record("enc.out", values, {120, 16}), info_of("enc.out", {120, 16}, 3))(plotting::FrameStyle{},
                                                                                            &none);
    EXPECT_FALSE(none.classes_shown) << "no labels: no classes";
    EXPECT_EQ(none.legend, "");
  }
}

}  // namespace
}  // namespace tensorscope::daemon
