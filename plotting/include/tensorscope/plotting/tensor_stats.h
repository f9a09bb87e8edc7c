// tensor_stats.h — summary statistics of a tensor (counts, mean, std, min, max).
//
// Used by the daemon's worker processes for every frame (the statistics line, the
// `stats` render mode) and by the histogram range choice. One pass over the data;
// mean/std are numerically careful (block-wise two-pass sums combined with Chan's
// formula, rescaled for float64 magnitudes near DBL_MAX, so 1e38 floats never
// overflow to Inf).
// Thread safety: pure function, thread-safe.
#pragma once

#include <cstdint>

#include "tensorscope/plotting/tensor_view.h"

namespace tensorscope::plotting {

struct TensorStats {
  uint64_t count = 0;          // all elements (numel)
  uint64_t finite_count = 0;   // elements that are neither NaN nor +-Inf
  uint64_t nan_count = 0;
  uint64_t pos_inf_count = 0;
  uint64_t neg_inf_count = 0;
  // Over the finite values only; population std. NaN when finite_count == 0.
  double mean = 0;
  double std = 0;
  double min = 0;
  double max = 0;
};

// Integer and bool elements are all finite (bool is 0/1). An invalid or empty view
// gives count == 0 and NaN mean/std/min/max.
TensorStats compute_stats(const TensorView& view);

}  // namespace tensorscope::plotting
