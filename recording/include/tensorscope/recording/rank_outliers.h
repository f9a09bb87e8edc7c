// rank_outliers.h — the ranks that stand out: in a matrix of one overview metric at one
// step, a row per rank and a column per tracked tensor, the cells far from what the other
// ranks have for that tensor. A straggler's activations, the one rank whose gradients
// diverged, a rank with a NaN: found in one look among hundreds.
//
// Per column, over its finite values (log10 of the positive ones for a log-scale metric),
// the robust z-score of each cell: |x - median| / (1.4826 * MAD), the MAD floored
// (kLogFloor decades; for a linear metric kLinearFloor of the median's magnitude, at least
// kLinearAbsoluteFloor) so that ranks that agree to the last bit do not flag a rounding
// difference. A cell over the threshold is an outlier; so is a non-finite one (score
// +Inf). A column with fewer than kMinRanks finite values flags only its non-finite cells.
//
// Used by the live view's overview of many ranks (view/src/summary_tables.cc). Thread
// safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tensorscope::recording {

inline constexpr double kOutlierThreshold = 5.0;
inline constexpr double kLogFloor = 0.02;  // decades: about 5 %
inline constexpr double kLinearFloor = 0.01;
inline constexpr double kLinearAbsoluteFloor = 1e-3;
inline constexpr size_t kMinRanks = 4;

struct RankOutlier {
  size_t rank = 0;    // row
  size_t column = 0;  // tensor
  double score = 0;   // robust z-score; +Inf for a non-finite cell
};

// `values` (NaN: no value) and `nonfinite` (1: the tensor had a NaN or Inf) are ranks x
// columns, row-major. The outliers by row, then column.
std::vector<RankOutlier> rank_outliers(const std::vector<float>& values, const std::vector<uint8_t>& nonfinite,
                                       size_t ranks, size_t columns, bool log_scale,
                                       double threshold = kOutlierThreshold);

}  // namespace tensorscope::recording
