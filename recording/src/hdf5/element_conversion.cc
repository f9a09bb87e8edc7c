// element_conversion.cc — see element_conversion.h.
#include "hdf5/element_conversion.h"

#include <cmath>
#include <cstring>

#include "tensorscope/recording/wire_tensor.h"
#include "tensorscope/tensor/element_type.h"

namespace tensorscope::recording::hdf5 {
namespace {

template <typename S>
S load(const unsigned char* src, uint64_t i) {
  S value;
  std::memcpy(&value, src + i * sizeof(S), sizeof(S));
  return value;
}

template <typename D>
void store(unsigned char* dst, uint64_t i, D value) {
  std::memcpy(dst + i * sizeof(D), &value, sizeof(D));
}

// Converts `n` elements read by `read(src, i)` to `target` (float32/16/64) at `dst`.
template <typename Read>
void convert_elements(const unsigned char* src, uint64_t n, wire::DType target, unsigned char* dst, Read read) {
  switch (target) {
    case wire::DType::kFloat32:
      for (uint64_t i = 0; i < n; ++i) store(dst, i, static_cast<float>(read(src, i)));
      break;
    case wire::DType::kFloat64:
      for (uint64_t i = 0; i < n; ++i) store(dst, i, static_cast<double>(read(src, i)));
      break;
    case wire::DType::kFloat16:
      for (uint64_t i = 0; i < n; ++i) {
        store(dst, i, double_to_half(static_cast<double>(read(src, i))));
      }
      break;
    default: break;
  }
}

}  // namespace

uint16_t double_to_half(double d) {
  const uint16_t sign = std::signbit(d) ? 0x8000 : 0;
  if (std::isnan(d)) {
    uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof(bits));
    return static_cast<uint16_t>(sign | 0x7e00 | ((bits >> 43) & 0x1ff));  // quiet, top payload
  }
  const double a = std::fabs(d);
  if (a >= 65520.0) return sign | 0x7c00;  // rounds up past 65504: Inf
  if (a < 0x1p-14) {
    // Subnormal (or zero): a = m * 2^-24, m in [0, 1024]; m == 1024 is the smallest normal.
    const double m = std::nearbyint(a * 0x1p24);
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(m));
  }
  int e = 0;
  const double f = std::frexp(a, &e);                      // a = f * 2^e, f in [0.5, 1)
  double mant = std::nearbyint((f * 2.0 - 1.0) * 1024.0);  // exact before rounding
  int biased = e - 1 + 15;
  if (mant >= 1024.0) {
    mant = 0;
    ++biased;
  }
  if (biased >= 31) return sign | 0x7c00;
  return static_cast<uint16_t>(sign | (biased << 10) | static_cast<uint16_t>(mant));
}

void convert(wire::DType source, const unsigned char* src, uint64_t n, wire::DType target, unsigned char* dst) {
  tensor::visit_element_type(element_type(source), [&](auto tag) {
    using T = typename decltype(tag)::type;
    convert_elements(src, n, target, dst,
                     [](const unsigned char* s, uint64_t i) { return tensor::to_arithmetic(load<T>(s, i)); });
  });
}

}  // namespace tensorscope::recording::hdf5
