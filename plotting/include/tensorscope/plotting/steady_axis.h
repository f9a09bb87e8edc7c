// steady_axis.h — an axis range that follows a stream's data from frame to frame
// without jitter.
//
// Used by the daemon's worker processes for the value axis of `line` frames and both
// axes of `pca`/`tsne` frames, one per stream and axis. Drawing each frame on its own
// [min, max] makes the axis breathe with every frame; a range fixed at the first frame
// goes wrong when values shrink or grow. SteadyAxis widens at once when the data leaves
// the range (nothing is ever drawn off the plot), and narrows only after the data has
// used less than half of it for `patience` frames in a row. Edges sit on a grid of 1, 2
// or 5 times a power of ten, so small changes give the same range. Pure bookkeeping.
// Thread safety: a plain value, not synchronised.
#pragma once

namespace tensorscope::plotting {

struct AxisLimits {
  double lo = 0;
  double hi = 1;
  bool operator==(const AxisLimits&) const = default;
};

class SteadyAxis {
 public:
  explicit SteadyAxis(int patience = 10, double margin = 0.05);

  // The limits for a frame whose finite data span [lo, hi]; non-finite input keeps the
  // current limits ([-1, 1] before any).
  AxisLimits update(double lo, double hi);
  // Frames so far on which the limits changed (the first one included).
  int changes() const { return changes_; }

 private:
  int patience_;
  double margin_;
  bool any_ = false;
  AxisLimits limits_{-1, 1};
  int narrow_frames_ = 0;  // in a row, data over less than half the range
  int changes_ = 0;
};

}  // namespace tensorscope::plotting
