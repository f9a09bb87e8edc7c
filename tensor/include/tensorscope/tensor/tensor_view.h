// tensor_view.h — a typed, read-only view of a tensor's elements (pointer + type + shape).
//
// Used by the daemon's worker processes to hand tensors (often still in shared memory
// written by another process) to the renderers and recording sinks, and by `tensorscope
// compare`. The view owns nothing. Every reader reads each element once per pass into a
// local, never trusts values to be finite, and never reads past nbytes().
// Thread safety: plain value type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensorscope/tensor/element_type.h"

namespace tensorscope::tensor {

struct TensorView {
  const void* data = nullptr;
  ElementType type = ElementType::kFloat32;
  std::vector<int64_t> shape;  // empty shape = scalar (1 element)

  // Product of the dims. 0 when any dim is negative or the product (or its size in
  // bytes) overflows int64: such a view has nothing to read.
  int64_t numel() const;
  // numel() * element_size(type).
  size_t nbytes() const;
  // Dims non-negative, no overflow, a known type, and data != nullptr unless numel()==0.
  bool valid() const;
};

}  // namespace tensorscope::tensor
