// adaptive_histogram.h — one histogram stream's frames: a range from the body, kept while
// it fits, a new one (marked on the frames) when it no longer does.
//
// Used by the daemon's worker processes, one per stream in `histogram` mode, on the
// reader thread (straight on the payload in shared memory). The first frame with a
// spread of finite values picks the range (choose_body_range: percentiles, symmetric
// around 0 for gradients, symlog when the body spans orders of magnitude); later frames
// reuse it, so the video's axes stay still, in one pass over the data. When
// HistogramRangePolicy asks for a new range, the frame is read again to choose one;
// if it differs, the frame is drawn on it and this frame and the next `notice_frames`
// say "range changed at step S". A constant frame (a zero-initialised bias) never picks
// or changes the range. A fixed range (render.histogram_ranges) is never changed.
// Costs: one pass per frame; two more on the frames that pick a range.
// Thread safety: one instance per stream, used from one thread.
#pragma once

#include <cstdint>
#include <optional>

#include "tensorscope/plotting/frame_painter.h"
#include "tensorscope/plotting/histogram.h"
#include "tensorscope/plotting/histogram_range.h"
#include "tensorscope/plotting/histogram_range_policy.h"
#include "tensorscope/tensor/tensor_stats.h"
#include "tensorscope/tensor/tensor_view.h"

namespace tensorscope::plotting {

// The count axis a stream asks for: kAuto takes log counts when most bars would be
// too small to see on a linear one (prefers_log_counts), decided with each range.
enum class CountChoice : uint8_t { kAuto, kLinear, kLog };

struct AdaptiveHistogramOptions {
  int bins = 64;
  double margin = 0.1;
  AxisChoice axis = AxisChoice::kAuto;
  CountChoice counts = CountChoice::kAuto;
  std::optional<HistogramRange> fixed;  // never re-ranged
  RerangeRules rerange;
  int notice_frames = 10;  // frames after a range change that still say so
};

struct HistogramFrame {
  tensor::TensorStats stats;
  Histogram hist;
  HistogramDisplay display;
};

class AdaptiveHistogram {
 public:
  explicit AdaptiveHistogram(AdaptiveHistogramOptions options);

  // Statistics, histogram and display of the next frame of the stream (any view; an
  // invalid or empty one gives empty counts).
  HistogramFrame next(const tensor::TensorView& view, int64_t step);

  const std::optional<HistogramRange>& range() const { return range_; }

 private:
  bool log_counts_for(const Histogram& hist) const;

  AdaptiveHistogramOptions options_;
  HistogramRangePolicy policy_;
  std::optional<HistogramRange> range_;
  bool log_counts_ = false;
  std::string note_;              // what the last range change says
  int frames_since_change_ = -1;  // -1: no change yet
};

}  // namespace tensorscope::plotting
