// render_bench — how fast plotting/ turns a 1M-element float32 tensor into video frames.
//
// Measures, in one run, for a random-normal float32 tensor of 1M elements at 640x480:
//   summarize (stats + 64-bin histogram; auto range = 2 passes, fixed range = 1 pass),
//   compute_histogram alone, the value sketch alone, AdaptiveHistogram::next on a kept
//   range and on a frame that chooses a range (as ratios to summarize with a fixed range),
//   draw_histogram_frame, VideoWriter::write (encode) per frame, and the whole chain
//   (summarize + draw + encode, into a real .mp4 in a temp dir, finalize included) as
//   frames per second; then the same chain (stats + reduce + draw + encode) for the line
//   mode (1M vector), heatmap (1000x1000, block mean to 256x256) and force2d (1M ->
//   1000x1000 square -> 256x256). Usage: render_bench [frames=200] [codec=auto]
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "tensorscope/plotting/adaptive_histogram.h"
#include "tensorscope/plotting/frame_painter.h"
#include "tensorscope/plotting/heatmap.h"
#include "tensorscope/plotting/line_plot.h"
#include "tensorscope/plotting/histogram.h"
#include "tensorscope/plotting/value_sketch.h"
#include "tensorscope/plotting/video_writer.h"

namespace tp = tensorscope::plotting;
namespace tt = tensorscope::tensor;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double best(const std::vector<double>& v) { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }

}  // namespace

