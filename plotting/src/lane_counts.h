// lane_counts.h — internal: adds one to a count per slot index, spread over four lanes.
//
// Used by the hot loops of the histogram binner and the value sketch in the daemon's
// workers. Neighbouring values often fall in the same slot; four interleaved count
// arrays (`stride` apart) let their increments overlap instead of each waiting on the
// previous store. The caller sums the lanes when it reads the counts.
// Thread safety: touches only the caller's arrays.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensorscope::plotting::internal {

inline constexpr int kCountLanes = 4;

// ++lanes[k * stride + slots[i]] for each i, k = i % 4. Every slot is < stride.
template <typename Slot>
inline void count_slots(const Slot* slots, size_t n, uint64_t* lanes, size_t stride) {
  uint64_t* c0 = lanes;
  uint64_t* c1 = c0 + stride;
  uint64_t* c2 = c1 + stride;
  uint64_t* c3 = c2 + stride;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    ++c0[slots[i]];
    ++c1[slots[i + 1]];
    ++c2[slots[i + 2]];
    ++c3[slots[i + 3]];
  }
  for (; i < n; ++i) ++c0[slots[i]];
}

}  // namespace tensorscope::plotting::internal
