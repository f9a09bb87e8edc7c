// tensor_summary.cc — see tensor_summary.h.
#include "tensor_summary.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "summary_threads.h"
#include "tensorscope/shared/summary_merge.h"
#include "tensorscope/shared/wire_element_type.h"
#include "tensorscope/tensor/element_blocks.h"
#include "tensorscope/tensor/tensor_stats.h"

namespace tensorscope {
namespace {

// `ref` as a contiguous view: its own memory, or a C-order copy kept in `copy`.
bool contiguous_view(const TensorRef& ref, std::vector<uint8_t>* copy, tensor::TensorView* view, std::string* why) {
  if (std::string refusal = tensor_ref_refusal(ref); !refusal.empty()) {
    *why = refusal;
    return false;
  }
  if (ref.device != DeviceType::kCpu) {
    *why = "not a CPU tensor";
    return false;
  }
  view->type = wire::element_type(ref.dtype);
  view->shape.assign(ref.shape, ref.shape + ref.ndim);
  view->data = ref.data;
  if (!is_c_contiguous(ref)) {
    const uint64_t bytes = element_count(ref) * wire::dtype_size(ref.dtype);
    copy->resize(bytes);
    copy_strided(ref, copy->data(), bytes);
    view->data = copy->data();
  }
  return true;
}

// A tensor of at least twice this many elements is summarized in ranges of at least this
// many on the summary threads (4 MB of float32: a few hundred microseconds of one core).
constexpr size_t kParallelRange = size_t{1} << 20;

// Where the ranges of a tensor of `n` elements begin, for the summary threads (at[i] to
// at[i + 1]; one range for a small tensor).
std::vector<size_t> ranges_of(size_t n) {
  return split_ranges(n, summary_threads().threads(), kParallelRange, tensor::kOrderedBlockElements);
}

// The summary fields of `out` from `s`, against `cast` (`info`: its table entry, or null).
void fill(const tensor::SummaryStats& s, CastFormat cast, const CastFormatInfo* info, TensorSummary* out) {
  out->numel = s.count;
  out->nan_count = s.nan_count;
  out->inf_count = s.inf_count;
  out->zero_count = s.zero_count;
  out->l2 = s.l2;
  out->max_abs = s.max_abs;
  out->mean = s.mean;
  out->std = s.std;
  out->cast_format = info != nullptr ? cast : CastFormat::kNone;
  out->underflow_count = s.underflow_count;
  out->overflow_count = s.overflow_count;
  out->min_abs_nonzero = s.min_abs_nonzero;
}

// The summary of `view` (a contiguous CPU tensor) into `out`, as summarize_cpu says: a
// large tensor's ranges on the summary threads, merged.
bool summarize_view(const tensor::TensorView& view, CastFormat cast, TensorSummary* out, std::string* why) {
  const CastFormatInfo* info = cast_format_info(cast);
  if (info == nullptr && cast != CastFormat::kNone) {
    *why = "cast format " + std::to_string(static_cast<int>(cast)) + " is not one of tensorscope's";
    return false;
  }
  const tensor::CastLimits limits{info != nullptr ? info->underflow_at_most : 0.0,
                                  info != nullptr ? info->overflow_from : 0.0};
  const tensor::CastLimits* asked = info != nullptr ? &limits : nullptr;
  const std::vector<size_t> at = ranges_of(static_cast<size_t>(std::max<int64_t>(view.numel(), 0)));
  if (at.size() <= 2) {
    fill(tensor::compute_summary_stats(view, asked), cast, info, out);
    return true;
  }
  std::vector<TensorSummary> parts(at.size() - 1, *out);
  const size_t element = tensor::element_size(view.type);
  summary_threads().run(parts.size(), [&](size_t i) {
    const tensor::TensorView range{
        static_cast<const uint8_t*>(view.data) + at[i] * element, view.type, {static_cast<int64_t>(at[i + 1] - at[i])}};
    fill(tensor::compute_summary_stats(range, asked), cast, info, &parts[i]);
  });
  *out = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) *out = merge_summaries(*out, parts[i]);
  return true;
}

// |now - before| / |before| from the sums of squares of a parameter's change and of its
// previous values: 0 when both are 0, +Inf when only the previous values are.
double ratio_of(double diff, double base) {
  if (base == 0) return diff == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(diff) / std::sqrt(base);
}

// The ratio's sums over `n` elements of `type` at `now` and `before`, a block at a time;
// with `keep` (before's own memory, or null), each block of `now` is then copied there
// while it is still in the cache.
void range_ratio_sums(const uint8_t* now, const uint8_t* before, uint8_t* keep, tensor::ElementType type, size_t n,
                      double* diff, double* base) {
  std::vector<double> x(std::min(n, tensor::kOrderedBlockElements)), y(x.size());
  const size_t element = tensor::element_size(type);
  for (size_t at = 0; at < n; at += x.size()) {
    const size_t k = std::min(x.size(), n - at);
    tensor::convert_to_double(now + at * element, type, k, x.data());
    tensor::convert_to_double(before + at * element, type, k, y.data());
    for (size_t i = 0; i < k; ++i) {
      const double d = x[i] - y[i];
      *diff += d * d;
      *base += y[i] * y[i];
    }
    if (keep != nullptr) std::memcpy(keep + at * element, now + at * element, k * element);
  }
}

// range_ratio_sums over the whole tensor, its ranges on the summary threads.
void ratio_sums(const uint8_t* now, const uint8_t* before, uint8_t* keep, tensor::ElementType type, size_t n,
                double* diff, double* base) {
  const std::vector<size_t> at = ranges_of(n);
  std::vector<std::array<double, 2>> sums(at.size() - 1, {0.0, 0.0});
  const size_t element = tensor::element_size(type);
  summary_threads().run(sums.size(), [&](size_t i) {
    const size_t from = at[i] * element;
    range_ratio_sums(now + from, before + from, keep != nullptr ? keep + from : nullptr, type, at[i + 1] - at[i],
                     &sums[i][0], &sums[i][1]);
  });
  for (const auto& s : sums) {
    *diff += s[0];
    *base += s[1];
  }
}

}  // namespace

