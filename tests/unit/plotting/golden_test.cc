// Golden images: each render mode drawn at 640x480 from deterministic inputs and
// compared with tests/unit/plotting/golden/<mode>_<case>.png within a tolerance (mean
// absolute difference < 2 and < 1% of pixels differing by more than 64 in a channel).
// TENSORSCOPE_REGENERATE_GOLDEN=1 rewrites the PNGs instead (see golden/README.md).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "tensorscope/plotting/adaptive_histogram.h"
#include "tensorscope/plotting/frame_painter.h"
#include "tensorscope/plotting/heatmap.h"
#include "tensorscope/plotting/histogram.h"
#include "tensorscope/plotting/pca.h"
#include "tensorscope/plotting/scatter_plot.h"
#include "tensorscope/plotting/tsne.h"
#include "tensorscope/plotting/line_plot.h"
#include "tensorscope/plotting/stats_history.h"
#include "test_util.h"

#ifndef TENSORSCOPE_GOLDEN_DIR
#error "TENSORSCOPE_GOLDEN_DIR must name tests/unit/plotting/golden"
#endif

namespace tensorscope::plotting {
namespace {

float normal_noise(uint32_t i);

bool regenerate() {
  const char* v = std::getenv("TENSORSCOPE_REGENERATE_GOLDEN");
  return v != nullptr && std::string(v) == "1";
}

FrameInfo info_for(const std::string& stream, std::vector<int64_t> shape,
                   tensor::ElementType type = tensor::ElementType::kFloat32) {
  FrameInfo info;
  info.stream = stream;
  info.device = "cpu";
  info.label = "golden";
  info.kind = "output";
  info.rank = 0;
  info.step = 1234;
  info.shape = std::move(shape);
  info.type = type;
  return info;
}

// Deterministic pseudo-noise in [-1, 1] (no <random> distributions: their output is
// implementation-defined).
float noise(uint32_t i) {
  uint32_t x = i * 2654435761u + 12345u;
  x ^= x >> 13;
  x *= 0x5bd1e995u;
  x ^= x >> 15;
  return static_cast<float>(x & 0xffffff) / 8388607.5f - 1.0f;
}

void check_golden(const std::string& name, const cv::Mat& frame) {
  const std::string path = std::string(TENSORSCOPE_GOLDEN_DIR) + "/" + name + ".png";
  ASSERT_EQ(frame.cols, 640);
  ASSERT_EQ(frame.rows, 480);
  if (regenerate()) {
    ASSERT_TRUE(cv::imwrite(path, frame)) << path;
    return;
  }
  const cv::Mat golden = cv::imread(path, cv::IMREAD_COLOR);
  ASSERT_FALSE(golden.empty()) << "missing golden " << path << " (run with TENSORSCOPE_REGENERATE_GOLDEN=1)";
  ASSERT_EQ(golden.size(), frame.size()) << path;
  cv::Mat diff;
  cv::absdiff(golden, frame, diff);
  const cv::Scalar per_channel = cv::mean(diff);
  const double mean_abs = (per_channel[0] + per_channel[1] + per_channel[2]) / 3;
  std::vector<cv::Mat> ch;
  cv::split(diff, ch);
  const cv::Mat max_channel = cv::max(cv::max(ch[0], ch[1]), ch[2]);
  const double big_fraction = static_cast<double>(cv::countNonZero(max_channel > 64)) / (frame.rows * frame.cols);
  const bool ok = mean_abs < 2.0 && big_fraction < 0.01;
  if (!ok) {
    const std::string actual = std::filesystem::temp_directory_path().string() + "/" + name + ".actual.png";
    cv::imwrite(actual, frame);
    ADD_FAILURE() << name << " differs from " << path << ": mean abs diff " << mean_abs << ", " << big_fraction * 100
                  << "% pixels > 64; actual frame in " << actual;
  }
}

TEST(Golden, Line) {
  std::vector<float> v(100000);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = std::sin(static_cast<float>(i) * 2e-4f) * (1 + i * 1e-5f) + 0.1f * noise(static_cast<uint32_t>(i));
  }
  v[31415] = 6;  // a spike the reduction must keep
  v[60000] = NAN;
  v[80000] = INFINITY;
  const tensor::TensorView view{v.data(), tensor::ElementType::kFloat32, {100, 1000}};
  check_golden("line_sine_100k",
               draw_line_frame(info_for("decoder.out", view.shape), tensor::compute_stats(view), reduce_line(view, 640),
                               FrameStyle{}));
  const tensor::TensorView small{v.data(), tensor::ElementType::kFloat32, {30}};
  std::vector<int16_t> ints(30);
  for (size_t i = 0; i < ints.size(); ++i) ints[i] = static_cast<int16_t>((i * 37) % 23) - 11;
  const tensor::TensorView iv{ints.data(), tensor::ElementType::kInt16, {30}};
  check_golden("line_int16_30",
               draw_line_frame(info_for("token.ids", iv.shape, tensor::ElementType::kInt16), tensor::compute_stats(iv),
                               reduce_line(iv, 640), FrameStyle{}));
}

TEST(Golden, Heatmap) {
  std::vector<float> m(60 * 80);
  for (int r = 0; r < 60; ++r) {
    for (int c = 0; c < 80; ++c) m[r * 80 + c] = std::sin(r * 0.1f) * std::cos(c * 0.07f);
  }
  m[5] = NAN;
  m[61 * 1 + 200] = NAN;
  const tensor::TensorView view{m.data(), tensor::ElementType::kFloat32, {60, 80}};
  check_golden("heatmap_waves_60x80",
               draw_heatmap_frame(info_for("attn.scores", view.shape), tensor::compute_stats(view),
                                  reduce_heatmap(view, 256, 256), FrameStyle{}));
  std::vector<float> big(1000 * 1000);
  for (int r = 0; r < 1000; ++r) {
    for (int c = 0; c < 1000; ++c) {
      big[r * 1000 + c] = 0.3f * noise(r * 1000 + c) + (r == c ? 3.0f : 0.0f) + c * 1e-3f;
    }
  }
  const tensor::TensorView bv{big.data(), tensor::ElementType::kFloat32, {1000, 1000}};
  check_golden("heatmap_maxabs_1000x1000",
               draw_heatmap_frame(info_for("layer.weight", bv.shape), tensor::compute_stats(bv),
                                  reduce_heatmap(bv, 200, 200, HeatmapReduction::kMaxAbs), FrameStyle{}));
}

TEST(Golden, Force2d) {
  std::vector<float> v(3 * 7 * 50);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(i * 0.05f) + 0.2f * noise(static_cast<uint32_t>(i));
  const tensor::TensorView view{v.data(), tensor::ElementType::kFloat32, {3, 7, 50}};
  check_golden("force2d_3x7x50",
               draw_heatmap_frame(info_for("conv.activations", view.shape), tensor::compute_stats(view),
                                  force2d(view, 256), FrameStyle{}));
}

TEST(Golden, Stats) {
  StatsHistory history;
  tensor::TensorStats last;
  std::vector<float> t(256);
  for (int s = 0; s < 500; ++s) {
    for (size_t i = 0; i < t.size(); ++i) {
      t[i] = noise(static_cast<uint32_t>(s * 256 + i)) * (1 + s * 0.004f) + std::sin(s * 0.02f);
    }
    if (s == 170 || s == 171 || s == 400) t[7] = NAN;
    const tensor::TensorView view{t.data(), tensor::ElementType::kFloat32, {16, 16}};
    last = tensor::compute_stats(view);
    history.add(s * 10, last);
  }
  check_golden("stats_drift_500", draw_stats_frame(info_for("loss.grad", {16, 16}), last, history, FrameStyle{}));
}

// Values shrinking 100x over the run: a symlog value axis keeps the late steps readable.
TEST(Golden, StatsShrinking100x) {
  StatsHistory history;
  tensor::TensorStats last;
  std::vector<float> t(256);
  for (int s = 0; s < 500; ++s) {
    const float scale = std::pow(100.f, -s / 499.f);
    for (size_t i = 0; i < t.size(); ++i) {
      t[i] = scale * (0.5f + normal_noise(static_cast<uint32_t>(s * 256 + i)));
    }
    const tensor::TensorView view{t.data(), tensor::ElementType::kFloat32, {256}};
    last = tensor::compute_stats(view);
    history.add(s * 10, last);
  }
  check_golden("stats_shrinking_100x", draw_stats_frame(info_for("fc1.grad", {256}), last, history, FrameStyle{}));
}

TEST(Golden, Histogram) {
  std::vector<float> v(65536);
  for (size_t i = 0; i < v.size(); ++i) {
    // Sum of three uniforms: bell-shaped and deterministic.
    v[i] = noise(static_cast<uint32_t>(3 * i)) + noise(static_cast<uint32_t>(3 * i + 1)) +
        noise(static_cast<uint32_t>(3 * i + 2));
  }
  v[10] = NAN;
  const tensor::TensorView view{v.data(), tensor::ElementType::kFloat32, {256, 256}};
  tensor::TensorStats stats;
  Histogram hist;
  summarize(view, nullptr, 64, 0.05, &stats, &hist);
  check_golden("histogram_bell_64k",
               draw_histogram_frame(info_for("mlp.out", view.shape), stats, hist, {}, FrameStyle{}));
}

// Deterministic normal and Student-t (nu = 2) samples from noise(): Box-Muller, and
// Z / sqrt(-ln U).
float normal_noise(uint32_t i) {
  const double u1 = (noise(2 * i) + 1.0) / 2 * (1 - 1e-9) + 1e-9;
  const double u2 = (noise(2 * i + 1) + 1.0) / 2;
  return static_cast<float>(std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}
float student_t2_noise(uint32_t i) {
  const double u = (noise(i + 7777777u) + 1.0) / 2 * (1 - 1e-9) + 1e-9;
  return static_cast<float>(normal_noise(i) / std::sqrt(-std::log(u)));
}

cv::Mat adaptive_histogram_frame(const std::string& stream, const std::string& kind, const std::vector<float>& v,
                                 const AdaptiveHistogramOptions& options = {}) {
  const tensor::TensorView view{v.data(), tensor::ElementType::kFloat32, {256, static_cast<int64_t>(v.size() / 256)}};
  AdaptiveHistogram adaptive(options);
  const HistogramFrame f = adaptive.next(view, 100);
  FrameInfo info = info_for(stream, view.shape);
  info.kind = kind;
  info.step = 100;
  return draw_histogram_frame(info, f.stats, f.hist, f.display, FrameStyle{});
}

// A heavy-tailed gradient: a body from percentiles, symmetric around 0, the tails counted;
// and, for comparison, the same values over [min, max] (a single bar).
TEST(Golden, HistogramHeavyTailedGradient) {
  std::vector<float> v(65536);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 1e-4f * student_t2_noise(static_cast<uint32_t>(i));
  check_golden("histogram_t2_gradient", adaptive_histogram_frame("cnn.features.conv2.grad", "grad", v));
  const tensor::TensorView view{v.data(), tensor::ElementType::kFloat32, {256, 256}};
  tensor::TensorStats stats;
  Histogram hist;
  summarize(view, nullptr, 64, 0.1, &stats, &hist);
  FrameInfo info = info_for("cnn.features.conv2.grad", view.shape);
  info.kind = "grad";
  info.step = 100;
  check_golden("histogram_t2_gradient_extremes", draw_histogram_frame(info, stats, hist, {}, FrameStyle{}));
}

// Half zeros: the zero bar is cut and labelled, the positive half keeps its height.
TEST(Golden, HistogramReluSpike) {
  std::vector<float> v(65536);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::max(0.f, normal_noise(static_cast<uint32_t>(i)));
  check_golden("histogram_relu_spike", adaptive_histogram_frame("cnn.features.relu1", "output", v));
}

// Log-normal weights spanning decades: a symlog value axis.
TEST(Golden, HistogramLogNormalSymlog) {
  std::vector<float> v(65536);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * std::exp(2.f * normal_noise(static_cast<uint32_t>(i)));
  check_golden("histogram_lognormal_symlog", adaptive_histogram_frame("gate.weight", "weight", v));
}

// The first frame after a range change: axes in accent and the change written above.
TEST(Golden, HistogramRangeChanged) {
  AdaptiveHistogram adaptive(AdaptiveHistogramOptions{});
  std::vector<float> v(65536);
  HistogramFrame f;
  for (int step = 0; step < 12; ++step) {
    const float scale = step < 11 ? 1.f : 0.05f;
    for (size_t i = 0; i < v.size(); ++i) v[i] = scale * normal_noise(static_cast<uint32_t>(i + step * 65536));
    f = adaptive.next(tensor::TensorView{v.data(), tensor::ElementType::kFloat32, {65536}}, step * 100);
  }
  ASSERT_TRUE(f.display.range_changed);
  FrameInfo info = info_for("encoder.layers.5.out", {65536});
  info.step = 1100;
  check_golden("histogram_range_changed", draw_histogram_frame(info, f.stats, f.hist, f.display, FrameStyle{}));
}

// A tensor with nothing to plot says so.
TEST(Golden, MessageConstant) {
  std::vector<float> v(4096, 0.f);
  const tensor::TensorView view{v.data(), tensor::ElementType::kFloat32, {64, 64}};
  const tensor::TensorStats stats = tensor::compute_stats(view);
  check_golden(
      "message_all_zero",
      draw_message_frame(info_for("fc.bias.grad", view.shape), degenerate_description(stats), FrameStyle{}, &stats));
}

// Rows from three well-separated deterministic clusters in 12-D.
std::vector<float> clustered_rows(int rows, int features) {
  std::vector<float> v(static_cast<size_t>(rows) * features);
  for (int r = 0; r < rows; ++r) {
    for (int f = 0; f < features; ++f) {
      const float center = (f % 3 == r % 3) ? 5.f : 0.f;
      v[static_cast<size_t>(r) * features + f] = center + noise(static_cast<uint32_t>(r * features + f));
    }
  }
  return v;
}

TEST(Golden, Pca) {
  const std::vector<float> v = clustered_rows(300, 12);
  const tensor::TensorView view{v.data(), tensor::ElementType::kFloat32, {300, 12}};
  const tensor::TensorStats stats = tensor::compute_stats(view);
  const PcaResult result = compute_pca(view, PcaOptions{});
  check_golden("pca_clusters_300x12",
               draw_pca_frame(info_for("encoder.out", view.shape), &stats, result, FrameStyle{}));
}

TEST(Golden, Tsne) {
  const std::vector<float> v = clustered_rows(150, 12);
  const tensor::TensorView view{v.data(), tensor::ElementType::kFloat32, {150, 12}};
  const tensor::TensorStats stats = tensor::compute_stats(view);
  TsneOptions options;
  options.iterations = 300;
  TsneEmbedder embedder(options);
  const TsneResult result = embedder.embed(view);
  ASSERT_TRUE(result.message.empty()) << result.message;
  ScatterLabels labels;
  labels.x_title = "t-SNE 1";
  labels.y_title = "t-SNE 2";
  labels.note = "150 rows x 12 features";
  check_golden("tsne_clusters_150x12",
               draw_scatter_frame(info_for("encoder.out", view.shape), &stats, result.embedding, labels, FrameStyle{}));
}

}  // namespace
}  // namespace tensorscope::plotting
