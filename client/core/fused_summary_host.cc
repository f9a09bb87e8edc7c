// fused_summary_host.cc — see fused_summary_host.h.
#include "fused_summary_host.h"

#include <algorithm>
#include <vector>

namespace tensorscope::fused {
namespace {

// The block's tree merge (fused_summary_kernel.cu's block_merge) of kThreads partials.
SummaryPartial tree_merge(std::vector<SummaryPartial>& parts) {
  for (size_t stride = parts.size() / 2; stride > 0; stride /= 2) {
    for (size_t i = 0; i < stride; ++i) merge(parts[i], parts[i + stride]);
  }
  return parts[0];
}

}  // namespace

void run_on_host(const Plan& plan, double* values, bool reverse_merge) {
  std::vector<SummaryPartial> chunk_partials(plan.chunks);
  std::vector<SummaryPartial> threads(kThreads);
  for (uint64_t chunk = 0; chunk < plan.chunks; ++chunk) {
    const int t = chunk_owner(plan.first_chunk.data(), static_cast<int>(plan.tensors.size()), chunk);
    const KernelTensor& in = plan.tensors[static_cast<size_t>(t)];
    const uint64_t begin = (chunk - in.first_chunk) * kChunkElements;
    const uint64_t end = std::min(in.numel, begin + kChunkElements);
    for (int k = 0; k < kThreads; ++k) {
      SummaryPartial& p = threads[static_cast<size_t>(k)];
      p = SummaryPartial{};
      for (uint64_t i = begin + static_cast<uint64_t>(k); i < end; i += kThreads) {
        add_counts(p, element_at(in.data, in.dtype, i), in.before != nullptr ? element_at(in.before, in.dtype, i) : 0.0,
                   in.ask);
        if (in.ask.keep) copy_element(in.before, in.data, in.dtype, i);
      }
      if (in.ask.scaled) p.scale = scale_for(p.max_abs);
      for (uint64_t i = begin + static_cast<uint64_t>(k); i < end; i += kThreads) {
        add_moment(p, element_at(in.data, in.dtype, i));
      }
    }
    chunk_partials[chunk] = tree_merge(threads);
  }
  write_empty_values(plan, values);
  for (size_t t = 0; t < plan.tensors.size(); ++t) {
    const uint64_t first = plan.first_chunk[t], next = plan.first_chunk[t + 1];
    if (first == next) continue;
    std::fill(threads.begin(), threads.end(), SummaryPartial{});
    if (reverse_merge) {
      for (uint64_t c = next; c-- > first;) merge(threads[0], chunk_partials[c]);
    } else {  // the last block's threads: thread k takes chunks k, k + kThreads, ...
      for (uint64_t c = first; c < next; ++c) merge(threads[(c - first) % kThreads], chunk_partials[c]);
    }
    finish(tree_merge(threads), plan.tensors[t].ask, values + plan.tensors[t].value_offset);
  }
}

}  // namespace tensorscope::fused
