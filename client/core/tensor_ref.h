// tensor_ref.h — TensorRef: a tensor as the client core sees it, whatever framework made
// it: a data pointer, a wire dtype, shape and strides, and a device. The libtorch client
// (client/src/tensor_staging.cc) and the Python package (python/native) fill one in;
// ClientCore copies it into the shared-memory ring or a CUDA staging pool.
//
// Used inside the training process. Thread safety: a value type; the memory it points
// to must stay valid for the call it is passed to (and, on a CUDA device, until the copy
// ordered after the producer's stream is done: see DeviceOrdering).
#pragma once

#include <cstdint>
#include <string>

#include "tensorscope/shared/wire_format.h"

namespace tensorscope {

// How a CUDA tensor's producer stream and the client's copy stream are ordered, for a
// framework whose streams are not plain cudaStream_t handles to us (libtorch's c10
// streams). The client calls it from within one push, on the pushing thread, serialized
// per device. None of the methods may throw.
class DeviceOrdering {
 public:
  virtual ~DeviceOrdering() = default;
  // Records `event` (a cudaEvent_t the client owns) on the producer's stream: the copy
  // waits for it, on the GPU. Empty on success, else why.
  virtual std::string record_on_producer(void* event) = 0;
  // Makes the producer's stream wait, on the GPU, for `event` (a cudaEvent_t recorded on
  // the side stream after the copy): later kernels that overwrite or free the tensor
  // cannot race the copy. Empty on success, else why.
  virtual std::string producer_waits_for(void* event) = 0;
  // Copies the tensor's `bytes` to host memory `dst` after the producer's work, waiting
  // for it (used only when no staging is possible). Empty on success, else why.
  virtual std::string copy_to_host(void* dst, uint64_t bytes) = 0;
};

enum class DeviceType : uint8_t { kCpu, kCuda };

struct TensorRef {
  const void* data = nullptr;  // first element (may be null when numel is 0)
  wire::DType dtype = wire::DType::kInvalid;
  int ndim = 0;  // at most wire::kMaxDims
  int64_t shape[wire::kMaxDims] = {};
  int64_t strides[wire::kMaxDims] = {};  // in elements; may be negative on the CPU
  DeviceType device = DeviceType::kCpu;
  int device_index = 0;
  // CUDA: the tensor must be C-contiguous. Either `ordering` (the framework orders the
  // streams) or `cuda_stream` (the producer's cudaStream_t as an integer; 0 is the legacy
  // default stream) says which stream the tensor is ready on. With `cuda_stream`, the
  // caller keeps the memory from being reused by other streams until the producer's
  // stream passes the copy (e.g. torch's Tensor.record_stream on it).
  DeviceOrdering* ordering = nullptr;
  uintptr_t cuda_stream = 0;
};

// Elements of `ref` (1 for a 0-d tensor).
uint64_t element_count(const TensorRef& ref);
// True when `ref` is laid out C-contiguously (size-1 dimensions may have any stride).
bool is_c_contiguous(const TensorRef& ref);
// Why `ref` cannot be sent (unknown dtype, too many dimensions, negative sizes, no data,
// an unknown device, a strided CUDA tensor); empty when it can.
std::string tensor_ref_refusal(const TensorRef& ref);
// "cpu", "cuda0", ...
std::string device_name(const TensorRef& ref);

// Copies the CPU tensor `ref` into `dst` (`bytes` = element_count * element size) in
// C order: memcpy when contiguous, else row by row. Never throws.
void copy_strided(const TensorRef& ref, void* dst, uint64_t bytes) noexcept;

}  // namespace tensorscope
