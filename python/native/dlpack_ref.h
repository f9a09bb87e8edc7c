// dlpack_ref.h — DLPack tensors as TensorRefs: the structs of the DLPack ABI the Python
// package reads (declared here: Debian's libdlpack-dev is DLPack 0.6, without bool or
// versioned capsules) and their translation.
//
// Used by the Python extension (module.cc) on the pushing thread, with the capsule held.
// No Python here, so it is tested in C++. Thread safety: free functions.
#pragma once

#include <cstdint>
#include <string>

#include "tensor_ref.h"

namespace tensorscope::dlpack {

// DLPack ABI (dlpack.h, versions 0.6 to 1.x): layouts are fixed by the standard.
enum DLDeviceType : int32_t { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 };
enum TypeCode : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLComplex = 5, kDLBool = 6 };

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null = C-contiguous
  uint64_t byte_offset;
};
struct DLManagedTensor {  // capsule "dltensor"
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DLManagedTensorVersioned {  // capsule "dltensor_versioned" (DLPack >= 1.0)
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned*);
  uint64_t flags;
  DLTensor dl_tensor;
};
inline constexpr uint32_t kSupportedMajorVersion = 1;

// The wire dtype of a DLPack dtype (kInvalid for complex, unsigned wider than 8 bits,
// vectors, ...). `as_bool`: the bytes are a bool tensor sent as uint8 (DLPack before 0.8
// has no bool).
wire::DType wire_dtype(DLDataType dtype, bool as_bool);

// Fills `ref` from `tensor`; returns why it cannot be sent ("" when it can). A CUDA
// tensor gets `cuda_stream` (the producer's stream) as its ordering.
std::string to_tensor_ref(const DLTensor& tensor, bool as_bool, uintptr_t cuda_stream, TensorRef* ref);

}  // namespace tensorscope::dlpack
