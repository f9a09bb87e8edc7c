#include "tensor_staging.h"

#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>

#include <cstring>

namespace tensorscope {

wire::DType wire_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float: return wire::DType::kFloat32;
    case c10::ScalarType::Double: return wire::DType::kFloat64;
    case c10::ScalarType::Half: return wire::DType::kFloat16;
    case c10::ScalarType::BFloat16: return wire::DType::kBFloat16;
    case c10::ScalarType::Char: return wire::DType::kInt8;
    case c10::ScalarType::Short: return wire::DType::kInt16;
    case c10::ScalarType::Int: return wire::DType::kInt32;
    case c10::ScalarType::Long: return wire::DType::kInt64;
    case c10::ScalarType::Byte: return wire::DType::kUInt8;
    case c10::ScalarType::Bool: return wire::DType::kBool;
    default: return wire::DType::kInvalid;
  }
}

std::string device_string(const at::Tensor& tensor) {
  const c10::Device device = tensor.device();
  if (device.is_cpu()) return "cpu";
  std::string name = c10::DeviceTypeName(device.type(), /*lower_case=*/true);
  if (device.has_index()) name += std::to_string(device.index());
  return name;
}

std::string staging_refusal(const at::Tensor& tensor) {
  if (!tensor.defined()) return "undefined tensor";
  const c10::ScalarType type = tensor.scalar_type();
  if (wire_dtype(type) == wire::DType::kInvalid) {
    if (c10::isComplexType(type)) {
      return std::string("complex dtype ") + c10::toString(type) +
             " is not supported: push torch::view_as_real(t) or t.abs() instead";
    }
    return std::string("dtype ") + c10::toString(type) + " is not supported";
  }
  if (tensor.dim() > static_cast<int64_t>(wire::kMaxDims)) {
    return "tensor has " + std::to_string(tensor.dim()) + " dimensions; at most " +
           std::to_string(wire::kMaxDims) + " are supported";
  }
  if (tensor.is_sparse() || tensor.layout() != c10::kStrided) return "only dense (strided) tensors are supported";
  return {};
}

void copy_record_fields(const wire::RecordHeader& from, wire::RecordHeader* to) {
  to->step = from.step;
  to->timestamp_unix_ns = from.timestamp_unix_ns;
  to->rank = from.rank;
  to->dtype = from.dtype;
  to->kind = from.kind;
  to->ndim = from.ndim;
  to->render_hint = from.render_hint;
  std::memcpy(to->shape, from.shape, sizeof(to->shape));
  std::memcpy(to->name, from.name, sizeof(to->name));
  std::memcpy(to->device, from.device, sizeof(to->device));
  std::memcpy(to->label, from.label, sizeof(to->label));
}

void copy_into(const at::Tensor& tensor, void* dst, size_t bytes) {
  if (bytes == 0) return;
  if (tensor.is_cpu() && tensor.is_contiguous() && !tensor.is_neg() && !tensor.is_conj()) {
    std::memcpy(dst, tensor.data_ptr(), bytes);
    return;
  }
  // Strided or non-CPU: let ATen write the C-contiguous layout straight into the ring
  // (without recording anything for autograd).
  at::NoGradGuard no_grad;
  at::Tensor target = at::from_blob(dst, tensor.sizes(),
                                    at::TensorOptions().dtype(tensor.scalar_type()).device(at::kCPU));
  target.copy_(tensor);
}

}  // namespace tensorscope
