// element_type.h — the element types tensorscope reads, their conversions to double,
// and the one dispatch over them (visit_element_type).
//
// Used wherever tensor elements are read: the daemon's workers (statistics, renderers,
// recording sinks) and `tensorscope compare`. Every loop over elements of a run-time
// type goes through visit_element_type, so adding a type is one change here.
// Thread safety: types and pure functions, thread-safe.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace tensorscope::tensor {

enum class ElementType : uint8_t {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kBool,
};

// Size in bytes of one element; 0 for a value outside the enum.
size_t element_size(ElementType type);

// torch-style name ("float32", "bfloat16", "bool", ...); "invalid" outside the enum.
const char* element_type_name(ElementType type);

// True for kFloat32/64/16 and kBFloat16 (types that can hold NaN/Inf).
bool is_floating(ElementType type);

// How the elements of the types C++ has no arithmetic type for are stored: their bytes
// as in memory (little-endian), read with memcpy like every other element.
struct Float16 {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
struct Bool {
  uint8_t byte;
};  // any non-zero byte is true
static_assert(sizeof(Float16) == 2 && sizeof(BFloat16) == 2 && sizeof(Bool) == 1);

// IEEE 754 binary16 bits to float, exact (subnormals, +-0, +-Inf, NaN payload kept) and
// branch-free (so block loops vectorise). Integer arithmetic only, except m * 2^-24
// whose operands and result are normal floats, so denormals-are-zero/flush-to-zero
// modes cannot change the result.
inline float float16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  const uint32_t normal = ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  const uint32_t inf_nan = 0x7f800000u | (mantissa << 13);  // NaN keeps its payload
  // Zero and subnormals: mantissa * 2^-24.
  const uint32_t small = std::bit_cast<uint32_t>(static_cast<float>(static_cast<int32_t>(mantissa)) * 0x1p-24f);
  const uint32_t is_small = 0u - static_cast<uint32_t>(exponent == 0);  // all ones or 0
  const uint32_t is_inf_nan = 0u - static_cast<uint32_t>(exponent == 0x1f);
  const uint32_t bits = (small & is_small) | (inf_nan & is_inf_nan) | (normal & ~(is_small | is_inf_nan));
  return std::bit_cast<float>(bits | sign);
}

// bfloat16 bits to float, exact (the upper half of a float32).
inline float bfloat16_to_float(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

// Each stored element as a double: exact for every type but int64 beyond 2^53 (rounded);
// NaN and +-Inf kept; bool is 0/1.
inline double to_double(float x) { return static_cast<double>(x); }
inline double to_double(double x) { return x; }
inline double to_double(Float16 x) { return static_cast<double>(float16_to_float(x.bits)); }
inline double to_double(BFloat16 x) { return static_cast<double>(bfloat16_to_float(x.bits)); }
inline double to_double(int8_t x) { return static_cast<double>(x); }
inline double to_double(int16_t x) { return static_cast<double>(x); }
inline double to_double(int32_t x) { return static_cast<double>(x); }
inline double to_double(int64_t x) { return static_cast<double>(x); }
inline double to_double(uint8_t x) { return static_cast<double>(x); }
inline double to_double(Bool x) { return x.byte != 0 ? 1.0 : 0.0; }

// Each stored element as the C++ arithmetic type that holds it exactly: float for
// Float16/BFloat16, int (0/1) for Bool, the value itself otherwise (an int64 stays an
// int64, so converting it to float rounds once, not twice through double).
template <typename T>
inline T to_arithmetic(T x) {
  return x;
}
inline float to_arithmetic(Float16 x) { return float16_to_float(x.bits); }
inline float to_arithmetic(BFloat16 x) { return bfloat16_to_float(x.bits); }
inline int to_arithmetic(Bool x) { return x.byte != 0 ? 1 : 0; }

// Storage types that can hold NaN/Inf.
template <typename T>
inline constexpr bool kIsFloatingStorage =
    std::is_floating_point_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

template <typename T>
struct ElementTag {
  using type = T;
};

// The one dispatch over element types: calls fn(ElementTag<T>{}) with T the storage type
// of `type` (float, double, Float16, BFloat16, int8_t, int16_t, int32_t, int64_t, uint8_t,
// Bool) and returns true; returns false without calling fn for a value outside the enum.
template <typename Fn>
bool visit_element_type(ElementType type, Fn&& fn) {
  switch (type) {
    case ElementType::kFloat32: fn(ElementTag<float>{}); return true;
    case ElementType::kFloat64: fn(ElementTag<double>{}); return true;
    case ElementType::kFloat16: fn(ElementTag<Float16>{}); return true;
    case ElementType::kBFloat16: fn(ElementTag<BFloat16>{}); return true;
    case ElementType::kInt8: fn(ElementTag<int8_t>{}); return true;
    case ElementType::kInt16: fn(ElementTag<int16_t>{}); return true;
    case ElementType::kInt32: fn(ElementTag<int32_t>{}); return true;
    case ElementType::kInt64: fn(ElementTag<int64_t>{}); return true;
    case ElementType::kUInt8: fn(ElementTag<uint8_t>{}); return true;
    case ElementType::kBool: fn(ElementTag<Bool>{}); return true;
  }
  return false;
}

// Converts the n elements at `src` (any alignment; each read once, with memcpy) to
// double in `out` with to_double. Does nothing for a type outside the enum.
void convert_to_double(const void* src, ElementType type, size_t n, double* out);

// Element `index` of `data` as a double (no bounds check beyond the caller's); NaN for a
// type outside the enum.
double element_as_double(const void* data, ElementType type, int64_t index);

}  // namespace tensorscope::tensor
