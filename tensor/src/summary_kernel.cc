// summary_kernel.cc — see summary_kernel.h. Finiteness and |x| are read from the bits, so
// no NaN or Inf reaches a sum and the largest |x| is an integer maximum (non-negative
// floats order as their bits do). On x86-64 with AVX2 and FMA (checked once, at the first
// call) one pass computes every quantity, 16 elements an iteration in two sets of
// accumulators, without masks (a block with a NaN or Inf, seen in its largest magnitude,
// is read again with them); elsewhere each quantity has a loop of its own, simple enough
// for the compiler to vectorise (the block is in L1 by the second).
#include "summary_kernel.h"

#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TENSORSCOPE_SUMMARY_AVX2 1
#endif

namespace tensorscope::tensor::detail {
namespace {

constexpr int32_t kMagnitude = 0x7fffffff;
constexpr int32_t kLargestFinite = 0x7f7fffff;

// float32_cast_block's portable loop: integer compares combined without branches (a
// branch on the zeros of a ReLU's output mispredicts half the time).
__attribute__((always_inline)) inline Float32CastBlock cast_block(const float* p, size_t n, int32_t underflow_bits,
                                                                  int32_t overflow_bits) {
  int32_t smallest = kMagnitude, under = 0, over = 0;
  const auto under_limit = static_cast<uint32_t>(underflow_bits);
  for (size_t i = 0; i < n; ++i) {
    int32_t bits;
    std::memcpy(&bits, p + i, sizeof(bits));
    const int32_t magnitude = bits & kMagnitude;
    // 1 <= magnitude <= limit, as one unsigned compare (magnitude 0 wraps to the top).
    const auto above_zero = static_cast<uint32_t>(magnitude - 1);
    const int32_t candidate = above_zero < static_cast<uint32_t>(kLargestFinite) ? magnitude : kMagnitude;
    smallest = candidate < smallest ? candidate : smallest;
    under += above_zero < under_limit ? 1 : 0;
    over += static_cast<int32_t>(magnitude >= overflow_bits) & static_cast<int32_t>(magnitude <= kLargestFinite);
  }
  Float32CastBlock out;
  out.min_nonzero = smallest;
  out.underflow = static_cast<uint32_t>(under);
  out.overflow = static_cast<uint32_t>(over);
  return out;
}

}  // namespace

// The portable kernel: a loop per quantity.
Float32Block float32_block_loops(const float* p, size_t n, float shift) {
  Float32Block out;
  float sum = 0, centred = 0, squares = 0;
  for (size_t i = 0; i < n; ++i) {
    int32_t bits;
    std::memcpy(&bits, p + i, sizeof(bits));
    const bool good = (bits & kMagnitude) <= kLargestFinite;
    const float v = good ? p[i] : 0.0f;
    const float d = good ? p[i] - shift : 0.0f;
    sum += d;
    centred += d * d;
    squares += v * v;
  }
  int32_t top = 0;
  for (size_t i = 0; i < n; ++i) {
    int32_t bits;
    std::memcpy(&bits, p + i, sizeof(bits));
    const int32_t magnitude = bits & kMagnitude;
    const int32_t kept = magnitude <= kLargestFinite ? magnitude : 0;
    top = top > kept ? top : kept;
  }
  int32_t zeros = 0, finite = 0;
  for (size_t i = 0; i < n; ++i) {
    int32_t bits;
    std::memcpy(&bits, p + i, sizeof(bits));
    const int32_t magnitude = bits & kMagnitude;
    zeros += magnitude == 0 ? 1 : 0;
    finite += magnitude <= kLargestFinite ? 1 : 0;
  }
  out.sum = sum;
  out.centred = centred;
  out.squares = squares;
  std::memcpy(&out.max_abs, &top, sizeof(top));
  out.zeros = static_cast<uint32_t>(zeros);
  out.finite = static_cast<uint32_t>(finite);
  return out;
}

#ifdef TENSORSCOPE_SUMMARY_AVX2
namespace {

struct Lanes {
  __m256 sum, centred, squares;
  __m256i top, zeros, bad;  // zeros and bad count down (a compare gives -1)
};

__attribute__((target("avx2,fma"), always_inline)) inline void step8(Lanes& l, const float* p, __m256 shift) {
  const __m256 x = _mm256_loadu_ps(p);
  const __m256i magnitude = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(kMagnitude));
  const __m256i bad = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(kLargestFinite));
  const __m256 bad_ps = _mm256_castsi256_ps(bad);
  const __m256 v = _mm256_andnot_ps(bad_ps, x);
  const __m256 d = _mm256_andnot_ps(bad_ps, _mm256_sub_ps(x, shift));
  l.sum = _mm256_add_ps(l.sum, d);
  l.centred = _mm256_fmadd_ps(d, d, l.centred);
  l.squares = _mm256_fmadd_ps(v, v, l.squares);
  l.top = _mm256_max_epi32(l.top, _mm256_andnot_si256(bad, magnitude));
  l.zeros = _mm256_add_epi32(l.zeros, _mm256_cmpeq_epi32(magnitude, _mm256_setzero_si256()));
  l.bad = _mm256_add_epi32(l.bad, bad);
}

