// stats_accumulator.h — internal: combines blocks of finite doubles into TensorStats.
//
// Used by compute_stats and summarize in the daemon's workers. Each block is reduced
// with two passes over L1-resident data (sum, then squared deviations from the block
// mean) and merged with Chan's parallel-variance formula. When a value above 2^400
// shows up (float64 only) every later sum is kept in units of 2^600 so nothing
// overflows; min/max stay exact.
// Thread safety: one accumulator per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "element_blocks.h"
#include "tensorscope/plotting/tensor_stats.h"

namespace tensorscope::plotting::internal {

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

}  // namespace tensorscope::plotting::internal
