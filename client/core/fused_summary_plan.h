// fused_summary_plan.h — what one fused summary pass does (fused_summary_kernel.h): the
// tensors as the kernel reads them, their chunks, and where each one's values go.
//
// Used by the clients before a pass, and by the tests, which run a plan on the host with
// the kernel's arithmetic and partition. Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fused_summary_kernel.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope::fused {

// One tensor to summarize: C-contiguous memory of `numel` elements of `dtype`.
struct Input {
  const void* data = nullptr;
  void* before = nullptr;  // ask.ratio: its previous value, the same dtype and numel (ask.keep: x is
                           // copied over it as it is read)
  wire::DType dtype = wire::DType::kInvalid;
  uint64_t numel = 0;
  SummaryAsk ask;
};

struct Plan {
  std::vector<KernelTensor> tensors;  // one per input, in order
  std::vector<uint64_t> first_chunk;  // each tensor's first chunk, then the total
  uint64_t chunks = 0;                // blocks of the launch
  uint32_t values = 0;                // doubles the pass writes (value_count(ask) per tensor)
};

// The plan of `inputs`; false (and why) for a dtype the kernel does not read (complex,
// an unknown one), a ratio without `before`, or a pass too large for one launch. An empty
// tensor has no chunk: its values are zeros (finish() of an empty partial), which the
// caller writes (write_empty_values).
bool plan_pass(const std::vector<Input>& inputs, Plan* plan, std::string* why);

// The values of the plan's empty tensors, written into `values` (the pass's, on the host).
void write_empty_values(const Plan& plan, double* values);

}  // namespace tensorscope::fused
