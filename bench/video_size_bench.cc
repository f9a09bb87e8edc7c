// video_size_bench — how large tensorscope's videos are, and how they look, compared with
// what OpenCV's VideoWriter makes of the same frames.
//
// Draws four sequences of 200 frames (640x480) as the daemon would:
//   hist   render_bench's histogram chain: four tensors in turn (a frame like one 4 back);
//   drift  histograms of a tensor whose distribution moves a little every step;
//   line   line plots of the same drifting tensor (1M elements);
//   heat   heatmaps of it (1024x1024 -> 256x256).
// Each is written twice, at 10 frames/s (the daemon's default): by plotting::VideoWriter
// (fragmented MP4, a fragment per frame, no frame held in the encoder) and by OpenCV's
// cv::VideoWriter with "avc1" (x264 with its default lookahead and B-frames, one moov at
// the end: a file cut by a crash does not play) — the writer tensorscope used before.
// Both files are decoded with OpenCV and compared with the drawn frames: PSNR (dB, all
// three channels) and SSIM (grey, 11x11 Gaussian window). Prints sizes, the size ratio,
// both looks and the encode time per frame. Usage: video_size_bench [frames=200]
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>

#include "tensorscope/plotting/frame_painter.h"
#include "tensorscope/plotting/heatmap.h"
#include "tensorscope/plotting/histogram.h"
#include "tensorscope/plotting/line_plot.h"
#include "tensorscope/plotting/video_writer.h"

namespace tp = tensorscope::plotting;
namespace tt = tensorscope::tensor;
using Clock = std::chrono::steady_clock;

