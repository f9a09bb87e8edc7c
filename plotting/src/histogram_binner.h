// histogram_binner.h — internal: the hot loop that bins blocks of finite doubles.
//
// Used by compute_histogram and summarize in the daemon's workers. Four interleaved
// count arrays (lane_counts.h; slot 0 underflow, 1..bins the bins, bins+1 overflow) hide
// the store-to-load latency when neighbouring elements hit the same bin; the bin index
// is computed branch-free and clamped, so no input value can index out of bounds.
// Thread safety: one binner per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensorscope/tensor/element_blocks.h"
#include "tensorscope/plotting/histogram.h"

namespace tensorscope::plotting::internal {

class HistogramBinner {
 public:
  // `range` must be valid().
  explicit HistogramBinner(const HistogramRange& range);
  // `values` are finite.
  void add_block(const double* values, size_t n);
  Histogram finish(const tensor::NonFiniteCounts& non_finite) const;

 private:
  // Bins values already on the axis (symlog applied when the range is symlog).
  void add_axis_block(const double* values, size_t n);

  HistogramRange range_;
  bool symlog_;
  double lo_, hi_;  // the range on the axis
  double scale_;
  size_t stride_;                // bins + 2
  std::vector<uint64_t> lanes_;  // kCountLanes * stride_ (lane_counts.h)
};

}  // namespace tensorscope::plotting::internal
