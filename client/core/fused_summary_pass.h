// fused_summary_pass.h — one fused summary pass on a CUDA device, queued without a host
// synchronization: the plan's descriptors copied to the device (one copy from pinned
// memory), one kernel launch over every tensor (fused_summary_kernel.h), the values
// copied back to pinned host memory and an event recorded after them. Four operations on
// the stream, whatever the number of tensors.
//
// Used by the clients' summaries of CUDA tensors (built only with TENSORSCOPE_WITH_CUDA).
// A pass's buffers are allocated at its first use and grown, never shrunk: callers keep
// a few passes and reuse one once its values are taken.
// Thread safety: one owner; queue() from the thread whose stream the tensors are on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fused_summary_plan.h"

namespace tensorscope::fused {

class Pass {
 public:
  explicit Pass(int device) : device_(device) {}
  ~Pass();  // waits for a pass in flight, then frees
  Pass(const Pass&) = delete;
  Pass& operator=(const Pass&) = delete;

  // Queues the summaries of `inputs` (C-contiguous memory on this pass's device) on
  // `stream` (a cudaStream_t as an integer). Empty on success, else why (nothing queued).
  // Refused while the previous pass's values are not ready.
  std::string queue(const std::vector<Input>& inputs, uintptr_t stream);
  // Whether the values of the pass queued last have arrived (never waits). A pass that
  // failed on the device is not ready and is released; error() says why.
  bool ready();
  const std::string& error() const { return error_; }
  // Whether a queued pass's values are still to be taken (queued, and not yet released).
  bool busy() const { return in_flight_; }
  // The plan of the pass queued last, and its values once ready() (plan().values doubles;
  // an empty tensor's are written here).
  const Plan& plan() const { return plan_; }
  const double* values() const { return host_values_; }
  // The values are taken: the pass may be queued again.
  void release() { in_flight_ = false; }

 private:
  // At least `bytes` in *buffer (device memory, or pinned host memory), grown by doubling.
  std::string reserve(void** buffer, size_t* capacity, size_t bytes, bool pinned_host);

  const int device_;
  Plan plan_;
  std::string error_;
  bool in_flight_ = false;
  void* event_ = nullptr;        // cudaEvent_t
  void* device_args_ = nullptr;  // tensors, then first_chunk
  size_t device_args_bytes_ = 0;
  void* host_args_ = nullptr;  // pinned: what device_args_ gets
  size_t host_args_bytes_ = 0;
  void* partials_ = nullptr;
  size_t partials_bytes_ = 0;
  void* done_ = nullptr;  // zeroed when grown; the kernel leaves it zero
  size_t done_bytes_ = 0;
  void* device_values_ = nullptr;
  size_t device_values_bytes_ = 0;
  void* host_values_raw_ = nullptr;  // pinned
  size_t host_values_bytes_ = 0;
  double* host_values_ = nullptr;
};

}  // namespace tensorscope::fused
