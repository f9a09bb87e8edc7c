// wire_tensor.h — a wire record's dtype and payload as tensor/ types: the one
// translation from wire::DType to tensor::ElementType.
//
// Used inside the daemon's worker processes (renderers, recording sinks) and by
// `tensorscope compare`. Thread safety: pure functions.
#pragma once

#include "tensorscope/shared/ring_reader.h"
#include "tensorscope/shared/wire_format.h"
#include "tensorscope/tensor/tensor_view.h"

namespace tensorscope::recording {

// The element type of a valid wire dtype. kInvalid (refused by record validation
// before anything reads a payload) maps to kUInt8, which reads bytes and nothing more.
tensor::ElementType element_type(wire::DType dtype);

// A view of a validated record's payload (in shared memory) with its dtype and shape.
tensor::TensorView tensor_view(const RecordView& record);

}  // namespace tensorscope::recording
