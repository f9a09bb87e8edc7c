// ordered_blocks.h — internal: streams a TensorView as blocks of doubles in element
// order, NaN and +-Inf included (unlike element_blocks.h, which packs finite values).
//
// Used inside plotting/ by the daemon's workers for reductions that need each value's
// position (line columns, heatmap blocks). Each element is read exactly once (one
// memcpy per block into a private buffer, so unaligned or concurrently rewritten shared
// memory is fine). Integers and bool are converted exactly as element_as_double does.
// Thread safety: stateless; the callback runs on the caller's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "element_blocks.h"
#include "tensorscope/plotting/tensor_view.h"

namespace tensorscope::plotting::internal {

inline constexpr size_t kOrderedBlockElements = 4096;

template <typename T, typename Convert>
inline void convert_block(const unsigned char* src, size_t n, double* out, Convert convert) {
  T raw[kOrderedBlockElements];
  std::memcpy(raw, src, n * sizeof(T));
  for (size_t i = 0; i < n; ++i) out[i] = convert(raw[i]);
}

// Calls fn(int64_t first_index, const double* values, size_t count) for consecutive
// blocks covering every element. Invalid or empty views produce no calls.
template <typename Fn>
void for_each_ordered_block(const TensorView& view, Fn&& fn) {
  if (!view.valid()) return;
  const int64_t numel = view.numel();
  if (numel <= 0 || view.data == nullptr) return;
  const size_t total = static_cast<size_t>(numel);
  const size_t esize = element_size(view.type);
  const auto* base = static_cast<const unsigned char*>(view.data);
  alignas(64) double block[kOrderedBlockElements];
  for (size_t start = 0; start < total; start += kOrderedBlockElements) {
    const size_t n = total - start < kOrderedBlockElements ? total - start : kOrderedBlockElements;
    const unsigned char* src = base + start * esize;
    switch (view.type) {
      case ElementType::kFloat32:
        convert_block<float>(src, n, block, [](float x) { return static_cast<double>(x); });
        break;
      case ElementType::kFloat64:
        convert_block<double>(src, n, block, [](double x) { return x; });
        break;
      case ElementType::kFloat16:
        convert_block<uint16_t>(src, n, block, [](uint16_t x) {
          return static_cast<double>(half_bits_to_float(x));
        });
        break;
      case ElementType::kBFloat16:
        convert_block<uint16_t>(src, n, block, [](uint16_t x) {
          return static_cast<double>(bfloat16_bits_to_float(x));
        });
        break;
      case ElementType::kInt8:
        convert_block<int8_t>(src, n, block, [](int8_t x) { return static_cast<double>(x); });
        break;
      case ElementType::kInt16:
        convert_block<int16_t>(src, n, block, [](int16_t x) { return static_cast<double>(x); });
        break;
      case ElementType::kInt32:
        convert_block<int32_t>(src, n, block, [](int32_t x) { return static_cast<double>(x); });
        break;
      case ElementType::kInt64:
        convert_block<int64_t>(src, n, block, [](int64_t x) { return static_cast<double>(x); });
        break;
      case ElementType::kUInt8:
        convert_block<uint8_t>(src, n, block, [](uint8_t x) { return static_cast<double>(x); });
        break;
      case ElementType::kBool:
        convert_block<uint8_t>(src, n, block, [](uint8_t x) { return x != 0 ? 1.0 : 0.0; });
        break;
    }
    fn(static_cast<int64_t>(start), static_cast<const double*>(block), n);
  }
}

}  // namespace tensorscope::plotting::internal
