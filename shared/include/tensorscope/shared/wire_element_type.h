// wire_element_type.h — the one translation from a wire dtype to the element type the
// tensor/ library reads (tensor/element_type.h).
//
// Used by the daemon's workers, the recording sinks, `tensorscope compare` and the
// client's summaries. Thread safety: a pure function.
#pragma once

#include "tensorscope/shared/wire_format.h"
#include "tensorscope/tensor/element_type.h"

namespace tensorscope::wire {

// The element type of a valid wire dtype. kInvalid (refused by record validation before
// anything reads a payload) maps to kUInt8, which reads bytes and nothing more.
tensor::ElementType element_type(DType dtype);

}  // namespace tensorscope::wire
