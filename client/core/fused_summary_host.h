// fused_summary_host.h — a fused summary pass run on the host: the kernel's partition of a
// plan (fused_summary_plan.h) into chunks, threads and blocks, and its merge order, with
// the same arithmetic (fused_summary_math.h), so the values are the kernel's to the bit.
//
// Used by SummaryBatch for the tensors it gathers in host memory (summary_batch.h), and by
// the tests as the kernel's reference. Thread safety: a pure function of the plan and the
// memory it points to.
#pragma once

#include "fused_summary_plan.h"

namespace tensorscope::fused {

// Writes the plan's values (plan.values doubles, empty tensors' included) into `values`.
// With `reverse_merge`, each tensor's chunks are merged in reverse order instead (a test
// that the result does not depend on the order the blocks finish in).
void run_on_host(const Plan& plan, double* values, bool reverse_merge = false);

}  // namespace tensorscope::fused
