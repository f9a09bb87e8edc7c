// record_frame.h — translation from a validated wire record to plotting's types.
//
// Used inside a worker process (reader thread). Thread safety: free functions.
#pragma once

#include "tensorscope/plotting/frame_painter.h"
#include "tensorscope/tensor/tensor_view.h"
#include "tensorscope/shared/ring_reader.h"

namespace tensorscope::daemon {

tensor::ElementType element_type(wire::DType dtype);
// A view of the record's payload (in shared memory) with its dtype and shape.
tensor::TensorView tensor_view(const RecordView& record);
// Stream, device, rank, step, label, kind, shape and dtype for the frame's text.
plotting::FrameInfo frame_info(const wire::RecordHeader& header);

}  // namespace tensorscope::daemon
