// tensor_ref.cc — see tensor_ref.h.
#include "tensor_ref.h"

#include <cstring>
#include <limits>

namespace tensorscope {
namespace {

// Copies `count` elements of `Size` bytes, `stride` bytes apart, to consecutive bytes.
template <size_t Size>
void gather(const char* src, int64_t stride, int64_t count, char* dst) {
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(dst, src, Size);
    src += stride;
    dst += Size;
  }
}

void gather_row(const char* src, int64_t stride, int64_t count, size_t size, char* dst) {
  switch (size) {
    case 1: gather<1>(src, stride, count, dst); return;
    case 2: gather<2>(src, stride, count, dst); return;
    case 4: gather<4>(src, stride, count, dst); return;
    case 8: gather<8>(src, stride, count, dst); return;
    default:
      for (int64_t i = 0; i < count; ++i) std::memcpy(dst + i * size, src + i * stride, size);
  }
}

}  // namespace

uint64_t element_count(const TensorRef& ref) {
  uint64_t n = 1;
  for (int d = 0; d < ref.ndim; ++d) n *= static_cast<uint64_t>(ref.shape[d]);
  return n;
}

bool is_c_contiguous(const TensorRef& ref) {
  int64_t expected = 1;
  for (int d = ref.ndim - 1; d >= 0; --d) {
    if (ref.shape[d] == 0) return true;
    if (ref.shape[d] != 1 && ref.strides[d] != expected) return false;
    expected *= ref.shape[d];
  }
  return true;
}

std::string tensor_ref_refusal(const TensorRef& ref) {
  const size_t size = wire::dtype_size(ref.dtype);
  if (size == 0) return "unsupported dtype";
  if (ref.ndim < 0 || ref.ndim > static_cast<int>(wire::kMaxDims)) {
    return "tensor has " + std::to_string(ref.ndim) + " dimensions; at most " + std::to_string(wire::kMaxDims) +
        " are supported";
  }
  // Sizes are checked for overflow: the payload size is computed from them.
  uint64_t elements = 1;
  for (int d = 0; d < ref.ndim; ++d) {
    if (ref.shape[d] < 0) return "negative size in dimension " + std::to_string(d);
    const auto extent = static_cast<uint64_t>(ref.shape[d]);
    if (extent != 0 && elements > std::numeric_limits<uint64_t>::max() / 16 / extent) {
      return "tensor is too large";
    }
    elements *= extent;
  }
  if (elements > 0 && ref.data == nullptr) return "tensor has no data pointer";
  switch (ref.device) {
    case DeviceType::kCpu: break;
    case DeviceType::kCuda:
      if (ref.device_index < 0) return "invalid CUDA device index";
      if (!is_c_contiguous(ref)) return "a CUDA tensor must be contiguous here";
      break;
    default: return "unknown device";
  }
  return {};
}

std::string device_name(const TensorRef& ref) {
  if (ref.device == DeviceType::kCuda) return "cuda" + std::to_string(ref.device_index);
  return "cpu";
}

void copy_strided(const TensorRef& ref, void* dst, uint64_t bytes) noexcept {
  if (bytes == 0) return;
  if (is_c_contiguous(ref)) {
    std::memcpy(dst, ref.data, bytes);
    return;
  }
  const size_t size = wire::dtype_size(ref.dtype);
  // Dimensions of size 1 never move the pointer: drop them. Then fold the innermost
  // dimensions that are laid out back to back into one contiguous run.
  int64_t shape[wire::kMaxDims];
  int64_t stride[wire::kMaxDims];  // in bytes
  int n = 0;
  for (int d = 0; d < ref.ndim; ++d) {
    if (ref.shape[d] == 1) continue;
    shape[n] = ref.shape[d];
    stride[n] = ref.strides[d] * static_cast<int64_t>(size);
    ++n;
  }
  int64_t run = 1;  // elements copied by one memcpy
  while (n > 0 && stride[n - 1] == run * static_cast<int64_t>(size)) {
    run *= shape[n - 1];
    --n;
  }
  // The innermost remaining dimension is gathered element by element (unless a run
  // folded it); the rest are walked with an odometer.
  const bool gather_inner = run == 1 && n > 0;
  const int64_t inner_count = gather_inner ? shape[n - 1] : 1;
  const int64_t inner_stride = gather_inner ? stride[n - 1] : 0;
  const int outer = gather_inner ? n - 1 : n;
  const size_t row_bytes = static_cast<size_t>(run * inner_count) * size;
  int64_t index[wire::kMaxDims] = {};
  const char* src = static_cast<const char*>(ref.data);
  char* out = static_cast<char*>(dst);
  char* const end = out + bytes;
  while (out < end) {
    if (gather_inner) {
      gather_row(src, inner_stride, inner_count, size, out);
    } else {
      std::memcpy(out, src, row_bytes);
    }
    out += row_bytes;
    for (int d = outer - 1; d >= 0; --d) {
      src += stride[d];
      if (++index[d] < shape[d]) break;
      src -= stride[d] * shape[d];
      index[d] = 0;
    }
  }
}

}  // namespace tensorscope
