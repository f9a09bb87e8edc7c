// tensor_summary.h — the summary of a CPU tensor a track sends each summarised step
// (numel, NaN/Inf/zero counts, L2 norm, max |x|, mean, std: shared/summary_format.h),
// computed in one pass where the tensor lives, and the update ratio of a parameter.
//
// Used inside the training process by the libtorch client and the Python package (both
// hand a TensorRef). CUDA tensors are summarised on the device by the caller (reductions
// queued on the tensor's stream), never here. Thread safety: pure functions.
#pragma once

#include <string>

#include "tensor_ref.h"
#include "tensorscope/shared/summary_format.h"

namespace tensorscope {

// Fills the counts and values of `out` (not its name or kind) from the CPU tensor `ref`.
// False (and `why`) for a tensor that cannot be read: a CUDA tensor, an unknown dtype.
bool summarize_cpu(const TensorRef& ref, TensorSummary* out, std::string* why);

// |now - before| / |before| of two CPU tensors of one shape and dtype (a parameter at two
// summarised steps); 0 when |before| is 0 and they are equal, +Inf when only `before` is 0.
// False (and `why`) when they cannot be compared.
bool update_ratio_cpu(const TensorRef& now, const TensorRef& before, double* ratio, std::string* why);

}  // namespace tensorscope
