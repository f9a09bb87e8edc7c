// fused_summary_kernel.cu — see fused_summary_kernel.h.
#include <cuda_runtime.h>

#include "fused_summary_kernel.h"

namespace tensorscope::fused {
namespace {

// The partials of a block's threads merged (every thread gets the result).
__device__ SummaryPartial block_merge(const SummaryPartial& mine) {
  __shared__ SummaryPartial partials[kThreads];
  __syncthreads();  // (an earlier merge's result is read by every thread before this one writes)
  partials[threadIdx.x] = mine;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) merge(partials[threadIdx.x], partials[threadIdx.x + stride]);
    __syncthreads();
  }
  return partials[0];
}

// A partial another block wrote, read past this SM's L1 cache.
__device__ SummaryPartial load_partial(const SummaryPartial* from) {
  static_assert(sizeof(SummaryPartial) % sizeof(double) == 0, "a partial is doubles");
  SummaryPartial p;
  const double* src = reinterpret_cast<const double*>(from);
  double* dst = reinterpret_cast<double*>(&p);
  for (size_t i = 0; i < sizeof(SummaryPartial) / sizeof(double); ++i) dst[i] = __ldcg(src + i);
  return p;
}

__global__ void __launch_bounds__(kThreads) fused_summary_kernel(KernelArgs args) {
  const uint64_t chunk = blockIdx.x;
  const int t = chunk_owner(args.first_chunk, args.count, chunk);
  const KernelTensor in = args.tensors[t];
  const uint64_t begin = (chunk - in.first_chunk) * kChunkElements;
  const uint64_t end = begin + kChunkElements < in.numel ? begin + kChunkElements : in.numel;
  SummaryPartial p;
  for (uint64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    add_counts(p, element_at(in.data, in.dtype, i), in.before != nullptr ? element_at(in.before, in.dtype, i) : 0.0,
               in.ask);
    if (in.ask.keep) copy_element(in.before, in.data, in.dtype, i);  // (read above by this thread only)
  }
  if (in.ask.scaled) p.scale = scale_for(p.max_abs);
  for (uint64_t i = begin + threadIdx.x; i < end; i += kThreads) add_moment(p, element_at(in.data, in.dtype, i));
  const SummaryPartial block = block_merge(p);

  __shared__ bool last;
  const uint64_t first = in.first_chunk, next = args.first_chunk[t + 1];
  if (threadIdx.x == 0) {
    args.partials[chunk] = block;
    __threadfence();  // the partial is visible before the count says so
    last = atomicAdd(&args.done[t], 1u) + 1 == static_cast<unsigned>(next - first);
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  SummaryPartial whole;
  for (uint64_t c = first + threadIdx.x; c < next; c += kThreads) merge(whole, load_partial(args.partials + c));
  whole = block_merge(whole);
  if (threadIdx.x == 0) {
    finish(whole, in.ask, args.values + in.value_offset);
    args.done[t] = 0;  // ready for the next pass
  }
}

}  // namespace

bool kernel_available() { return true; }

std::string launch_kernel(const KernelArgs& args, uint64_t chunks, void* stream) {
  if (chunks == 0) return {};
  if (chunks > 0x7fffffffu) return "a fused summary pass of more than 2^31 chunks";
  fused_summary_kernel<<<static_cast<unsigned>(chunks), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(args);
  const cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? std::string() : std::string("fused summary kernel: ") + cudaGetErrorString(error);
}

}  // namespace tensorscope::fused
