// tensor_staging.h — the libtorch side of a push: an at::Tensor checked and described as
// a TensorRef for ClientCore, with its CUDA stream ordering done through c10.
//
// Used by ClientImpl on the pushing thread. Thread safety: free functions; a
// StagedTensor belongs to one push.
#pragma once

#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/Stream.h>

#include "tensor_ref.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope {

// The wire dtype of `type`, or DType::kInvalid (complex, quantized, ...).
wire::DType wire_dtype(c10::ScalarType type);

// "cpu", "cuda0", ... (the record's device field; module tree logs).
std::string device_string(const at::Tensor& tensor);

// Why `tensor` cannot be sent (empty string when it can): undefined, unsupported dtype,
// too many dimensions, not strided.
std::string staging_refusal(const at::Tensor& tensor);

// `tensor` (which passed staging_refusal) as ClientCore copies it: a CPU tensor as it is
// (negation and conjugation resolved), a CUDA tensor made contiguous on its own stream
// and marked as used by that stream (the caching allocator does not reuse its memory
// before the copy), any other device copied to the host first. May throw c10::Error.
class StagedTensor : private DeviceOrdering {
 public:
  explicit StagedTensor(const at::Tensor& tensor);
  StagedTensor(const StagedTensor&) = delete;
  StagedTensor& operator=(const StagedTensor&) = delete;
  const TensorRef& ref() const { return ref_; }

 private:
  // DeviceOrdering, through c10's CUDA guard (libtorch built with CUDA).
  std::string record_on_producer(void* event) override;
  std::string producer_waits_for(void* event) override;
  std::string copy_to_host(void* dst, uint64_t bytes) override;

  at::Tensor tensor_;  // what ref_ points into
  c10::Stream stream_{c10::Stream::DEFAULT, c10::Device(c10::kCPU)};
  TensorRef ref_;
};

// The libtorch version this client is built against (run_info "versions").
std::string libtorch_version();

}  // namespace tensorscope
