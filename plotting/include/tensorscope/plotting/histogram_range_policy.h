// histogram_range_policy.h — when a histogram stream takes a new range.
//
// Used by AdaptiveHistogram (adaptive_histogram.h) in the daemon's worker processes, one
// per histogram stream. A fixed range keeps frames comparable, but goes wrong when values
// shrink or grow 10x over training (learning-rate decay, warm-up, divergence). The policy
// looks at each frame's exact histogram over the current range and asks for a new range
// when the body no longer fits: the central 90 % of the values spreads over too few bins
// (values shrank), or too many values fall outside the range (values grew or moved). It
// asks at most once every `min_frames` frames, so a video's axes stay still between
// changes, except when most values are off the plot: then at once, since a frame that
// shows nothing is never right. Pure bookkeeping: no clock, no data, unit-tested alone.
// Thread safety: a plain value, not synchronised.
#pragma once

#include <string>

#include "tensorscope/plotting/histogram.h"

namespace tensorscope::plotting {

struct RerangeRules {
  int min_frames = 10;          // frames between two re-ranges (>= 1)
  double min_spread = 0.25;     // central 90 % over fewer of the bins: re-range
  double max_outside = 0.1;     // more of the finite values outside the range: re-range
  double urgent_outside = 0.5;  // ... at once, whatever min_frames
};

class HistogramRangePolicy {
 public:
  explicit HistogramRangePolicy(RerangeRules rules = {});

  struct Decision {
    bool rerange = false;
    std::string reason;  // "values shrank", "values grew", "values moved"; empty on keep
  };

  // A frame drawn over the current range; counts frames since the last new range.
  Decision on_frame(const Histogram& hist);
  // A new range was chosen (or one was tried and came out the same): the next re-range
  // waits min_frames frames again.
  void took_range();

 private:
  RerangeRules rules_;
  int frames_ = 0;  // since the last took_range()
};

}  // namespace tensorscope::plotting
