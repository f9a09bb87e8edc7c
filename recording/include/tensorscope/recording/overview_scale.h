// overview_scale.h — the color scale of an overview (one metric of every tracked tensor
// over the steps): on a log scale, decades lo..hi (10^lo .. 10^hi) around the finite
// positive values (from the smallest, or 2 decades below the 1st percentile when a few lie
// further down, to the largest: a value that explodes is the brightest, the others keep
// their shades); else lo..hi linear (0..1 for a fraction, up to the largest value above 1).
//
// Computed once, here: the overview frames (plotting/overview.h) draw with it, and the
// live view's /api/overview sends it with the data, one scale for every rank and session
// shown (the page only maps values through it).
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <vector>

#include "tensorscope/recording/overview_history.h"

namespace tensorscope::recording {

// valid == false when there is no value to scale.
struct OverviewScale {
  bool log = false;
  double lo = 0;
  double hi = 1;
  bool valid = false;
  // Where `v` falls on the scale: 0..1; < 0 below (including 0 on a log scale), > 1 above.
  double position(double v) const;
};

// The scale of `values` (NaN or Inf: no value) of overview metric `metric`
// (kOverviewMetrics: whether it is drawn on a log scale).
OverviewScale overview_scale(size_t metric, const std::vector<float>& values);
inline OverviewScale overview_scale(const OverviewGrid& grid) { return overview_scale(grid.metric, grid.values); }

}  // namespace tensorscope::recording
