// fused_summary_kernel.h — the fused summary pass on a CUDA device: one kernel launch
// summarizes every tensor of a plan (fused_summary_plan.h), whatever their number. Each
// block reduces one chunk of one tensor to a partial (fused_summary_math.h) in global
// memory; the last block of a tensor to finish (an atomic count) merges the tensor's
// partials and writes its values in the device layout (tensor_summary.h), then resets
// its count for the next pass.
//
// Used by the clients' summaries of CUDA tensors. Compiled by nvcc where the build has a
// CUDA compiler (TENSORSCOPE_WITH_CUDA_KERNELS); elsewhere launching fails with a reason.
// Thread safety: launches on the caller's stream; one pass's buffers per stream at a time.
#pragma once

#include <cstdint>
#include <string>

#include "fused_summary_math.h"

namespace tensorscope::fused {

// One tensor as the kernel reads it: C-contiguous device memory.
struct KernelTensor {
  const void* data = nullptr;
  void* before = nullptr;  // ask.ratio: the previous value (same dtype and numel); ask.keep: written
  uint64_t numel = 0;
  uint64_t first_chunk = 0;   // its chunks are first_chunk .. the next tensor's
  uint32_t value_offset = 0;  // where its values go in `values`
  uint8_t dtype = 0;          // wire::DType
  SummaryAsk ask;
};

// The device memory of one pass (every pointer on the device).
struct KernelArgs {
  const KernelTensor* tensors = nullptr;
  const uint64_t* first_chunk = nullptr;  // count + 1 entries: each tensor's, then the total
  int count = 0;
  SummaryPartial* partials = nullptr;  // one per chunk
  unsigned* done = nullptr;            // one per tensor, 0 before the pass (and left 0)
  double* values = nullptr;            // the plan's values
};

// Whether this build has the kernel.
bool kernel_available();

// Queues the kernel over `chunks` chunks on `stream` (a cudaStream_t); empty on success,
// else why (no kernel in this build, a launch error).
std::string launch_kernel(const KernelArgs& args, uint64_t chunks, void* stream);

}  // namespace tensorscope::fused
