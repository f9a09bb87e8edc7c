// wire_tensor.cc — see wire_tensor.h.
#include "tensorscope/recording/wire_tensor.h"

namespace tensorscope::recording {

tensor::TensorView tensor_view(const RecordView& record) {
  tensor::TensorView view;
  view.data = record.payload;
  view.type = wire::element_type(static_cast<wire::DType>(record.header.dtype));
  view.shape.assign(record.header.shape, record.header.shape + record.header.ndim);
  return view;
}

}  // namespace tensorscope::recording