namespace {

constexpr double kFps = 10;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Mean SSIM of the grey images (Wang et al. 2004, Gaussian window 11, sigma 1.5).
double ssim(const cv::Mat& a, const cv::Mat& b) {
  cv::Mat x, y;
  cv::cvtColor(a, x, cv::COLOR_BGR2GRAY);
  cv::cvtColor(b, y, cv::COLOR_BGR2GRAY);
  x.convertTo(x, CV_32F);
  y.convertTo(y, CV_32F);
  const double c1 = 6.5025, c2 = 58.5225;  // (0.01 * 255)^2, (0.03 * 255)^2
  const cv::Size window(11, 11);
  cv::Mat mx, my, sxx, syy, sxy;
  cv::GaussianBlur(x, mx, window, 1.5);
  cv::GaussianBlur(y, my, window, 1.5);
  cv::GaussianBlur(x.mul(x), sxx, window, 1.5);
  cv::GaussianBlur(y.mul(y), syy, window, 1.5);
  cv::GaussianBlur(x.mul(y), sxy, window, 1.5);
  sxx -= mx.mul(mx);
  syy -= my.mul(my);
  sxy -= mx.mul(my);
  const cv::Mat num = (2 * mx.mul(my) + c1).mul(2 * sxy + c2);
  const cv::Mat den = (mx.mul(mx) + my.mul(my) + c1).mul(sxx + syy + c2);
  cv::Mat map;
  cv::divide(num, den, map);
  return cv::mean(map)[0];
}

struct Look {
  int frames = 0;
  double psnr = 0, ssim = 0;
};

Look look_of(const std::string& path, const std::vector<cv::Mat>& drawn) {
  Look out;
  cv::VideoCapture video(path);
  cv::Mat frame;
  while (out.frames < static_cast<int>(drawn.size()) && video.read(frame)) {
    out.psnr += cv::PSNR(frame, drawn[out.frames]);
    out.ssim += ssim(frame, drawn[out.frames]);
    ++out.frames;
  }
  if (out.frames > 0) {
    out.psnr /= out.frames;
    out.ssim /= out.frames;
  }
  return out;
}

std::vector<cv::Mat> draw(const std::string& kind, int frames) {
  constexpr int64_t kSide = 1024, kElements = kSide * kSide;
  std::mt19937 rng(42);
  std::vector<std::vector<float>> tensors(4, std::vector<float>(kElements));
  for (size_t t = 0; t < tensors.size(); ++t) {
    std::normal_distribution<float> normal(0.1f * t, 1.0f + 0.1f * t);
    for (float& x : tensors[t]) x = normal(rng);
  }
  const tp::FrameStyle style;
  tp::FrameInfo info{"encoder.layers.3.attn.out", "cpu", "video_size_bench", "output", 0, 0, {kSide, kSide},
                     tt::ElementType::kFloat32};
  tt::TensorStats stats;
  tp::Histogram hist;
  tp::summarize(tt::TensorView{tensors[0].data(), tt::ElementType::kFloat32, {kSide, kSide}}, nullptr, 64, 0.05, &stats,
                &hist);
  const tp::HistogramRange fixed = hist.range;
  std::vector<float> now(kElements);
  std::vector<cv::Mat> out;
  for (int i = 0; i < frames; ++i) {
    info.step = i;
    if (kind == "hist") {
      tp::summarize(tt::TensorView{tensors[i % 4].data(), tt::ElementType::kFloat32, {kSide, kSide}}, &fixed, 64, 0.05,
                    &stats, &hist);
      out.push_back(tp::draw_histogram_frame(info, stats, hist, {}, style));
      continue;
    }
    const float a = static_cast<float>(i) / frames;  // one distribution turning into another
    for (int64_t j = 0; j < kElements; ++j) now[j] = tensors[0][j] * (1 - a) + tensors[3][j] * a * 1.5f + 0.01f * i;
    const tt::TensorView square{now.data(), tt::ElementType::kFloat32, {kSide, kSide}};
    if (kind == "drift") {
      tp::summarize(square, nullptr, 64, 0.05, &stats, &hist);
      out.push_back(tp::draw_histogram_frame(info, stats, hist, {}, style));
    } else if (kind == "line") {
      const tt::TensorView vector{now.data(), tt::ElementType::kFloat32, {kElements}};
      info.shape = vector.shape;
      out.push_back(tp::draw_line_frame(info, tt::compute_stats(vector), tp::reduce_line(vector, style.width), style));
    } else {
      out.push_back(
          tp::draw_heatmap_frame(info, tt::compute_stats(square), tp::reduce_heatmap(square, 256, 256), style));
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int frames = argc > 1 ? std::max(1, std::atoi(argv[1])) : 200;
  char dir_template[] = "/tmp/video_size_bench-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) {
    std::perror("video_size_bench: mkdtemp");
    return 1;
  }
  const std::string dir = dir_template;
  std::printf("video_size_bench: %d frames of 640x480 at %.0f frames/s, H.264\n", frames, kFps);
  std::printf("  %-6s %-34s %-34s %s\n", "", "tensorscope (fMP4, frame per fragment)", "OpenCV VideoWriter (earlier)",
              "size ratio");
  int failures = 0;
  for (const std::string kind : {"hist", "drift", "line", "heat"}) {
    const std::vector<cv::Mat> drawn = draw(kind, frames);
    const cv::Size size = drawn.front().size();

    tp::VideoWriter ours;
    std::string error, ours_path;
    auto start = Clock::now();
    const tensorscope::Status opened =
        ours.open(dir + "/" + kind + ".mp4", dir + "/.tmp-" + kind + ".mp4", size.width, size.height, kFps, "avc1");
    bool ok = opened.is_ok();
    if (!ok) error = opened.message();
    for (size_t i = 0; ok && i < drawn.size(); ++i) ok = ours.write(drawn[i]);
    if (ok) {
      tensorscope::StatusOr<std::string> finalized = ours.finalize();
      ok = finalized.is_ok();
      if (ok) {
        ours_path = *finalized;
      } else {
        error = finalized.message();
      }
    }
    const double ours_ms = ms_since(start) / frames;

    const std::string theirs_path = dir + "/" + kind + "-opencv.mp4";
    start = Clock::now();
    cv::VideoWriter theirs(theirs_path, cv::VideoWriter::fourcc('a', 'v', 'c', '1'), kFps, size);
    for (const cv::Mat& frame : drawn) theirs.write(frame);
    theirs.release();
    const double theirs_ms = ms_since(start) / frames;
    if (!ok || !std::filesystem::exists(theirs_path)) {
      std::fprintf(stderr, "video_size_bench: %s: %s\n", kind.c_str(), ok ? "OpenCV wrote no file" : error.c_str());
      ++failures;
      continue;
    }
    const double ours_kib = std::filesystem::file_size(ours_path) / 1024.0;
    const double theirs_kib = std::filesystem::file_size(theirs_path) / 1024.0;
    const Look a = look_of(ours_path, drawn), b = look_of(theirs_path, drawn);
    if (a.frames != frames || b.frames != frames) ++failures;
    std::printf("  %-6s %5.0f KiB PSNR %.2f SSIM %.4f %.1f ms   %5.0f KiB PSNR %.2f SSIM %.4f %.1f ms   %.2fx\n",
                kind.c_str(), ours_kib, a.psnr, a.ssim, ours_ms, theirs_kib, b.psnr, b.ssim, theirs_ms,
                ours_kib / theirs_kib);
  }
  std::filesystem::remove_all(dir);
  return failures == 0 ? 0 : 1;
}
