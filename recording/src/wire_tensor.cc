// wire_tensor.cc — see wire_tensor.h.
#include "tensorscope/recording/wire_tensor.h"

namespace tensorscope::recording {

tensor::ElementType element_type(wire::DType dtype) {
  using tensor::ElementType;
  switch (dtype) {
    case wire::DType::kFloat32: return ElementType::kFloat32;
    case wire::DType::kFloat64: return ElementType::kFloat64;
    case wire::DType::kFloat16: return ElementType::kFloat16;
    case wire::DType::kBFloat16: return ElementType::kBFloat16;
    case wire::DType::kInt8: return ElementType::kInt8;
    case wire::DType::kInt16: return ElementType::kInt16;
    case wire::DType::kInt32: return ElementType::kInt32;
    case wire::DType::kInt64: return ElementType::kInt64;
    case wire::DType::kUInt8: return ElementType::kUInt8;
    case wire::DType::kBool: return ElementType::kBool;
    case wire::DType::kInvalid: break;
  }
  return ElementType::kUInt8;
}

tensor::TensorView tensor_view(const RecordView& record) {
  tensor::TensorView view;
  view.data = record.payload;
  view.type = element_type(static_cast<wire::DType>(record.header.dtype));
  view.shape.assign(record.header.shape, record.header.shape + record.header.ndim);
  return view;
}

}  // namespace tensorscope::recording
