// line_plot.h — the `line` render mode: a tensor's values (flattened) against their index.
//
// Used by the daemon's worker processes. reduce_line() makes one pass over the data
// (about 1 ms per 1M float32): short tensors keep every value; long ones keep the min
// and the max of the finite values of each pixel column, so a single spike always
// shows. NaN/+Inf/-Inf are counted apart and their columns flagged. draw_line_frame()
// draws the standard header, axes (index on x, value on y) and a polyline or a min-max
// band. No exception escapes either function; untrusted values never crash them.
// Thread safety: pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include <opencv2/core.hpp>

#include "tensorscope/plotting/frame_painter.h"
#include "tensorscope/plotting/steady_axis.h"
#include "tensorscope/tensor/tensor_stats.h"
#include "tensorscope/tensor/tensor_view.h"

namespace tensorscope::plotting {

inline constexpr int kMaxLineColumns = 1 << 16;

// Flags of one LineSeries point.
inline constexpr uint8_t kHasNaN = 1;
inline constexpr uint8_t kHasPosInf = 2;
inline constexpr uint8_t kHasNegInf = 4;

struct LineSeries {
  int64_t numel = 0;     // elements of the tensor (any shape, flattened)
  bool reduced = false;  // true: point i is the min/max of a pixel column of elements
  // One entry per point. Point i covers elements [first[i], first[i+1]) (the last up
  // to numel). lo/hi: min and max of its finite values, NaN when it has none.
  std::vector<int64_t> first;
  std::vector<double> lo;
  std::vector<double> hi;
  std::vector<uint8_t> flags;  // kHasNaN | kHasPosInf | kHasNegInf
  uint64_t nan_count = 0;
  uint64_t pos_inf_count = 0;
  uint64_t neg_inf_count = 0;
  double finite_min = 0;  // over all finite values; NaN when there are none
  double finite_max = 0;
};

// columns is clamped to [1, kMaxLineColumns]. n <= columns keeps every value (lo == hi);
// otherwise point c covers elements [c*n/columns, (c+1)*n/columns). Invalid or empty
// views give an empty series (numel 0).
LineSeries reduce_line(const tensor::TensorView& view, int columns);

// Header with statistics, value-vs-index axes, the series (a polyline with dots when
// short, a min-max band when reduced), NaN/Inf markers (red ticks on the x axis for
// NaN, marks at the top/bottom edge for +Inf/-Inf) and a footer with their counts.
// Empty or all-non-finite series get a message in the plot area. The value axis spans
// `y_limits` when given (a stream's SteadyAxis), else the series' own range.
cv::Mat draw_line_frame(const FrameInfo& info, const tensor::TensorStats& stats, const LineSeries& series,
                        const FrameStyle& style, const AxisLimits* y_limits = nullptr);

}  // namespace tensorscope::plotting
