// cuda_util.h — small helpers over the CUDA runtime shared by the client's staging and
// the daemon's IPC reader: error text and a scope that switches the current device.
//
// Header-only; include it only in files built with TENSORSCOPE_WITH_CUDA. Thread
// safety: the current device is per thread, and so is a DeviceScope.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace tensorscope {

// "what: cudaErrorX (description)"; clears the runtime's last error.
inline std::string cuda_error_text(const char* what, cudaError_t err) {
  cudaGetLastError();
  return std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
}

// Makes `device` current for the scope and restores the previous one. For threads of
// the training program, which have a current device of their own. On a thread we own,
// use set_device() instead: restoring device 0 there would create a context on GPU 0.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (device != previous_) cudaSetDevice(device);
  }
  ~DeviceScope() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
};

// Makes `device` current on a thread we own (no restore); false on failure.
inline bool set_device(int device) {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == device) return true;
  return cudaSetDevice(device) == cudaSuccess;
}

}  // namespace tensorscope