__attribute__((target("avx2,fma"))) float add_lanes(__m256 v) {
  alignas(32) float f[8];
  _mm256_store_ps(f, v);
  return ((f[0] + f[1]) + (f[2] + f[3])) + ((f[4] + f[5]) + (f[6] + f[7]));
}
__attribute__((target("avx2,fma"))) int32_t add_lanes(__m256i v) {
  alignas(32) int32_t k[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(k), v);
  return ((k[0] + k[1]) + (k[2] + k[3])) + ((k[4] + k[5]) + (k[6] + k[7]));
}
__attribute__((target("avx2,fma"))) int32_t max_lanes(__m256i v) {
  alignas(32) int32_t k[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(k), v);
  int32_t m = 0;
  for (int32_t x : k) m = m > x ? m : x;
  return m;
}

// Without masks: what every element of a block of finite values needs (9 operations for
// 8 elements). A NaN or Inf shows in the largest magnitude, and its block is read again
// with masks (step8).
__attribute__((target("avx2,fma"), always_inline)) inline void step8_finite(Lanes& l, const float* p, __m256 shift) {
  const __m256 x = _mm256_loadu_ps(p);
  const __m256i magnitude = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(kMagnitude));
  const __m256 d = _mm256_sub_ps(x, shift);
  l.sum = _mm256_add_ps(l.sum, d);
  l.centred = _mm256_fmadd_ps(d, d, l.centred);
  l.squares = _mm256_fmadd_ps(x, x, l.squares);
  l.top = _mm256_max_epi32(l.top, magnitude);
  l.zeros = _mm256_add_epi32(l.zeros, _mm256_cmpeq_epi32(magnitude, _mm256_setzero_si256()));
}

template <bool kFinite>
__attribute__((target("avx2,fma"))) Float32Block avx2_pass(const float* p, size_t n, float shift) {
  const __m256 vshift = _mm256_set1_ps(shift);
  Lanes a{_mm256_setzero_ps(),    _mm256_setzero_ps(),    _mm256_setzero_ps(),
          _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
  Lanes b = a;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    if constexpr (kFinite) {
      step8_finite(a, p + i, vshift);
      step8_finite(b, p + i + 8, vshift);
    } else {
      step8(a, p + i, vshift);
      step8(b, p + i + 8, vshift);
    }
  }
  if (i + 8 <= n) {
    if constexpr (kFinite) {
      step8_finite(a, p + i, vshift);
    } else {
      step8(a, p + i, vshift);
    }
    i += 8;
  }
  Float32Block out;
  out.sum = add_lanes(_mm256_add_ps(a.sum, b.sum));
  out.centred = add_lanes(_mm256_add_ps(a.centred, b.centred));
  out.squares = add_lanes(_mm256_add_ps(a.squares, b.squares));
  int32_t top = max_lanes(_mm256_max_epi32(a.top, b.top));
  if (kFinite && top > kLargestFinite) return avx2_pass<false>(p, n, shift);  // a NaN or Inf
  const int32_t zeros = -add_lanes(_mm256_add_epi32(a.zeros, b.zeros));
  const int32_t bad = -add_lanes(_mm256_add_epi32(a.bad, b.bad));
  float max_abs;
  std::memcpy(&max_abs, &top, sizeof(top));
  if (i < n) {  // the last 0-7 elements
    const Float32Block tail = float32_block_loops(p + i, n - i, shift);
    out.sum += tail.sum;
    out.centred += tail.centred;
    out.squares += tail.squares;
    max_abs = max_abs > tail.max_abs ? max_abs : tail.max_abs;
    out.zeros += tail.zeros;
    out.finite += tail.finite;
  }
  out.max_abs = max_abs;
  out.zeros += static_cast<uint32_t>(zeros);
  out.finite += static_cast<uint32_t>(static_cast<int64_t>(i) - bad);
  return out;
}

