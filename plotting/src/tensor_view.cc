// tensor_view.cc — element sizes, names and the hand-written half-precision conversions.
#include "tensorscope/plotting/tensor_view.h"

#include "element_blocks.h"

#include <bit>
#include <cstring>
#include <limits>

namespace tensorscope::plotting {

size_t element_size(ElementType type) {
  switch (type) {
    case ElementType::kFloat32: return 4;
    case ElementType::kFloat64: return 8;
    case ElementType::kFloat16: return 2;
    case ElementType::kBFloat16: return 2;
    case ElementType::kInt8: return 1;
    case ElementType::kInt16: return 2;
    case ElementType::kInt32: return 4;
    case ElementType::kInt64: return 8;
    case ElementType::kUInt8: return 1;
    case ElementType::kBool: return 1;
  }
  return 0;
}

const char* element_type_name(ElementType type) {
  switch (type) {
    case ElementType::kFloat32: return "float32";
    case ElementType::kFloat64: return "float64";
    case ElementType::kFloat16: return "float16";
    case ElementType::kBFloat16: return "bfloat16";
    case ElementType::kInt8: return "int8";
    case ElementType::kInt16: return "int16";
    case ElementType::kInt32: return "int32";
    case ElementType::kInt64: return "int64";
    case ElementType::kUInt8: return "uint8";
    case ElementType::kBool: return "bool";
  }
  return "invalid";
}

bool is_floating(ElementType type) {
  return type == ElementType::kFloat32 || type == ElementType::kFloat64 ||
         type == ElementType::kFloat16 || type == ElementType::kBFloat16;
}

float float16_to_float(uint16_t bits) { return internal::half_bits_to_float(bits); }

float bfloat16_to_float(uint16_t bits) { return internal::bfloat16_bits_to_float(bits); }

namespace {
template <typename T>
T load(const void* data, int64_t index) {
  T value;
  std::memcpy(&value, static_cast<const unsigned char*>(data) + index * sizeof(T), sizeof(T));
  return value;
}
}  // namespace

double element_as_double(const void* data, ElementType type, int64_t i) {
  switch (type) {
    case ElementType::kFloat32: return load<float>(data, i);
    case ElementType::kFloat64: return load<double>(data, i);
    case ElementType::kFloat16: return float16_to_float(load<uint16_t>(data, i));
    case ElementType::kBFloat16: return bfloat16_to_float(load<uint16_t>(data, i));
    case ElementType::kInt8: return load<int8_t>(data, i);
    case ElementType::kInt16: return load<int16_t>(data, i);
    case ElementType::kInt32: return load<int32_t>(data, i);
    case ElementType::kInt64: return static_cast<double>(load<int64_t>(data, i));
    case ElementType::kUInt8: return load<uint8_t>(data, i);
    case ElementType::kBool: return load<uint8_t>(data, i) != 0 ? 1.0 : 0.0;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

int64_t TensorView::numel() const {
  const int64_t size = static_cast<int64_t>(element_size(type));
  int64_t n = 1;
  for (int64_t dim : shape) {
    if (dim < 0) return 0;
    if (dim == 0) return 0;
    if (n > std::numeric_limits<int64_t>::max() / dim) return 0;
    n *= dim;
  }
  if (size > 0 && n > std::numeric_limits<int64_t>::max() / size) return 0;
  return n;
}

size_t TensorView::nbytes() const {
  return static_cast<size_t>(numel()) * element_size(type);
}

bool TensorView::valid() const {
  if (element_size(type) == 0) return false;
  int64_t n = 1;
  bool zero = false;
  for (int64_t dim : shape) {
    if (dim < 0) return false;
    if (dim == 0) zero = true;
    if (!zero && n > std::numeric_limits<int64_t>::max() / dim) return false;
    if (!zero) n *= dim;
  }
  if (!zero && n > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(element_size(type)))
    return false;
  return zero || data != nullptr;
}

}  // namespace tensorscope::plotting
