// tensor_view.cc — TensorView's size checks (tensor_view.h).
#include "tensorscope/tensor/tensor_view.h"

#include <limits>

namespace tensorscope::tensor {

int64_t TensorView::numel() const {
  const int64_t size = static_cast<int64_t>(element_size(type));
  int64_t n = 1;
  for (int64_t dim : shape) {
    if (dim < 0) return 0;
    if (dim == 0) return 0;
    if (n > std::numeric_limits<int64_t>::max() / dim) return 0;
    n *= dim;
  }
  if (size > 0 && n > std::numeric_limits<int64_t>::max() / size) return 0;
  return n;
}

size_t TensorView::nbytes() const { return static_cast<size_t>(numel()) * element_size(type); }

bool TensorView::valid() const {
  if (element_size(type) == 0) return false;
  int64_t n = 1;
  bool zero = false;
  for (int64_t dim : shape) {
    if (dim < 0) return false;
    if (dim == 0) zero = true;
    if (!zero && n > std::numeric_limits<int64_t>::max() / dim) return false;
    if (!zero) n *= dim;
  }
  if (!zero && n > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(element_size(type))) return false;
  return zero || data != nullptr;
}

}  // namespace tensorscope::tensor
