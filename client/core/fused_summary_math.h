// fused_summary_math.h — the arithmetic of a fused summary pass (every field of a tensor's
// summary in one read of its elements), written once for the host and a CUDA device: a
// partial summary of some elements, the addition of one element, the merge of two
// partials (threads, blocks, chunks of one tensor, in any order), and the values a
// finished partial gives in tensor_summary.h's device layout (kDeviceSummaryFields, then
// the update ratio's and the numerics' when asked), so that summary_from_device_values
// turns them into a summary as it does the values of the per-tensor reductions.
//
// The definitions are the layout's: kept is x with NaN and ±Inf set to 0; mean and var
// (population) are of kept / divisor over all elements, merged by Chan's formula; the
// counts are exact in double up to 2^53 elements. A scaled partial (float64 tensors)
// holds its sums in units of its own largest |kept|, and a merge rescales the smaller to
// the larger, so squares cannot overflow and the divisor is the tensor's max |kept|.
//
// Used by the fused summary kernel (the GPU) and its tests (the same functions on the
// host, over the same partition of the elements). Thread safety: pure functions.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TENSORSCOPE_HOST_DEVICE __host__ __device__
#else
#define TENSORSCOPE_HOST_DEVICE
#endif

namespace tensorscope::fused {

// The partition of a pass: a tensor is cut into chunks of kChunkElements, a chunk is one
// block of kThreads threads, each taking every kThreads-th element of it.
inline constexpr uint64_t kChunkElements = 16384;
inline constexpr int kThreads = 256;

inline constexpr double kInfinity = __builtin_huge_val();
inline constexpr double kSmallestNormal = 2.2250738585072014e-308;  // DBL_MIN

// What a pass measures besides the plain summary.
struct SummaryAsk {
  bool scaled = false;  // float64 elements: sums in units of the largest |kept|
  bool ratio = false;   // against `before`: |x - before|^2 and |before|^2
  bool keep = false;    // ratio: each element of x is copied over before's once read (the next ratio's)
  bool cast = false;    // the numerics against these limits
  double underflow_at_most = 0;
  double overflow_from = 0;
};

struct SummaryPartial {
  double count = 0;  // elements
  double mean = 0;   // of kept / scale
  double m2 = 0;     // sum of squared deviations from mean, of kept / scale
  double scale = 1;  // scaled: the largest |kept| of these elements (at least DBL_MIN)
  double max_abs = 0;
  double nonzero = 0;         // x != 0 (NaN and ±Inf count)
  double nonzero_or_nan = 0;  // the same without ±Inf
  double nonzero_finite = 0;  // kept != 0
  double diff_squares = 0;    // ratio: sum of (x - before)^2
  double base_squares = 0;    // ratio: sum of before^2
  double min_abs_nonzero = kInfinity;
  double above_underflow = 0;  // cast: |kept| > underflow_at_most
  double overflow = 0;         // cast: |kept| >= overflow_from
};

TENSORSCOPE_HOST_DEVICE inline bool is_finite(double x) { return x - x == 0; }

TENSORSCOPE_HOST_DEVICE inline float float_of_bits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

// An IEEE half's value (exact in float).
TENSORSCOPE_HOST_DEVICE inline float half_value(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float v = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
    return sign != 0 ? -v : v;
  }
  if (exponent == 31) return float_of_bits(sign | 0x7f800000u | (mantissa << 13));  // Inf, NaN
  return float_of_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// A bfloat16's value: the upper half of a float.
TENSORSCOPE_HOST_DEVICE inline float bfloat16_value(uint16_t b) {
  return float_of_bits(static_cast<uint32_t>(b) << 16);
}

// Element `i` of `data`, of wire::DType `dtype` (its value: 1 float32, 2 float64,
// 3 float16, 4 bfloat16, 5 int8, 6 int16, 7 int32, 8 int64, 9 uint8, 10 bool), as a double;
// 0 for any other.
TENSORSCOPE_HOST_DEVICE inline double element_at(const void* data, uint8_t dtype, uint64_t i) {
  switch (dtype) {
    case 1: return static_cast<const float*>(data)[i];
    case 2: return static_cast<const double*>(data)[i];
    case 3: return half_value(static_cast<const uint16_t*>(data)[i]);
    case 4: return bfloat16_value(static_cast<const uint16_t*>(data)[i]);
    case 5: return static_cast<const int8_t*>(data)[i];
    case 6: return static_cast<const int16_t*>(data)[i];
    case 7: return static_cast<const int32_t*>(data)[i];
    case 8: return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case 9: return static_cast<const uint8_t*>(data)[i];
    case 10: return static_cast<const uint8_t*>(data)[i] != 0 ? 1.0 : 0.0;
    default: return 0;
  }
}

// Copies element `i` of `from` over element `i` of `to` (the same dtype, as element_at
// numbers them).
TENSORSCOPE_HOST_DEVICE inline void copy_element(void* to, const void* from, uint8_t dtype, uint64_t i) {
  switch (dtype) {
    case 2:
    case 8: static_cast<uint64_t*>(to)[i] = static_cast<const uint64_t*>(from)[i]; break;
    case 1:
    case 7: static_cast<uint32_t*>(to)[i] = static_cast<const uint32_t*>(from)[i]; break;
    case 3:
    case 4:
    case 6: static_cast<uint16_t*>(to)[i] = static_cast<const uint16_t*>(from)[i]; break;
    case 5:
    case 9:
    case 10: static_cast<uint8_t*>(to)[i] = static_cast<const uint8_t*>(from)[i]; break;
    default: break;
  }
}

// The tensor a chunk belongs to: `first_chunk` holds each tensor's first chunk, ascending,
// and the total last (count + 1 entries); the t with first_chunk[t] <= chunk <
// first_chunk[t + 1] (an empty tensor has none).
TENSORSCOPE_HOST_DEVICE inline int chunk_owner(const uint64_t* first_chunk, int count, uint64_t chunk) {
  int lo = 0, hi = count;  // first_chunk[lo] <= chunk < first_chunk[hi]
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    if (first_chunk[mid] <= chunk) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}
TENSORSCOPE_HOST_DEVICE inline double magnitude(double x) { return x < 0 ? -x : x; }

// The counts, the largest |kept|, the numerics and the ratio's sums of one element; its
// contribution to mean and m2 is add_moment's (a scaled partial needs its scale first).
TENSORSCOPE_HOST_DEVICE inline void add_counts(SummaryPartial& p, double x, double before, const SummaryAsk& ask) {
  const bool finite = is_finite(x);
  const bool nan = x != x;
  p.nonzero += x != 0 ? 1 : 0;
  p.nonzero_or_nan += (nan || (finite && x != 0)) ? 1 : 0;
  const double kept = finite ? x : 0;
  const double a = magnitude(kept);
  p.nonzero_finite += a != 0 ? 1 : 0;
  p.max_abs = a > p.max_abs ? a : p.max_abs;
  if (ask.ratio) {
    const double d = x - before;
    p.diff_squares += d * d;
    p.base_squares += before * before;
  }
  if (ask.cast) {
    if (a != 0 && a < p.min_abs_nonzero) p.min_abs_nonzero = a;
    p.above_underflow += a > ask.underflow_at_most ? 1 : 0;
    p.overflow += a >= ask.overflow_from ? 1 : 0;
  }
}

// Welford's step for one element, kept / p.scale.
TENSORSCOPE_HOST_DEVICE inline void add_moment(SummaryPartial& p, double x) {
  const double v = (is_finite(x) ? x : 0) / p.scale;
  p.count += 1;
  const double d = v - p.mean;
  p.mean += d / p.count;
  p.m2 += d * (v - p.mean);
}

// One element, for an unscaled partial (the scale stays 1). A scaled partial takes its
// elements twice: add_counts over them, then p.scale = scale_for(p.max_abs), then
// add_moment over them.
TENSORSCOPE_HOST_DEVICE inline void add_element(SummaryPartial& p, double x, double before, const SummaryAsk& ask) {
  add_counts(p, x, before, ask);
  add_moment(p, x);
}

// `p`'s mean and m2 in units of `scale` (>= p.scale).
TENSORSCOPE_HOST_DEVICE inline void rescale(SummaryPartial& p, double scale) {
  if (scale == p.scale) return;
  const double r = p.scale / scale;
  p.mean *= r;
  p.m2 *= r * r;
  p.scale = scale;
}

// `b` merged into `a` (Chan et al.); the larger scale is kept (an empty partial's does
// not count).
TENSORSCOPE_HOST_DEVICE inline void merge(SummaryPartial& a, SummaryPartial b) {
  if (b.count > 0) {
    if (a.count == 0) {
      a.mean = b.mean;
      a.m2 = b.m2;
      a.scale = b.scale;
    } else {
      const double scale = a.scale > b.scale ? a.scale : b.scale;
      rescale(a, scale);
      rescale(b, scale);
      const double n = a.count + b.count;
      const double d = b.mean - a.mean;
      a.mean += d * (b.count / n);
      a.m2 += b.m2 + d * d * (a.count * b.count / n);
    }
    a.count += b.count;
  }
  a.max_abs = b.max_abs > a.max_abs ? b.max_abs : a.max_abs;
  a.nonzero += b.nonzero;
  a.nonzero_or_nan += b.nonzero_or_nan;
  a.nonzero_finite += b.nonzero_finite;
  a.diff_squares += b.diff_squares;
  a.base_squares += b.base_squares;
  a.min_abs_nonzero = b.min_abs_nonzero < a.min_abs_nonzero ? b.min_abs_nonzero : a.min_abs_nonzero;
  a.above_underflow += b.above_underflow;
  a.overflow += b.overflow;
}

// The scale a scaled partial of elements whose largest |kept| is `max_abs` takes.
TENSORSCOPE_HOST_DEVICE inline double scale_for(double max_abs) {
  return max_abs > kSmallestNormal ? max_abs : kSmallestNormal;
}

// How many values finish() writes for `ask` (DeviceSummaryLayout::count()).
TENSORSCOPE_HOST_DEVICE inline int value_count(const SummaryAsk& ask) {
  return 6 + (ask.ratio ? 2 : 0) + (ask.cast ? 3 : 0);
}

// The device layout's values of a finished partial (of a whole tensor): nonzero,
// nonzero_or_nan, nonzero_finite, mean, var, max_abs; then diff, base; then
// min_abs_nonzero, above_underflow, overflow. Unscaled partials are in units of 1.
TENSORSCOPE_HOST_DEVICE inline void finish(const SummaryPartial& p, const SummaryAsk& ask, double* out) {
  SummaryPartial q = p;
  if (ask.scaled) rescale(q, scale_for(q.max_abs));
  out[0] = q.nonzero;
  out[1] = q.nonzero_or_nan;
  out[2] = q.nonzero_finite;
  out[3] = q.count > 0 ? q.mean : 0;
  out[4] = q.count > 0 ? q.m2 / q.count : 0;
  out[5] = q.max_abs;
  int i = 6;
  if (ask.ratio) {
    out[i++] = sqrt(q.diff_squares);
    out[i++] = sqrt(q.base_squares);
  }
  if (ask.cast) {
    out[i++] = q.min_abs_nonzero;
    out[i++] = q.above_underflow;
    out[i++] = q.overflow;
  }
}

}  // namespace tensorscope::fused
