// element_conversion.h — the HDF5 sink's conversion on write: values of any received
// element type to float32, float16 or float64 (Hdf5SinkOptions::dtype).
//
// Used inside a worker process by the HDF5 sink. Reads go through tensor's one dispatch
// over element types (visit_element_type, to_arithmetic). Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "tensorscope/shared/wire_format.h"

namespace tensorscope::recording::hdf5 {

// float64 to IEEE binary16 bits, rounded to nearest even; beyond the range +-Inf; a NaN
// stays a quiet NaN with the top of its payload.
uint16_t double_to_half(double d);

// Converts the `n` elements of type `source` at `src` (any alignment) to `target`
// (kFloat32, kFloat16 or kFloat64; any other target writes nothing) at `dst`. An int64
// converting to float32 rounds once.
void convert(wire::DType source, const unsigned char* src, uint64_t n, wire::DType target, unsigned char* dst);

}  // namespace tensorscope::recording::hdf5
