// summary_kernel.cc — see summary_kernel.h. Each quantity has a loop of its own, simple
// enough for the compiler to vectorise (the block is in L1 by the second); finiteness and
// |x| are read from the bits, so no NaN or Inf reaches a sum and the largest |x| is an
// integer maximum (non-negative floats order as their bits do).
#include "summary_kernel.h"

#include <cstring>

namespace tensorscope::tensor::detail {
namespace {

constexpr int32_t kMagnitude = 0x7fffffff;
constexpr int32_t kLargestFinite = 0x7f7fffff;

}  // namespace

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
Float32Block float32_block(const float* p, size_t n, float shift) {
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

}  // namespace tensorscope::tensor::detail
