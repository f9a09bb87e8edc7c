// wire_element_type.cc — see wire_element_type.h.
#include "tensorscope/shared/wire_element_type.h"

namespace tensorscope::wire {

tensor::ElementType element_type(DType dtype) {
  using tensor::ElementType;
  switch (dtype) {
    case DType::kFloat32: return ElementType::kFloat32;
    case DType::kFloat64: return ElementType::kFloat64;
    case DType::kFloat16: return ElementType::kFloat16;
    case DType::kBFloat16: return ElementType::kBFloat16;
    case DType::kInt8: return ElementType::kInt8;
    case DType::kInt16: return ElementType::kInt16;
    case DType::kInt32: return ElementType::kInt32;
    case DType::kInt64: return ElementType::kInt64;
    case DType::kUInt8: return ElementType::kUInt8;
    case DType::kBool: return ElementType::kBool;
    case DType::kInvalid: break;
  }
  return ElementType::kUInt8;
}

}  // namespace tensorscope::wire
