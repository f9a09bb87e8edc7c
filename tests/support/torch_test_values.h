// torch_test_values.h — the known values of the round-trip test files: the libtorch
// generator (tests/support/make_torch_files.cc), the Python snippets and the tests that
// check what `tensorscope compare` reads from them all compute the same values here.
//
// Test-only; pure functions, thread-safe. No libtorch and no tensorscope dependency,
// so the generator linked with libtorch can include it too.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tensorscope::testing {

// The base tensor of every file is [kTorchTestRows, kTorchTestCols].
inline constexpr int64_t kTorchTestRows = 3;
inline constexpr int64_t kTorchTestCols = 5;

// The dtypes the reader supports, by wire::dtype_name.
inline const std::vector<std::string>& torch_test_dtypes() {
  static const std::vector<std::string> kNames = {"float32", "float64", "float16", "bfloat16", "int8",
                                                  "int16",   "int32",   "int64",   "uint8",    "bool"};
  return kNames;
}

// Element i (row-major) of the base tensor of `dtype`; every value is exact in that
// dtype (small multiples of 0.25 for the float types, which bfloat16 and float16 hold).
inline double torch_test_value(const std::string& dtype, int64_t i) {
  const int64_t k = (i * 7) % 23 - 11;  // -11 .. 11, all different for i < 23
  if (dtype == "bool") return i % 3 == 0 ? 1.0 : 0.0;
  if (dtype == "uint8") return static_cast<double>(200 + (i * 7) % 23);
  if (dtype == "int8") return static_cast<double>(k * 11);
  if (dtype == "int16") return static_cast<double>(k * 2900);
  if (dtype == "int32") return static_cast<double>(k * 190000000);
  if (dtype == "int64") return static_cast<double>(k * int64_t{800000000000});
  return static_cast<double>(k) * 0.5 + 0.25;  // float types
}

// The base tensor's values as doubles, row-major.
inline std::vector<double> torch_test_base(const std::string& dtype) {
  std::vector<double> v;
  for (int64_t i = 0; i < kTorchTestRows * kTorchTestCols; ++i) v.push_back(torch_test_value(dtype, i));
  return v;
}

// Raw little-endian bytes of `values` in `dtype` (values exact in it, see above).
inline std::string torch_test_bytes(const std::string& dtype, const std::vector<double>& values) {
  std::string out;
  auto put = [&out](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
  for (double d : values) {
    if (dtype == "float32") {
      const float f = static_cast<float>(d);
      put(&f, 4);
    } else if (dtype == "float64") {
      put(&d, 8);
    } else if (dtype == "bfloat16" || dtype == "float16") {
      const float f = static_cast<float>(d);
      uint32_t bits = 0;
      std::memcpy(&bits, &f, 4);
      uint16_t h = 0;
      if (dtype == "bfloat16") {
        h = static_cast<uint16_t>(bits >> 16);  // exact: the low bits are 0
      } else if ((bits & 0x7fffffffu) != 0) {   // normal float16 values only
        const uint32_t sign = (bits >> 16) & 0x8000u;
        const int32_t exponent = static_cast<int32_t>((bits >> 23) & 0xff) - 127 + 15;
        h = static_cast<uint16_t>(sign | (static_cast<uint32_t>(exponent) << 10) | ((bits >> 13) & 0x3ffu));
      } else {
        h = static_cast<uint16_t>((bits >> 16) & 0x8000u);
      }
      put(&h, 2);
    } else if (dtype == "int8" || dtype == "uint8" || dtype == "bool") {
      const int64_t i = static_cast<int64_t>(d);
      const uint8_t b = static_cast<uint8_t>(i);
      put(&b, 1);
    } else if (dtype == "int16") {
      const int16_t i = static_cast<int16_t>(d);
      put(&i, 2);
    } else if (dtype == "int32") {
      const int32_t i = static_cast<int32_t>(d);
      put(&i, 4);
    } else if (dtype == "int64") {
      const int64_t i = static_cast<int64_t>(d);
      put(&i, 8);
    }
  }
  return out;
}

// The logical values of a view of `base` (a row-major buffer): element j of the view,
// at multi-index (i_0, ..., i_n), is base[offset + sum(i_d * stride_d)].
inline std::vector<double> view_values(const std::vector<double>& base, int64_t offset,
                                       const std::vector<int64_t>& size, const std::vector<int64_t>& stride) {
  int64_t numel = 1;
  for (int64_t s : size) numel *= s;
  std::vector<double> out;
  std::vector<int64_t> index(size.size(), 0);
  for (int64_t j = 0; j < numel; ++j) {
    int64_t at = offset;
    for (size_t d = 0; d < size.size(); ++d) at += index[d] * stride[d];
    out.push_back(base[static_cast<size_t>(at)]);
    for (size_t d = size.size(); d-- > 0;) {
      if (++index[d] < size[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

}  // namespace tensorscope::testing
