// tensor_stats.h — summary statistics of a tensor (counts, mean, std, min, max), and the
// block accumulator they are computed with.
//
// Used by the daemon's worker processes for every frame (the statistics line, the
// `stats` render mode), by the histogram range choice and by the statistics table. One
// pass over the data; mean/std are numerically careful: each block is reduced with two
// passes over L1-resident data (sum, then squared deviations from the block mean) and
// merged with Chan's parallel-variance formula; when a value above 2^400 shows up
// (float64 only) every later sum is kept in units of 2^600, so 1e38 floats never
// overflow to Inf; min/max stay exact.
// Thread safety: compute_stats is pure; one StatsAccumulator per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "tensorscope/tensor/element_blocks.h"
#include "tensorscope/tensor/tensor_view.h"

namespace tensorscope::tensor {

struct TensorStats {
  uint64_t count = 0;         // all elements (numel)
  uint64_t finite_count = 0;  // elements that are neither NaN nor +-Inf
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

// What a cast to a narrower format loses (shared/cast_formats.h gives the formats' values):
// a non-zero finite |x| <= underflow_at_most becomes zero, a finite |x| >= overflow_from
// becomes Inf or NaN.
struct CastLimits {
  double underflow_at_most = 0;
  double overflow_from = std::numeric_limits<double>::infinity();
};

// What a client summarises of a tracked tensor each step (shared/summary_format.h): the
// counts, and over the finite values the mean, population std, L2 norm and largest |x|
// (all 0 when there are none). In the training process, on every step: float32 (the
// common case) takes one vectorised pass with double accumulators per lane, the variance
// taken around the first finite value (so |mean| >> std loses nothing); other types go
// through compute_stats' blocks. With `cast`, also the smallest non-zero finite |x| (0
// when there is none) and the values a cast would lose (float32: a second vectorised
// pass, on the bits).
struct SummaryStats {
  uint64_t count = 0;
  uint64_t finite_count = 0;
  uint64_t nan_count = 0;
  uint64_t inf_count = 0;  // +Inf and -Inf
  uint64_t zero_count = 0;
  double mean = 0;
  double std = 0;
  double l2 = 0;
  double max_abs = 0;
  double min_abs_nonzero = 0;  // with `cast` only
  uint64_t underflow_count = 0;
  uint64_t overflow_count = 0;
};
SummaryStats compute_summary_stats(const TensorView& view, const CastLimits* cast = nullptr);

// Combines blocks of finite doubles (for_each_finite_block) into TensorStats.
class StatsAccumulator {
 public:
  // `values` are finite.
  void add_block(const double* values, size_t n);
  TensorStats finish(uint64_t count, const NonFiniteCounts& non_finite) const;

 private:
  uint64_t n_ = 0;
  double mean_ = 0;  // in units of 2^kScaleExponent when scaled_
  double m2_ = 0;    // sum of squared deviations, in units of 2^(2*kScaleExponent)
  double min_ = std::numeric_limits<double>::infinity();
  double max_ = -std::numeric_limits<double>::infinity();
  bool scaled_ = false;
};

}  // namespace tensorscope::tensor
