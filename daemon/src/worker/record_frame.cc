// record_frame.cc — see record_frame.h.
#include "worker/record_frame.h"

#include "tensorscope/recording/wire_tensor.h"

namespace tensorscope::daemon {

plotting::FrameInfo frame_info(const wire::RecordHeader& h) {
  plotting::FrameInfo info;
  info.stream = h.name;
  info.device = h.device;
  info.label = h.label;
  info.kind = wire::tensor_kind_name(static_cast<wire::TensorKind>(h.kind));
  info.rank = h.rank;
  info.step = h.step;
  info.shape.assign(h.shape, h.shape + h.ndim);
  info.type = wire::element_type(static_cast<wire::DType>(h.dtype));
  return info;
}

}  // namespace tensorscope::daemon
