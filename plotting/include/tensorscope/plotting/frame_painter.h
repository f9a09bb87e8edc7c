// frame_painter.h — draws one video frame: a header (stream, device, rank, step, label,
// shape/dtype, statistics) above a plot, here a histogram, or a message.
//
// Used by the daemon's worker processes, one frame per tensor received. Frames are
// CV_8UC3 (BGR) images of exactly style.width x style.height (each clamped to
// [kMinFrameSide, kMaxFrameSide]); text is scaled with the frame, elided with "..."
// and never drawn outside the image. Hershey fonts draw ASCII only: other characters
// of names and labels show as '?'. No exception escapes: if drawing fails, a blank
// frame of the right size comes back.
// Thread safety: pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "tensorscope/plotting/histogram.h"
#include "tensorscope/tensor/tensor_stats.h"
#include "tensorscope/tensor/tensor_view.h"

namespace tensorscope::plotting {

inline constexpr int kMinFrameSide = 16;
inline constexpr int kMaxFrameSide = 8192;

struct FrameInfo {
  std::string stream;  // e.g. "encoder.layers.3.attn.out"
  std::string device;  // "cpu", "cuda0", ...
  std::string label;   // free text set by the user (may be empty)
  std::string kind;    // "output", "grad", "weight", "push", ... (may be empty)
  int rank = 0;
  int64_t step = 0;
  std::vector<int64_t> shape;
  tensor::ElementType type = tensor::ElementType::kFloat32;
};

// Colours are BGR. The defaults are a dark theme that survives video compression.
struct FrameStyle {
  int width = 640;
  int height = 480;
  cv::Scalar background{34, 30, 28};
  cv::Scalar foreground{235, 232, 230};
  cv::Scalar bar{222, 156, 72};
  cv::Scalar grid{64, 59, 56};
  cv::Scalar accent{64, 172, 255};
};

// How a histogram is shown besides its counts (adaptive_histogram.h decides it).
struct HistogramDisplay {
  bool log_counts = false;     // count axis on a log scale (log10(1 + count))
  bool range_changed = false;  // the first frame on a new range: the axes in accent
  std::string range_note;      // e.g. "range changed at step 1200 (values shrank; ...)"
};

// Histogram frame: header with statistics, bars over hist.range with count (y) and
// value (x, linear or symlog) axes, the mean marked, and underflow/overflow/NaN/+Inf/
// -Inf counts in a line of their own with the axes' state ("64 bins, symlog x, log
// counts"). On a linear count axis a spike (spike_bin, e.g. a ReLU's zeros) is drawn
// cut at the top with its count and share written, so the other bars keep their
// height. A range note is written in accent at the top of the plot.
cv::Mat draw_histogram_frame(const FrameInfo& info, const tensor::TensorStats& stats, const Histogram& hist,
                             const HistogramDisplay& display, const FrameStyle& style);

// Header (with the statistics line when stats != nullptr) and `message` centred below
// it (word-wrapped), for tensors that cannot be plotted (empty, unsupported,
// degenerate, ...).
cv::Mat draw_message_frame(const FrameInfo& info, const std::string& message, const FrameStyle& style,
                           const tensor::TensorStats* stats = nullptr);

// What a frame should say instead of a plot about a tensor that has nothing to show:
// "empty tensor: nothing to plot", "all 4096 values are NaN", "no finite values: 3 NaN,
// 1 +Inf", "single element: 0.25", "all 4096 values are 0", "constant: all 4096 values
// are 1.5" (NaN/Inf besides are named). Empty when the tensor has a spread of finite
// values to plot.
std::string degenerate_description(const tensor::TensorStats& stats);

// For other painters: fills `image` with the background, draws the header (with the
// statistics line when stats != nullptr) and returns the free area below it.
cv::Rect draw_frame_header(cv::Mat& image, const FrameInfo& info, const tensor::TensorStats* stats,
                           const FrameStyle& style);

// "[64, 128, 768]"; "[]" for a scalar.
std::string format_shape(const std::vector<int64_t>& shape);

}  // namespace tensorscope::plotting
