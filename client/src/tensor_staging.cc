// tensor_staging.cc — see tensor_staging.h.
#include "tensor_staging.h"

#include <ATen/Functions.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/version.h>

namespace tensorscope {
namespace {

const c10::impl::DeviceGuardImplInterface* cuda_guard() { return c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA); }

template <typename Fn>
std::string guarded(const char* what, Fn&& fn) noexcept {
  try {
    fn();
    return {};
  } catch (const std::exception& e) {
    return std::string(what) + ": " + e.what();
  } catch (...) {
    return std::string(what) + ": unknown exception";
  }
}

#define TS_STRINGIFY_INNER(x) #x
#define TS_STRINGIFY(x) TS_STRINGIFY_INNER(x)

}  // namespace

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
    return "tensor has " + std::to_string(tensor.dim()) + " dimensions; at most " + std::to_string(wire::kMaxDims) +
        " are supported";
  }
  if (tensor.is_sparse() || tensor.layout() != c10::kStrided) return "only dense (strided) tensors are supported";
  return {};
}

StagedTensor::StagedTensor(const at::Tensor& tensor) : tensor_(tensor) {
  if (!tensor_.is_cpu() && !tensor_.is_cuda()) tensor_ = tensor_.to(at::kCPU);
  if (tensor_.is_neg() || tensor_.is_conj()) tensor_ = tensor_.resolve_conj().resolve_neg();
  if (tensor_.is_cuda()) {
    // A strided view becomes contiguous on the tensor's own stream (ordered before the
    // copy); the memory may belong to another stream's pool: tell the caching allocator
    // that the current stream (which waits for the copy) uses it.
    if (!tensor_.is_contiguous()) tensor_ = tensor_.contiguous();
    stream_ = cuda_guard()->getStream(tensor_.device());
    if (tensor_.numel() > 0) cuda_guard()->recordDataPtrOnStream(tensor_.storage().data_ptr(), stream_);
    ref_.device = DeviceType::kCuda;
    ref_.device_index = tensor_.device().index();
    ref_.ordering = this;
  }
  ref_.data = tensor_.data_ptr();
  ref_.dtype = wire_dtype(tensor_.scalar_type());
  ref_.ndim = static_cast<int>(tensor_.dim());
  for (int d = 0; d < ref_.ndim; ++d) {
    ref_.shape[d] = tensor_.size(d);
    ref_.strides[d] = tensor_.stride(d);
  }
}

std::string StagedTensor::record_on_producer(void* event) {
  return guarded("recording an event on the tensor's stream", [&] {
    void* e = event;  // c10 records on an event given to it
    cuda_guard()->record(&e, stream_, stream_.device_index(), c10::EventFlag::PYTORCH_DEFAULT);
  });
}

std::string StagedTensor::producer_waits_for(void* event) {
  return guarded("ordering the tensor's stream after the copy", [&] { cuda_guard()->block(event, stream_); });
}

std::string StagedTensor::copy_to_host(void* dst, uint64_t bytes) {
  return guarded("copying to the host", [&] {
    at::Tensor target = at::from_blob(dst, tensor_.sizes(), at::TensorOptions().dtype(tensor_.scalar_type()));
    target.copy_(tensor_);
  });
}

std::string libtorch_version() {
#if defined(TORCH_VERSION)
  return TORCH_VERSION;
#elif defined(TORCH_VERSION_MAJOR) && defined(TORCH_VERSION_MINOR) && defined(TORCH_VERSION_PATCH)
  return TS_STRINGIFY(TORCH_VERSION_MAJOR) "." TS_STRINGIFY(TORCH_VERSION_MINOR) "." TS_STRINGIFY(TORCH_VERSION_PATCH);
#else
  return "unknown";
#endif
}

}  // namespace tensorscope
