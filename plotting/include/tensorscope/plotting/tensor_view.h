// tensor_view.h — a typed, read-only view of a tensor's elements (pointer + dtype + shape).
//
// Used by the daemon's worker processes to hand tensors (often still in shared memory
// written by another process) to the renderers. The view owns nothing. Every reader in
// plotting/ reads each element once per pass into a local, never trusts values to be
// finite, and never reads past numel() * element_size(type) bytes.
// Thread safety: plain value type; the free functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tensorscope::plotting {

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

// IEEE 754 binary16 bits to float, exact (subnormals, +-0, +-Inf, NaN payload kept).
float float16_to_float(uint16_t bits);
// bfloat16 bits to float, exact (the upper half of a float32).
float bfloat16_to_float(uint16_t bits);
// Reads element `index` (no bounds check beyond the caller's) and converts it to
// double; bool is 0/1 (any non-zero byte is true).
double element_as_double(const void* data, ElementType type, int64_t index);

struct TensorView {
  const void* data = nullptr;
  ElementType type = ElementType::kFloat32;
  std::vector<int64_t> shape;  // empty shape = scalar (1 element)

  // Product of the dims. 0 when any dim is negative or the product (or its size in
  // bytes) overflows int64: such a view has nothing to read.
  int64_t numel() const;
  // numel() * element_size(type).
  size_t nbytes() const;
  // Dims non-negative, no overflow, a known type, and data != nullptr unless numel()==0.
  bool valid() const;
};

}  // namespace tensorscope::plotting
