// element_type.cc — sizes, names and conversions of element types (element_type.h).
#include "tensorscope/tensor/element_type.h"

#include <cstring>
#include <limits>

namespace tensorscope::tensor {

size_t element_size(ElementType type) {
  size_t size = 0;
  visit_element_type(type, [&](auto tag) { size = sizeof(typename decltype(tag)::type); });
  return size;
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
  bool floating = false;
  visit_element_type(type, [&](auto tag) { floating = kIsFloatingStorage<typename decltype(tag)::type>; });
  return floating;
}

void convert_to_double(const void* src, ElementType type, size_t n, double* out) {
  visit_element_type(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, double>) {
      std::memcpy(out, src, n * sizeof(double));
      return;
    }
    constexpr size_t kChunk = 1024;
    T raw[kChunk];
    const auto* bytes = static_cast<const unsigned char*>(src);
    for (size_t done = 0; done < n; done += kChunk) {
      const size_t count = n - done < kChunk ? n - done : kChunk;
      std::memcpy(raw, bytes + done * sizeof(T), count * sizeof(T));
      for (size_t i = 0; i < count; ++i) out[done + i] = to_double(raw[i]);
    }
  });
}

double element_as_double(const void* data, ElementType type, int64_t index) {
  double value = std::numeric_limits<double>::quiet_NaN();
  visit_element_type(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T raw;
    std::memcpy(&raw, static_cast<const unsigned char*>(data) + index * sizeof(T), sizeof(T));
    value = to_double(raw);
  });
  return value;
}

}  // namespace tensorscope::tensor