bool summarize_cpu(const TensorRef& ref, CastFormat cast, TensorSummary* out, std::string* why) {
  return summarize_cpu(ref, cast, nullptr, out, why);
}

bool summarize_cpu(const TensorRef& ref, CastFormat cast, PreviousValues* previous, TensorSummary* out,
                   std::string* why) {
  std::vector<uint8_t> copy;
  tensor::TensorView now;
  if (!contiguous_view(ref, &copy, &now, why) || !summarize_view(now, cast, out, why)) return false;
  out->has_update_ratio = false;
  if (previous == nullptr) return true;
  const size_t element = wire::dtype_size(ref.dtype);
  const size_t n = static_cast<size_t>(now.numel());
  const auto* data = static_cast<const uint8_t*>(now.data);
  if (previous->dtype == ref.dtype && previous->shape == now.shape && previous->bytes.size() == n * element) {
    double diff = 0, base = 0;
    ratio_sums(data, previous->bytes.data(), previous->bytes.data(), now.type, n, &diff, &base);
    out->has_update_ratio = true;
    out->update_ratio = ratio_of(diff, base);
  } else {  // the first time, or the parameter changed shape or dtype: no ratio yet
    previous->dtype = ref.dtype;
    previous->shape = now.shape;
    previous->bytes.assign(data, data + n * element);
  }
  return true;
}

