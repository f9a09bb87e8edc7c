// tensor_summary.h — the summary of a CPU tensor a track sends each summarised step
// (numel, NaN/Inf/zero counts, L2 norm, max |x|, mean, std and, against a cast format,
// the low-precision numerics: shared/summary_format.h), computed where the tensor lives,
// and the update ratio of a parameter.
//
// Used inside the training process by the libtorch client and the Python package (both
// hand a TensorRef). CUDA tensors are summarised on the device by the caller (reductions
// queued on the tensor's stream), never here. Thread safety: pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tensor_ref.h"
#include "tensorscope/shared/summary_format.h"

namespace tensorscope {

// Fills the counts and values of `out` (not its name or kind) from the CPU tensor `ref`,
// and its numerics against `cast` unless that is kNone. False (and `why`) for a tensor
// that cannot be read: a CUDA tensor, an unknown dtype.
bool summarize_cpu(const TensorRef& ref, CastFormat cast, TensorSummary* out, std::string* why);

// A parameter's values at its last summarized step, kept by its track for the update
// ratio: a C-order copy of a CPU tensor in the client's own memory (empty until the first).
struct PreviousValues {
  wire::DType dtype = wire::DType::kInvalid;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// summarize_cpu, then the update ratio of `ref` against `*previous` when that holds values
// of ref's dtype and shape (out->has_update_ratio), and ref's values stored in `*previous`
// for the next time: one more pass, a block at a time, that reads `ref` and reads and
// writes `*previous` (no allocation once the parameter's copy exists).
bool summarize_cpu(const TensorRef& ref, CastFormat cast, PreviousValues* previous, TensorSummary* out,
                   std::string* why);

// |now - before| / |before| of two CPU tensors of one shape and dtype (a parameter at two
// summarised steps); 0 when |before| is 0 and they are equal, +Inf when only `before` is 0.
// False (and `why`) when they cannot be compared.
bool update_ratio_cpu(const TensorRef& now, const TensorRef& before, double* ratio, std::string* why);

// A summary of a tensor on a device (CUDA) is a few reductions queued there, the fewest
// that give the summary: the host's cost of a training step bound by kernel launches is
// per operation. The caller (track_summaries.cc for libtorch, tensorscope/_summaries.py
// for Python) reduces the tensor x, as float64, with kept = x whose NaN and +-Inf are set
// to 0, to these float64 values in this order, copies them to the host without waiting,
// and hands them to summary_from_device_values once they have arrived:
//   nonzero         count of x != 0 (NaN and +-Inf count)
//   nonzero_or_nan  the same with +-Inf set to 0
//   nonzero_finite  count of kept != 0
//   mean, var       of kept / divisor over all its elements (population variance, one
//                   Welford pass)
//   max_abs         max |kept|
// then for a parameter's update ratio two more: diff |now - before| and base |before|;
// then against a cast format (its CastFormatInfo limits) three more: min_abs_nonzero (the
// smallest |kept| that is not 0, +Inf when none), above_underflow (count of |kept| >
// underflow_at_most: the host takes the underflows as nonzero_finite less these) and
// overflow (count of |kept| >= overflow_from). Both counts are L0 norms of a threshold()
// of |kept| (which keeps the values above its threshold: the overflow's is the largest
// double below overflow_from): 2 kernels each; the minimum is one of a threshold() that
// turns the zeros to +Inf.
// divisor is 1, except for float64 tensors (`scaled`): max(max_abs, DBL_MIN), so that
// squares cannot overflow.
inline constexpr std::array<const char*, 6> kDeviceSummaryFields = {
    "nonzero", "nonzero_or_nan", "nonzero_finite", "mean", "var", "max_abs"};
inline constexpr std::array<const char*, 2> kDeviceRatioFields = {"diff", "base"};
inline constexpr std::array<const char*, 3> kDeviceNumericsFields = {"min_abs_nonzero", "above_underflow", "overflow"};

// Which values a device summary holds (the caller knows: it queued them).
struct DeviceSummaryLayout {
  bool scaled = false;                  // a float64 tensor's sums, divided by its max |x|
  bool ratio = false;                   // the update ratio's two values follow the summary's
  CastFormat cast = CastFormat::kNone;  // the numerics' three values come last
  size_t count() const {
    return kDeviceSummaryFields.size() + (ratio ? kDeviceRatioFields.size() : 0) +
        (cast != CastFormat::kNone ? kDeviceNumericsFields.size() : 0);
  }
};

// Fills the counts and values of `out` (its update ratio and numerics as `layout` says)
// from `count` device values of a tensor of `numel` elements. mean and std are over the
// finite values (0 when there are none): with no NaN or Inf the device's own; else from
// the sums of all elements, the non-finite ones having added nothing. False (and `why`)
// for a count that is not the layout's or a cast format no table has.
bool summary_from_device_values(const double* values, size_t count, uint64_t numel, const DeviceSummaryLayout& layout,
                                TensorSummary* out, std::string* why);

}  // namespace tensorscope
