// stats_history.h — the `stats` render mode: a stream's statistics over its steps.
//
// Used by the daemon's worker processes, one StatsHistory per (stream, device, rank) in
// `stats` mode. Memory is bounded: past kMaxStatsPoints points, the older half is
// downsampled by merging neighbouring pairs (min of mins, max of maxes, NaN/Inf counts
// summed, mean and std pooled), so the whole run stays visible. The painter draws the
// mean with a +-std band, min and max as lines over steps, red ticks on the x axis
// where NaN/Inf occurred, and a legend. No exception escapes; non-finite statistics
// (e.g. all-NaN tensors) leave gaps in the lines, never crash.
// Thread safety: StatsHistory is a plain value, not synchronised; the painter is pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <opencv2/core.hpp>

#include "tensorscope/plotting/frame_painter.h"
#include "tensorscope/tensor/tensor_stats.h"

namespace tensorscope::plotting {

inline constexpr size_t kMaxStatsPoints = 4096;

struct StatsPoint {
  int64_t first_step = 0;  // steps merged into this point: [first_step, last_step]
  int64_t last_step = 0;
  uint32_t merged = 1;  // how many add() calls it stands for
  double mean = 0;      // NaN when no finite values
  double std = 0;
  double min = 0;
  double max = 0;
  uint64_t nan_count = 0;
  uint64_t inf_count = 0;  // +Inf and -Inf
};

class StatsHistory {
 public:
  explicit StatsHistory(size_t max_points = kMaxStatsPoints);

  void add(int64_t step, const tensor::TensorStats& stats);
  const std::vector<StatsPoint>& points() const { return points_; }
  size_t size() const { return points_.size(); }
  uint64_t added() const { return added_; }  // add() calls so far

 private:
  void compact();

  size_t max_points_;
  std::vector<StatsPoint> points_;
  uint64_t added_ = 0;
};

// Header with the current statistics, then mean (line) with a +-std band, min and max
// (thin lines) against step, NaN/Inf steps marked with red ticks on the x axis, and a
// legend. When the history's largest |value| is 20 times those of its last tenth
// (values that shrank 20x or more over training, or grew), the value axis is symlog, linear
// within a tenth of the recent values, and its title says so. An empty history shows a
// message.
cv::Mat draw_stats_frame(const FrameInfo& info, const tensor::TensorStats& current, const StatsHistory& history,
                         const FrameStyle& style);

}  // namespace tensorscope::plotting
