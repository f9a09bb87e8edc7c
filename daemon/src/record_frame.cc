#include "record_frame.h"

namespace tensorscope::daemon {

tensor::ElementType element_type(wire::DType dtype) {
  using tensor::ElementType;
  switch (dtype) {
    case wire::DType::kFloat32: return tensor::ElementType::kFloat32;
    case wire::DType::kFloat64: return tensor::ElementType::kFloat64;
    case wire::DType::kFloat16: return tensor::ElementType::kFloat16;
    case wire::DType::kBFloat16: return tensor::ElementType::kBFloat16;
    case wire::DType::kInt8: return tensor::ElementType::kInt8;
    case wire::DType::kInt16: return tensor::ElementType::kInt16;
    case wire::DType::kInt32: return tensor::ElementType::kInt32;
    case wire::DType::kInt64: return tensor::ElementType::kInt64;
    case wire::DType::kUInt8: return tensor::ElementType::kUInt8;
    case wire::DType::kBool: return tensor::ElementType::kBool;
    case wire::DType::kInvalid: break;
  }
  return tensor::ElementType::kUInt8;  // unreachable for validated records
}

tensor::TensorView tensor_view(const RecordView& record) {
  tensor::TensorView view;
  view.data = record.payload;
  view.type = element_type(static_cast<wire::DType>(record.header.dtype));
  view.shape.assign(record.header.shape, record.header.shape + record.header.ndim);
  return view;
}

plotting::FrameInfo frame_info(const wire::RecordHeader& h) {
  plotting::FrameInfo info;
  info.stream = h.name;
  info.device = h.device;
  info.label = h.label;
  info.kind = wire::tensor_kind_name(static_cast<wire::TensorKind>(h.kind));
  info.rank = h.rank;
  info.step = h.step;
  info.shape.assign(h.shape, h.shape + h.ndim);
  info.type = element_type(static_cast<wire::DType>(h.dtype));
  return info;
}

}  // namespace tensorscope::daemon
