// tensor_refs.h — TensorRefs of a test's own memory: any layout, or a vector as a 1-D
// contiguous tensor.
//
// Used by the client core's unit tests (tensor refs, summaries, the fused pass). Thread
// safety: free functions without shared state; the memory must outlive the ref.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor_ref.h"

namespace tensorscope::testing {

// A CPU ref of `data` with `shape` and `strides` (in elements, as many as the shape's).
inline TensorRef make_ref(const void* data, wire::DType dtype, const std::vector<int64_t>& shape,
                          const std::vector<int64_t>& strides) {
  TensorRef ref;
  ref.data = data;
  ref.dtype = dtype;
  ref.ndim = static_cast<int>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    ref.shape[d] = shape[d];
    ref.strides[d] = strides[d];
  }
  return ref;
}

// `x` as a contiguous 1-D tensor of `dtype` (whose element size is sizeof(T)).
template <typename T>
TensorRef ref_of(const std::vector<T>& x, wire::DType dtype) {
  return make_ref(x.data(), dtype, {static_cast<int64_t>(x.size())}, {1});
}

}  // namespace tensorscope::testing
