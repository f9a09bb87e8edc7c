// dlpack_ref.cc — see dlpack_ref.h.
#include "dlpack_ref.h"

namespace tensorscope::dlpack {

wire::DType wire_dtype(DLDataType dtype, bool as_bool) {
  if (dtype.lanes != 1) return wire::DType::kInvalid;
  if (as_bool)
    return dtype.bits == 8 && (dtype.code == kDLUInt || dtype.code == kDLBool) ? wire::DType::kBool
                                                                               : wire::DType::kInvalid;
  switch (dtype.code) {
    case kDLFloat:
      if (dtype.bits == 16) return wire::DType::kFloat16;
      if (dtype.bits == 32) return wire::DType::kFloat32;
      if (dtype.bits == 64) return wire::DType::kFloat64;
      break;
    case kDLBfloat:
      if (dtype.bits == 16) return wire::DType::kBFloat16;
      break;
    case kDLInt:
      if (dtype.bits == 8) return wire::DType::kInt8;
      if (dtype.bits == 16) return wire::DType::kInt16;
      if (dtype.bits == 32) return wire::DType::kInt32;
      if (dtype.bits == 64) return wire::DType::kInt64;
      break;
    case kDLUInt:
      if (dtype.bits == 8) return wire::DType::kUInt8;
      break;
    case kDLBool:
      if (dtype.bits == 8) return wire::DType::kBool;
      break;
    default: break;
  }
  return wire::DType::kInvalid;
}

std::string to_tensor_ref(const DLTensor& tensor, bool as_bool, uintptr_t cuda_stream, TensorRef* ref) {
  *ref = TensorRef();
  ref->dtype = wire_dtype(tensor.dtype, as_bool);
  if (ref->dtype == wire::DType::kInvalid) {
    if (tensor.dtype.code == kDLComplex) return "complex dtypes are not supported: push view_as_real(t) or t.abs()";
    return "DLPack dtype (code " + std::to_string(tensor.dtype.code) + ", " + std::to_string(tensor.dtype.bits) +
        " bits, " + std::to_string(tensor.dtype.lanes) + " lanes) is not supported";
  }
  if (tensor.ndim < 0 || tensor.ndim > static_cast<int32_t>(wire::kMaxDims)) {
    return "tensor has " + std::to_string(tensor.ndim) + " dimensions; at most " + std::to_string(wire::kMaxDims) +
        " are supported";
  }
  if (tensor.ndim > 0 && tensor.shape == nullptr) return "DLPack tensor without a shape";
  ref->ndim = tensor.ndim;
  int64_t contiguous = 1;
  for (int d = tensor.ndim - 1; d >= 0; --d) {
    ref->shape[d] = tensor.shape[d];
    ref->strides[d] = tensor.strides != nullptr ? tensor.strides[d] : contiguous;
    contiguous *= tensor.shape[d] > 0 ? tensor.shape[d] : 1;
  }
  ref->data = tensor.data == nullptr ? nullptr : static_cast<const char*>(tensor.data) + tensor.byte_offset;
  switch (tensor.device.device_type) {
    case kDLCPU:
    case kDLCUDAHost: ref->device = tensorscope::DeviceType::kCpu; break;
    case kDLCUDA:
    case kDLCUDAManaged:
      ref->device = tensorscope::DeviceType::kCuda;
      ref->device_index = tensor.device.device_id;
      ref->cuda_stream = cuda_stream;
      break;
    default: return "DLPack device type " + std::to_string(tensor.device.device_type) + " is not supported";
  }
  return tensor_ref_refusal(*ref);
}

}  // namespace tensorscope::dlpack
