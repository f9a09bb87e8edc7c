// cuda_probe.h — whether this process can use CUDA IPC at all: the CUDA runtime found a
// driver and at least one device that supports it. Decides between the staging pool
// (CUDA IPC) and the pinned-host fallback before anything is allocated.
//
// Used by the client when it first meets a CUDA tensor, by the daemon's supervisor (the
// registration reply says whether IPC can work) and by its workers. Built only with
// TENSORSCOPE_WITH_CUDA (then tensorscope::shared links the CUDA runtime). Thread safety: cuda_probe() may be called from
// any thread; the result is computed once.
#pragma once

#include <string>

namespace tensorscope {

struct CudaProbe {
  bool usable = false;
  int devices = 0;
  int runtime_version = 0;  // e.g. 13000
  int driver_version = 0;   // 0 without a driver
  std::string reason;       // why not usable (empty when usable)
};

const CudaProbe& cuda_probe();

}  // namespace tensorscope
