// fused_summary_pass.cc — see fused_summary_pass.h.
#include "fused_summary_pass.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>

#include "tensorscope/shared/cuda_util.h"

namespace tensorscope::fused {
namespace {

size_t grown(size_t capacity, size_t bytes) {
  size_t size = capacity > 0 ? capacity : 4096;
  while (size < bytes) size *= 2;
  return size;
}

size_t aligned(size_t bytes) { return (bytes + 255) & ~size_t{255}; }

}  // namespace

Pass::~Pass() {
  DeviceScope scope(device_);
  if (event_ != nullptr) {
    cudaEventSynchronize(static_cast<cudaEvent_t>(event_));
    cudaEventDestroy(static_cast<cudaEvent_t>(event_));
  }
  for (void* p : {device_args_, partials_, done_, device_values_}) {
    if (p != nullptr) cudaFree(p);
  }
  for (void* p : {host_args_, host_values_raw_}) {
    if (p != nullptr) cudaFreeHost(p);
  }
}

std::string Pass::reserve(void** buffer, size_t* capacity, size_t bytes, bool pinned_host) {
  if (bytes <= *capacity) return {};
  const size_t size = grown(*capacity, bytes);
  if (*buffer != nullptr) pinned_host ? cudaFreeHost(*buffer) : cudaFree(*buffer);
  *buffer = nullptr;
  *capacity = 0;
  const cudaError_t err = pinned_host ? cudaMallocHost(buffer, size) : cudaMalloc(buffer, size);
  if (err != cudaSuccess) {
    return cuda_error_text(
        pinned_host ? "cudaMallocHost for the fused summary pass" : "cudaMalloc for the fused summary pass", err);
  }
  *capacity = size;
  return {};
}

std::string Pass::queue(const std::vector<Input>& inputs, uintptr_t stream) {
  if (in_flight_) return "the previous fused summary pass is not taken yet";
  error_.clear();
  std::string why;
  if (!plan_pass(inputs, &plan_, &why)) return why;
  if (!kernel_available()) return launch_kernel(KernelArgs{}, 1, nullptr);  // (says why)
  DeviceScope scope(device_);
  const size_t tensors_bytes = aligned(plan_.tensors.size() * sizeof(KernelTensor));
  const size_t args_bytes = tensors_bytes + plan_.first_chunk.size() * sizeof(uint64_t);
  const size_t values_bytes = std::max<size_t>(1, plan_.values) * sizeof(double);
  const size_t done_bytes = std::max<size_t>(1, plan_.tensors.size()) * sizeof(unsigned);
  const size_t done_before = done_bytes_;
  for (const std::string& failed :
       {reserve(&device_args_, &device_args_bytes_, args_bytes, false),
        reserve(&host_args_, &host_args_bytes_, args_bytes, true),
        reserve(&partials_, &partials_bytes_, std::max<uint64_t>(1, plan_.chunks) * sizeof(SummaryPartial), false),
        reserve(&done_, &done_bytes_, done_bytes, false),
        reserve(&device_values_, &device_values_bytes_, values_bytes, false),
        reserve(&host_values_raw_, &host_values_bytes_, values_bytes, true)}) {
    if (!failed.empty()) return failed;
  }
  host_values_ = static_cast<double*>(host_values_raw_);
  const auto cuda_stream = reinterpret_cast<cudaStream_t>(stream);
  cudaError_t err = cudaSuccess;
  if (event_ == nullptr) {
    cudaEvent_t event = nullptr;
    err = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    if (err != cudaSuccess) return cuda_error_text("cudaEventCreateWithFlags", err);
    event_ = event;
  }
  if (done_bytes_ != done_before) {  // new counters: zero once (the kernel leaves them zero)
    err = cudaMemsetAsync(done_, 0, done_bytes_, cuda_stream);
    if (err != cudaSuccess) return cuda_error_text("cudaMemsetAsync of the pass's counters", err);
  }
  auto* host = static_cast<uint8_t*>(host_args_);
  std::memcpy(host, plan_.tensors.data(), plan_.tensors.size() * sizeof(KernelTensor));
  std::memcpy(host + tensors_bytes, plan_.first_chunk.data(), plan_.first_chunk.size() * sizeof(uint64_t));
  err = cudaMemcpyAsync(device_args_, host_args_, args_bytes, cudaMemcpyHostToDevice, cuda_stream);
  if (err != cudaSuccess) return cuda_error_text("cudaMemcpyAsync of the pass's tensors", err);
  KernelArgs args;
  args.tensors = static_cast<const KernelTensor*>(device_args_);
  args.first_chunk = reinterpret_cast<const uint64_t*>(static_cast<uint8_t*>(device_args_) + tensors_bytes);
  args.count = static_cast<int>(plan_.tensors.size());
  args.partials = static_cast<SummaryPartial*>(partials_);
  args.done = static_cast<unsigned*>(done_);
  args.values = static_cast<double*>(device_values_);
  if (std::string failed = launch_kernel(args, plan_.chunks, cuda_stream); !failed.empty()) return failed;
  err = cudaMemcpyAsync(host_values_raw_, device_values_, plan_.values * sizeof(double), cudaMemcpyDeviceToHost,
                        cuda_stream);
  if (err != cudaSuccess) return cuda_error_text("cudaMemcpyAsync of the pass's values", err);
  err = cudaEventRecord(static_cast<cudaEvent_t>(event_), cuda_stream);
  if (err != cudaSuccess) return cuda_error_text("cudaEventRecord after the pass", err);
  in_flight_ = true;
  return {};
}

bool Pass::ready() {
  if (!in_flight_ || event_ == nullptr) return false;
  const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event_));
  if (err == cudaErrorNotReady) return false;
  if (err != cudaSuccess) {  // a failed pass: its values are not read
    error_ = cuda_error_text("the fused summary pass", err);
    in_flight_ = false;
    return false;
  }
  write_empty_values(plan_, host_values_);
  return true;
}

}  // namespace tensorscope::fused
