// summary_kernel.h — the inner loop of compute_summary_stats for float32 (tensor_stats.h):
// one block's float sums, vectorised. Private to tensor/src.
//
// Compiled on its own with reassociation allowed (the sums may be taken in any order:
// they are summaries, not exact statistics), and on x86-64 one AVX2 pass picked at the
// first call, so the training process pays about a tenth of a nanosecond per element.
// Thread safety: a pure function.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensorscope::tensor::detail {

struct Float32Block {
  float sum = 0;      // of x - shift, finite x only
  float centred = 0;  // of (x - shift)^2
  float squares = 0;  // of x^2
  float max_abs = 0;  // the largest finite |x|
  uint32_t zeros = 0;
  uint32_t finite = 0;
};

// What a cast would lose of a block (tensor_stats.h's CastLimits, as the magnitudes' bits:
// a float32 |x| orders as its bits do).
struct Float32CastBlock {
  int32_t min_nonzero = 0x7fffffff;  // the bits of the smallest non-zero finite |x|
  uint32_t underflow = 0;            // 0 < |x| <= underflow_bits
  uint32_t overflow = 0;             // overflow_bits <= |x| <= the largest finite float
};
Float32CastBlock float32_cast_block(const float* p, size_t n, int32_t underflow_bits, int32_t overflow_bits);

// The sums of `n` (at most 2^20) values at `p`.
Float32Block float32_block(const float* p, size_t n, float shift);
// The same without AVX2 (every machine; what float32_block uses where AVX2 is missing).
Float32Block float32_block_loops(const float* p, size_t n, float shift);

}  // namespace tensorscope::tensor::detail