bool update_ratio_cpu(const TensorRef& now, const TensorRef& before, double* ratio, std::string* why) {
  std::vector<uint8_t> now_copy, before_copy;
  tensor::TensorView a, b;
  if (!contiguous_view(now, &now_copy, &a, why) || !contiguous_view(before, &before_copy, &b, why)) return false;
  if (a.type != b.type || a.shape != b.shape) {
    *why = "the parameter changed shape or dtype";
    return false;
  }
  double diff = 0, base = 0;
  ratio_sums(static_cast<const uint8_t*>(a.data), static_cast<const uint8_t*>(b.data), nullptr, a.type,
             static_cast<size_t>(a.numel()), &diff, &base);
  *ratio = ratio_of(diff, base);
  return true;
}

bool summary_from_device_values(const double* values, size_t count, uint64_t numel, const DeviceSummaryLayout& layout,
                                TensorSummary* out, std::string* why) {
  constexpr size_t kPlain = kDeviceSummaryFields.size();
  if (count != layout.count()) {
    *why = "a device summary of " + std::to_string(count) + " values (" + std::to_string(layout.count()) + " expected)";
    return false;
  }
  if (layout.cast != CastFormat::kNone && cast_format_info(layout.cast) == nullptr) {
    *why = "a device summary against cast format " + std::to_string(static_cast<int>(layout.cast)) +
        ", which is not one of tensorscope's";
    return false;
  }
  const bool scaled = layout.scaled;
  // A count within [0, at_most] (clamped in double: NaN, Inf or any value from Python too).
  const auto counted = [](double v, uint64_t at_most) {
    return v > 0 ? static_cast<uint64_t>(std::min(v, static_cast<double>(at_most))) : uint64_t{0};
  };
  const uint64_t nonzero = counted(values[0], numel);
  const uint64_t nonzero_or_nan = counted(values[1], nonzero);
  const uint64_t nonzero_finite = counted(values[2], nonzero_or_nan);
  out->numel = numel;
  out->nan_count = nonzero_or_nan - nonzero_finite;
  out->inf_count = nonzero - nonzero_or_nan;
  out->zero_count = numel - nonzero;
  const uint64_t non_finite = out->nan_count + out->inf_count;
  const uint64_t finite = numel - non_finite;
  const double mean_all = values[3], var_all = std::max(values[4], 0.0), max_abs = values[5];
  const double divisor = scaled ? std::max(max_abs, std::numeric_limits<double>::min()) : 1.0;
  const double n = static_cast<double>(numel);
  const double squares = n * (var_all + mean_all * mean_all);  // sum of kept^2, in units of divisor^2
  out->max_abs = finite > 0 ? max_abs : 0.0;
  out->l2 = finite > 0 ? std::sqrt(squares) * divisor : 0.0;
  out->mean = 0;
  out->std = 0;
  if (finite == numel) {
    out->mean = mean_all * divisor;
    out->std = std::sqrt(var_all) * divisor;
  } else if (finite > 0) {
    // With NaN or Inf present, from the sums of all elements (the non-finite ones added
    // nothing): this cancels when |mean| >> std, which only the anomaly's steps see.
    const double c = static_cast<double>(finite);
    const double mean = n * mean_all / c;
    out->mean = mean * divisor;
    out->std = std::sqrt(std::max(squares / c - mean * mean, 0.0)) * divisor;
  }
  out->has_update_ratio = layout.ratio;
  if (out->has_update_ratio) {
    const double diff = values[kPlain], base = values[kPlain + 1];
    out->update_ratio = base > 0 ? diff / base : (diff == 0 ? 0.0 : std::numeric_limits<double>::infinity());
  }
  out->cast_format = layout.cast;
  out->underflow_count = out->overflow_count = 0;
  out->min_abs_nonzero = 0;
  if (layout.cast != CastFormat::kNone) {
    const double* numerics = values + kPlain + (layout.ratio ? kDeviceRatioFields.size() : 0);
    out->min_abs_nonzero = std::isfinite(numerics[0]) && numerics[0] > 0 ? numerics[0] : 0.0;
    out->underflow_count = nonzero_finite - counted(numerics[1], nonzero_finite);
    out->overflow_count = counted(numerics[2], nonzero_finite - out->underflow_count);
  }
  return true;
}

}  // namespace tensorscope
