// value_sketch.h — approximate quantiles of a tensor's finite values in one pass.
//
// Used by the daemon's worker processes when a histogram stream picks its range
// (histogram_range.h): the range comes from the distribution's body (percentiles), not
// its extremes. Each finite value lands in one of 4,096 buckets keyed by the top 12 bits
// of its float32 form in sign-magnitude order (sign, 8 exponent bits, 3 mantissa bits),
// so every bucket spans at most 1/8 of its values' magnitude: a quantile is exact to
// about 6 % relative error at any scale (1e-30 or 1e30 alike), and heavy tails cost
// nothing. Zeros, the minimum and the maximum are counted exactly. Holds 160 KiB.
// Thread safety: a plain value, not synchronised (const reads may fill a cache).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensorscope/tensor/tensor_view.h"

namespace tensorscope::plotting {

class ValueSketch {
 public:
  static constexpr int kBuckets = 4096;

  // `values` are finite.
  void add_block(const double* values, size_t n);

  uint64_t count() const { return count_; }  // finite values seen
  uint64_t zeros() const { return zeros_; }  // of them exactly 0 (either sign)
  double min() const { return min_; }        // NaN when count() == 0
  double max() const { return max_; }

  // The p-quantile (p in [0, 1], clamped) of the values: interpolated inside its
  // bucket and clamped to [min(), max()]; p = 0 and p = 1 give min() and max() exactly.
  // NaN when count() == 0.
  double quantile(double p) const;
  // The p-quantile of |x| over the values that are not 0; NaN when all are 0.
  double nonzero_abs_quantile(double p) const;

 private:
  // Counts per bucket, the four lanes of add_block summed (on first use after a change).
  const std::array<uint64_t, kBuckets>& buckets() const;

  std::vector<uint64_t> lanes_ = std::vector<uint64_t>(4 * kBuckets, 0);  // 4 lanes of kBuckets
  mutable std::array<uint64_t, kBuckets> buckets_{};
  mutable bool merged_ = true;
  uint64_t count_ = 0;
  uint64_t zeros_ = 0;
  double min_ = 0;
  double max_ = 0;
};

// The sketch of the finite values of `view` (empty for an invalid or empty view).
ValueSketch sketch_values(const tensor::TensorView& view);

}  // namespace tensorscope::plotting