__attribute__((target("avx2,fma"))) Float32Block float32_block_avx2(const float* p, size_t n, float shift) {
  return avx2_pass<true>(p, n, shift);
}

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

// 8 magnitudes a step, every quantity from signed compares (the counts count down: a
// compare gives -1); the last 0-7 elements by the loop.
__attribute__((target("avx2,fma"))) Float32CastBlock float32_cast_block_avx2(const float* p, size_t n,
                                                                             int32_t underflow_bits,
                                                                             int32_t overflow_bits) {
  const __m256i magnitude_mask = _mm256_set1_epi32(kMagnitude), zero = _mm256_setzero_si256();
  const __m256i infinity = _mm256_set1_epi32(kLargestFinite + 1);
  const __m256i under_end = _mm256_set1_epi32(underflow_bits + 1);  // (bits of a finite float: no overflow)
  const __m256i over_start = _mm256_set1_epi32(overflow_bits - 1);
  __m256i smallest = magnitude_mask, under = zero, over = zero;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i m = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)), magnitude_mask);
    const __m256i finite = _mm256_cmpgt_epi32(infinity, m);
    const __m256i nonzero = _mm256_and_si256(_mm256_cmpgt_epi32(m, zero), finite);
    smallest = _mm256_min_epi32(smallest, _mm256_blendv_epi8(magnitude_mask, m, nonzero));
    under = _mm256_add_epi32(under, _mm256_and_si256(nonzero, _mm256_cmpgt_epi32(under_end, m)));
    over = _mm256_add_epi32(over, _mm256_and_si256(finite, _mm256_cmpgt_epi32(m, over_start)));
  }
  alignas(32) int32_t lanes[3][8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes[0]), smallest);
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes[1]), under);
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes[2]), over);
  Float32CastBlock out = cast_block(p + i, n - i, underflow_bits, overflow_bits);
  for (int k = 0; k < 8; ++k) {
    out.min_nonzero = lanes[0][k] < out.min_nonzero ? lanes[0][k] : out.min_nonzero;
    out.underflow += static_cast<uint32_t>(-lanes[1][k]);
    out.overflow += static_cast<uint32_t>(-lanes[2][k]);
  }
  return out;
}

}  // namespace
#endif

Float32CastBlock float32_cast_block(const float* p, size_t n, int32_t underflow_bits, int32_t overflow_bits) {
#ifdef TENSORSCOPE_SUMMARY_AVX2
  if (has_avx2()) return float32_cast_block_avx2(p, n, underflow_bits, overflow_bits);
#endif
  return cast_block(p, n, underflow_bits, overflow_bits);
}

Float32Block float32_block(const float* p, size_t n, float shift) {
#ifdef TENSORSCOPE_SUMMARY_AVX2
  if (has_avx2()) return float32_block_avx2(p, n, shift);
#endif
  return float32_block_loops(p, n, shift);
}

}  // namespace tensorscope::tensor::detail
