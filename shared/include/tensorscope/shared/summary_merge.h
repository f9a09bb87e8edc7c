// summary_merge.h — the summary of a tensor from the summaries of parts of it that
// together hold each element once: ranges of a large tensor summarized on several threads
// (client/core/tensor_summary.cc), the shards of a DTensor summarized on several ranks
// (recording/shard_merge.h). Counts are added; mean and std are merged over the finite
// values (Chan's formula, in units of the larger spread: no overflow near the float64
// limit); L2 is the norm of the parts' norms; max |x| the larger, the smallest non-zero
// |x| the smaller; the numerics' counts added when both parts have them. The update ratio
// is not merged here (its caller knows each part's previous norm: merged_update_ratio).
//
// Thread safety: pure functions.
#pragma once

#include <vector>

#include "tensorscope/shared/summary_format.h"

namespace tensorscope {

// `a` and `b` merged; name, kind and shard placement from `a`, no update ratio.
TensorSummary merge_summaries(const TensorSummary& a, const TensorSummary& b);

// The update ratio |now - before| / |before| of a whole tensor from its parts': each
// part's ratio, its L2 norm at the previous summarized step and now. 0 when nothing
// changed, +Inf when the before norms are all 0 and a part is not, NaN when a ratio or a
// norm is NaN.
struct RatioPart {
  double ratio = 0;
  double before_l2 = 0;
  double now_l2 = 0;
};
double merged_update_ratio(const std::vector<RatioPart>& parts);

}  // namespace tensorscope
