#include "tensorscope/shared/cuda_probe.h"

#include <cuda_runtime_api.h>

namespace tensorscope {
namespace {

CudaProbe run_probe() {
  CudaProbe p;
  cudaRuntimeGetVersion(&p.runtime_version);
  if (cudaDriverGetVersion(&p.driver_version) != cudaSuccess) p.driver_version = 0;
  const cudaError_t err = cudaGetDeviceCount(&p.devices);
  if (err != cudaSuccess) {
    p.devices = 0;
    p.reason = std::string("CUDA runtime: ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
    cudaGetLastError();  // clear the sticky error for whoever asks next
    return p;
  }
  if (p.devices == 0) {
    p.reason = "CUDA runtime: no device";
    return p;
  }
  p.usable = true;
  return p;
}

}  // namespace

const CudaProbe& cuda_probe() {
  static const CudaProbe probe = run_probe();
  return probe;
}

}  // namespace tensorscope
