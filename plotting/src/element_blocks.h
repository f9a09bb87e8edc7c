// element_blocks.h — internal: streams a TensorView as blocks of finite doubles.
//
// Used inside plotting/ (stats, histogram) by the daemon's workers. Each element is
// read exactly once (one memcpy per block into a private buffer, so unaligned or
// concurrently rewritten shared memory is fine), converted to double and classified:
// finite values are packed into a small on-stack block handed to a callback;
// NaN/+Inf/-Inf are counted.
// Thread safety: stateless; the callback runs on the caller's thread.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tensorscope/plotting/tensor_view.h"

namespace tensorscope::plotting::internal {

struct NonFiniteCounts {
  uint64_t nan = 0;
  uint64_t pos_inf = 0;
  uint64_t neg_inf = 0;
};

// Elements per block: 2048 doubles = 16 KiB, stays in L1 for the callback's passes.
inline constexpr size_t kBlockElements = 2048;

// IEEE binary16 bits to float, exact and branch-free (so block loops vectorise).
// Integer arithmetic only, except m * 2^-24 whose operands and result are normal
// floats, so denormals-are-zero/flush-to-zero modes cannot change the result.
inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  const uint32_t normal = ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  const uint32_t inf_nan = 0x7f800000u | (mantissa << 13);  // NaN keeps its payload
  // Zero and subnormals: mantissa * 2^-24.
  const uint32_t small =
      std::bit_cast<uint32_t>(static_cast<float>(static_cast<int32_t>(mantissa)) * 0x1p-24f);
  const uint32_t is_small = 0u - static_cast<uint32_t>(exponent == 0);  // all ones or 0
  const uint32_t is_inf_nan = 0u - static_cast<uint32_t>(exponent == 0x1f);
  const uint32_t bits = (small & is_small) | (inf_nan & is_inf_nan) |
                        (normal & ~(is_small | is_inf_nan));
  return std::bit_cast<float>(bits | sign);
}

inline float bfloat16_bits_to_float(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// Copies src[0, n) of T into `raw` with one memcpy: each element of shared memory is
// read exactly once, whatever its alignment; the loops below then work on a private,
// aligned copy that no other process can change under them.
template <typename T>
inline void copy_in(const unsigned char* src, size_t n, T* raw) {
  std::memcpy(raw, src, n * sizeof(T));
}

// Converts n elements of a floating type T into finite doubles in `out`, counting the
// rest. The common all-finite block takes a branch-free, vectorisable path.
template <typename T, typename Convert>
inline size_t pack_floating(const unsigned char* src, size_t n, double* out,
                            NonFiniteCounts* nf, Convert convert) {
  T raw[kBlockElements];
  copy_in(src, n, raw);
  // NaN and +-Inf are exactly the values whose x - x is not +0.0 (all-zero bits).
  uint64_t poison = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = convert(raw[i]);
    out[i] = d;
    poison |= std::bit_cast<uint64_t>(d - d);
  }
  if (__builtin_expect(poison == 0, 1)) return n;
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = out[i];
    out[kept] = d;
    const bool finite = (d - d) == 0.0;
    kept += finite ? 1 : 0;
    if (!finite) {
      if (d != d) {
        ++nf->nan;
      } else if (d > 0) {
        ++nf->pos_inf;
      } else {
        ++nf->neg_inf;
      }
    }
  }
  return kept;
}

template <typename T>
inline size_t pack_integral(const unsigned char* src, size_t n, double* out) {
  T raw[kBlockElements];
  copy_in(src, n, raw);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<double>(raw[i]);
  return n;
}

// Calls fn(const double* values, size_t count) for every block of finite values (in
// element order; count may be 0 for an all-NaN block) and adds the non-finite ones to
// *nf. Invalid views (see TensorView::valid) are treated as empty.
template <typename Fn>
void for_each_finite_block(const TensorView& view, NonFiniteCounts* nf, Fn&& fn) {
  if (!view.valid()) return;
  const int64_t numel = view.numel();
  if (numel <= 0 || view.data == nullptr) return;
  const size_t total = static_cast<size_t>(numel);
  const size_t esize = element_size(view.type);
  const auto* base = static_cast<const unsigned char*>(view.data);
  double block[kBlockElements] = {};
  for (size_t start = 0; start < total; start += kBlockElements) {
    const size_t n = total - start < kBlockElements ? total - start : kBlockElements;
    const unsigned char* src = base + start * esize;
    size_t kept = 0;
    switch (view.type) {
      case ElementType::kFloat32:
        kept = pack_floating<float>(src, n, block, nf,
                                    [](float x) { return static_cast<double>(x); });
        break;
      case ElementType::kFloat64:
        kept = pack_floating<double>(src, n, block, nf, [](double x) { return x; });
        break;
      case ElementType::kFloat16:
        kept = pack_floating<uint16_t>(src, n, block, nf, [](uint16_t x) {
          return static_cast<double>(half_bits_to_float(x));
        });
        break;
      case ElementType::kBFloat16:
        kept = pack_floating<uint16_t>(src, n, block, nf, [](uint16_t x) {
          return static_cast<double>(bfloat16_bits_to_float(x));
        });
        break;
      case ElementType::kInt8: kept = pack_integral<int8_t>(src, n, block); break;
      case ElementType::kInt16: kept = pack_integral<int16_t>(src, n, block); break;
      case ElementType::kInt32: kept = pack_integral<int32_t>(src, n, block); break;
      case ElementType::kInt64: kept = pack_integral<int64_t>(src, n, block); break;
      case ElementType::kUInt8: kept = pack_integral<uint8_t>(src, n, block); break;
      case ElementType::kBool: {
        uint8_t raw[kBlockElements];
        copy_in(src, n, raw);
        for (size_t i = 0; i < n; ++i) block[i] = raw[i] != 0 ? 1.0 : 0.0;
        kept = n;
        break;
      }
    }
    fn(static_cast<const double*>(block), kept);
  }
}

}  // namespace tensorscope::plotting::internal
