// wire_tensor.h — a wire record's payload as a tensor/ view (its dtype translated by
// wire::element_type, shared/wire_element_type.h).
//
// Used inside the daemon's worker processes (renderers, recording sinks) and by
// `tensorscope compare`. Thread safety: pure functions.
#pragma once

#include "tensorscope/shared/ring_reader.h"
#include "tensorscope/shared/wire_element_type.h"
#include "tensorscope/shared/wire_format.h"
#include "tensorscope/tensor/tensor_view.h"

namespace tensorscope::recording {

// A view of a validated record's payload (in shared memory) with its dtype and shape.
tensor::TensorView tensor_view(const RecordView& record);

}  // namespace tensorscope::recording