int main(int argc, char** argv) {
  const int frames = argc > 1 ? std::max(1, std::atoi(argv[1])) : 200;
  const std::string codec = argc > 2 ? argv[2] : "auto";
  constexpr int64_t kElements = 1 << 20;
  constexpr int kBins = 64;

  // A few tensors whose spread drifts, as a training run's would.
  std::mt19937 rng(42);
  std::vector<std::vector<float>> tensors(4, std::vector<float>(kElements));
  for (size_t t = 0; t < tensors.size(); ++t) {
    std::normal_distribution<float> normal(0.1f * t, 1.0f + 0.1f * t);
    for (float& x : tensors[t]) x = normal(rng);
  }
  auto view_of = [&](int i) {
    return tt::TensorView{tensors[i % tensors.size()].data(), tt::ElementType::kFloat32, {1024, 1024}};
  };

  // 1. summarize.
  tt::TensorStats stats;
  tp::Histogram hist;
  std::vector<double> auto_ms, fixed_ms, hist_ms, choose_ms, kept_ms, sketch_ms;
  tp::summarize(view_of(0), nullptr, kBins, 0.05, &stats, &hist);  // warm-up
  tp::AdaptiveHistogram kept_histogram{tp::AdaptiveHistogramOptions{}};
  kept_histogram.next(view_of(0), 0);
  const tp::HistogramRange fixed = hist.range;
  for (int i = 0; i < 30; ++i) {
    auto start = Clock::now();
    tp::summarize(view_of(i), nullptr, kBins, 0.05, &stats, &hist);
    auto_ms.push_back(ms_since(start));
    start = Clock::now();
    tp::summarize(view_of(i), &fixed, kBins, 0.05, &stats, &hist);
    fixed_ms.push_back(ms_since(start));
    // What a histogram stream does per frame on its kept range (the same single pass).
    start = Clock::now();
    kept_histogram.next(view_of(i), i + 1);
    kept_ms.push_back(ms_since(start));
    start = Clock::now();
    hist = tp::compute_histogram(view_of(i), fixed);
    hist_ms.push_back(ms_since(start));
    // A frame that chooses a range (a stream's first, or a range change): statistics
    // and sketch in one pass, then the histogram.
    tp::AdaptiveHistogram first{tp::AdaptiveHistogramOptions{}};
    start = Clock::now();
    first.next(view_of(i), 0);
    choose_ms.push_back(ms_since(start));
    start = Clock::now();
    const tp::ValueSketch sketch = tp::sketch_values(view_of(i));
    sketch_ms.push_back(ms_since(start));
    if (sketch.count() != static_cast<uint64_t>(kElements)) return 1;
  }

  // 2. draw.
  tp::FrameInfo info{"encoder.layers.3.attn.out", "cpu", "render_bench", "output", 0, 0, {1024, 1024},
                     tt::ElementType::kFloat32};
  const tp::FrameStyle style;   // 640x480
  std::vector<double> draw_ms;  // fresh frames, as the daemon draws them
  std::vector<cv::Mat> drawn;
  for (int i = 0; i < 60; ++i) {
    tp::summarize(view_of(i), &fixed, kBins, 0.05, &stats, &hist);
    info.step = i;
    const auto start = Clock::now();
    cv::Mat frame = tp::draw_histogram_frame(info, stats, hist, {}, style);
    draw_ms.push_back(ms_since(start));
    if (drawn.size() < 8) drawn.push_back(frame);  // kept for the encode-only run
  }

  char dir_template[] = "/tmp/render_bench-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) {
    std::perror("render_bench: mkdtemp");
    return 1;
  }
  const std::string dir = dir_template;
  std::string error;
  auto note = [&error](const tensorscope::Status& s) {
    if (!s) error = s.message();
    return s.is_ok();
  };

  // 3. encode only (pre-drawn frames).
  tp::VideoWriter encoder;
  if (!note(encoder.open(dir + "/encode.mp4", dir + "/.tmp-encode.mp4", style.width, style.height, 30, codec))) {
    std::fprintf(stderr, "render_bench: %s\n", error.c_str());
    return 1;
  }
  auto start = Clock::now();
  for (int i = 0; i < frames; ++i) encoder.write(drawn[i % drawn.size()]);
  const double write_ms = ms_since(start);
  start = Clock::now();
  const bool encoded = note(encoder.finalize().status());
  const double finalize_ms = ms_since(start);
  const double encode_ms = (write_ms + finalize_ms) / frames;

  // 4. the chain, into a real file.
  tp::VideoWriter writer;
  start = Clock::now();
  bool ok = note(writer.open(dir + "/chain.mp4", dir + "/.tmp-chain.mp4", style.width, style.height, 30, codec));
  const std::string used_codec = writer.codec();
  for (int i = 0; ok && i < frames; ++i) {
    tp::summarize(view_of(i), &fixed, kBins, 0.05, &stats, &hist);
    info.step = i;
    ok = writer.write(tp::draw_histogram_frame(info, stats, hist, {}, style));
  }
  std::string used;
  if (ok) {
    tensorscope::StatusOr<std::string> finalized = writer.finalize();
    ok = note(finalized.status());
    if (ok) used = *finalized;
  }
  const double chain_ms = ms_since(start);
  const auto bytes = ok ? std::filesystem::file_size(used) : 0;

  // 5. other modes: stats + reduce + draw + encode per frame, into real files.
  std::vector<float> square(1000 * 1000);
  for (size_t i = 0; i < square.size(); ++i) square[i] = tensors[0][i];
  struct ModeResult {
    const char* name;
    double fps = 0, reduce_ms = 0, draw_ms = 0;
  };
  std::vector<ModeResult> modes = {{"line"}, {"heatmap"}, {"force2d"}};
  for (ModeResult& mode : modes) {
    const std::string name = mode.name;
    tp::VideoWriter w;
    std::vector<double> reduce_ms, draw_ms2;
    const auto mode_start = Clock::now();
    bool mode_ok =
        note(w.open(dir + "/" + name + ".mp4", dir + "/.tmp-" + name + ".mp4", style.width, style.height, 30, codec));
    for (int i = 0; mode_ok && i < frames; ++i) {
      tt::TensorView view = name == "line"
          ? tt::TensorView{tensors[i % tensors.size()].data(), tt::ElementType::kFloat32, {kElements}}
          : tt::TensorView{
                i % 2 ? square.data() : tensors[i % tensors.size()].data(), tt::ElementType::kFloat32, {1000, 1000}};
      tp::FrameInfo mi = info;
      mi.shape = view.shape;
      mi.step = i;
      auto t0 = Clock::now();
      const tt::TensorStats s = tt::compute_stats(view);
      cv::Mat frame;
      if (name == "line") {
        const tp::LineSeries series = tp::reduce_line(view, style.width);
        reduce_ms.push_back(ms_since(t0));
        t0 = Clock::now();
        frame = tp::draw_line_frame(mi, s, series, style);
      } else {
        const tp::Heatmap h = name == "heatmap" ? tp::reduce_heatmap(view, 256, 256) : tp::force2d(view, 256);
        reduce_ms.push_back(ms_since(t0));
        t0 = Clock::now();
        frame = tp::draw_heatmap_frame(mi, s, h, style);
      }
      draw_ms2.push_back(ms_since(t0));
      mode_ok = w.write(frame);
    }
    mode_ok = mode_ok && note(w.finalize().status());
    if (!mode_ok) {
      std::fprintf(stderr, "render_bench: %s video failed: %s\n", mode.name, error.c_str());
      return 1;
    }
    mode.fps = frames / (ms_since(mode_start) / 1e3);
    mode.reduce_ms = median(reduce_ms);
    mode.draw_ms = median(draw_ms2);
  }
  std::filesystem::remove_all(dir);
  if (!ok || !encoded) {
    std::fprintf(stderr, "render_bench: video failed: %s\n", error.c_str());
    return 1;
  }

  const double summarize_auto = median(auto_ms), summarize_fixed = median(fixed_ms);
  std::printf("render_bench: 1M float32, %d bins, %dx%d, %d frames, codec %s\n", kBins, style.width, style.height,
              frames, used_codec.c_str());
  std::printf("  (median, best in brackets)\n");
  std::printf("  summarize auto range (2 passes): %.2f ms [%.2f]  (%.0f M elements/s)\n", summarize_auto, best(auto_ms),
              kElements / summarize_auto / 1e3);
  std::printf("  summarize fixed range (1 pass):  %.2f ms [%.2f]  (%.0f M elements/s)\n", summarize_fixed,
              best(fixed_ms), kElements / summarize_fixed / 1e3);
  std::printf("  compute_histogram only:          %.2f ms [%.2f]  (%.0f M elements/s)\n", median(hist_ms),
              best(hist_ms), kElements / median(hist_ms) / 1e3);
  std::printf("  value sketch only:               %.2f ms [%.2f]  (%.0f M elements/s)\n", median(sketch_ms),
              best(sketch_ms), kElements / median(sketch_ms) / 1e3);
  std::printf("  adaptive histogram, kept range:  %.2f ms [%.2f]  (%.2fx summarize fixed)\n", median(kept_ms),
              best(kept_ms), median(kept_ms) / summarize_fixed);
  std::printf("  adaptive histogram, new range:   %.2f ms [%.2f]  (%.2fx summarize fixed)\n", median(choose_ms),
              best(choose_ms), median(choose_ms) / summarize_fixed);
  std::printf("  draw_histogram_frame:            %.2f ms [%.2f]\n", median(draw_ms), best(draw_ms));
  std::printf("  encode per frame:                %.2f ms  (finalize %.1f ms)\n", encode_ms, finalize_ms);
  std::printf("  chain summarize+draw+encode:     %.1f frames/s  (%.2f ms/frame, %.0f KiB file)\n",
              frames / (chain_ms / 1e3), chain_ms / frames, bytes / 1024.0);
  std::printf(
      "render_bench: histogram 1M float32: summarize %.2f ms, draw %.2f ms, encode %.2f ms, "
      "chain %.1f frames/s (codec %s)\n",
      summarize_fixed, median(draw_ms), encode_ms, frames / (chain_ms / 1e3), used_codec.c_str());
  for (const ModeResult& mode : modes) {
    std::printf(
        "render_bench: %s 1M float32: stats+reduce %.2f ms, draw %.2f ms, "
        "chain %.1f frames/s (codec %s)\n",
        mode.name, mode.reduce_ms, mode.draw_ms, mode.fps, used_codec.c_str());
  }
  return 0;
}
