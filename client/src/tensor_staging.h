// tensor_staging.h — turning an at::Tensor into a record: dtype and device mapping,
// checks, and the single copy into a ring reservation.
//
// Used by the Client on the training thread. Thread safety: free functions.
#pragma once

#include <string>

#include <ATen/core/Tensor.h>

#include "tensorscope/shared/wire_format.h"

namespace tensorscope {

// The wire dtype of `type`, or DType::kInvalid (complex, quantized, ...).
wire::DType wire_dtype(c10::ScalarType type);

// "cpu", "cuda0", ...
std::string device_string(const at::Tensor& tensor);

// Why `tensor` cannot be sent (empty string when it can): undefined, unsupported dtype,
// too many dimensions.
std::string staging_refusal(const at::Tensor& tensor);

// Copies every descriptive field of a record (step, timestamp, rank, dtype, kind, ndim,
// render hint, shape, name, device, label) from `from` into a claimed slot.
void copy_record_fields(const wire::RecordHeader& from, wire::RecordHeader* to);

// Copies `tensor` (any strides, any device) into `dst` as C-contiguous bytes: one copy.
// Throws c10::Error on failure (the caller cancels the reservation).
void copy_into(const at::Tensor& tensor, void* dst, size_t bytes);

}  // namespace tensorscope
