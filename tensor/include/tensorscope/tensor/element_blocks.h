// element_blocks.h — streams a TensorView as blocks of doubles: every value in element
// order (for_each_ordered_block), or only the finite ones with NaN/Inf counted apart
// (for_each_finite_block).
//
// Used by the daemon's workers (statistics, histograms, line and heatmap reductions).
// Each element is read exactly once (one memcpy per block into a private buffer, so
// unaligned or concurrently rewritten shared memory is fine) and converted with
// to_double (element_type.h); the type is dispatched once per view, not per block.
// Thread safety: stateless; the callback runs on the caller's thread.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tensorscope/tensor/element_type.h"
#include "tensorscope/tensor/tensor_view.h"

namespace tensorscope::tensor {

struct NonFiniteCounts {
  uint64_t nan = 0;
  uint64_t pos_inf = 0;
  uint64_t neg_inf = 0;
};

// Elements per finite block: 2048 doubles = 16 KiB, stays in L1 for the callback's passes.
inline constexpr size_t kBlockElements = 2048;
// Elements per ordered block.
inline constexpr size_t kOrderedBlockElements = 4096;

namespace detail {

// Converts n elements of storage type T into finite doubles in `out`, counting the rest.
// The common all-finite block takes a branch-free, vectorisable path.
template <typename T>
inline size_t pack_finite(const T* raw, size_t n, double* out, NonFiniteCounts* nf) {
  if constexpr (!kIsFloatingStorage<T>) {
    for (size_t i = 0; i < n; ++i) out[i] = to_double(raw[i]);
    return n;
  } else {
    // NaN and +-Inf are exactly the values whose x - x is not +0.0 (all-zero bits).
    uint64_t poison = 0;
    for (size_t i = 0; i < n; ++i) {
      const double d = to_double(raw[i]);
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
}

// Calls fn(const T* raw, size_t first, size_t count) for consecutive blocks of at most
// Block elements of a valid, non-empty view, T its storage type: each block copied once
// (one memcpy) into a private array. The type is dispatched once per view.
template <size_t Block, typename Fn>
void for_each_stored_block(const TensorView& view, Fn&& fn) {
  if (!view.valid()) return;
  const int64_t numel = view.numel();
  if (numel <= 0 || view.data == nullptr) return;
  const size_t total = static_cast<size_t>(numel);
  const auto* base = static_cast<const unsigned char*>(view.data);
  visit_element_type(view.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T raw[Block];
    for (size_t start = 0; start < total; start += Block) {
      const size_t n = total - start < Block ? total - start : Block;
      std::memcpy(raw, base + start * sizeof(T), n * sizeof(T));
      fn(static_cast<const T*>(raw), start, n);
    }
  });
}

}  // namespace detail

// Calls fn(const double* values, size_t count) for every block of finite values (in
// element order; count may be 0 for an all-NaN block) and adds the non-finite ones to
// *nf. Invalid views (see TensorView::valid) are treated as empty.
template <typename Fn>
void for_each_finite_block(const TensorView& view, NonFiniteCounts* nf, Fn&& fn) {
  double block[kBlockElements] = {};
  detail::for_each_stored_block<kBlockElements>(view, [&](const auto* raw, size_t, size_t n) {
    const size_t kept = detail::pack_finite(raw, n, block, nf);
    fn(static_cast<const double*>(block), kept);
  });
}

// Calls fn(int64_t first_index, const double* values, size_t count) for consecutive
// blocks covering every element, NaN and +-Inf included. Invalid or empty views produce
// no calls.
template <typename Fn>
void for_each_ordered_block(const TensorView& view, Fn&& fn) {
  alignas(64) double block[kOrderedBlockElements];
  detail::for_each_stored_block<kOrderedBlockElements>(view, [&](const auto* raw, size_t first, size_t n) {
    for (size_t i = 0; i < n; ++i) block[i] = to_double(raw[i]);
    fn(static_cast<int64_t>(first), static_cast<const double*>(block), n);
  });
}

}  // namespace tensorscope::tensor
