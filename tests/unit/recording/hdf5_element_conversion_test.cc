// hdf5_element_conversion_test.cc — the HDF5 sink's conversion on write: float64 to
// binary16 bits (every float16 value round trips; halfway cases round to even; overflow,
// subnormals, signed zeros, NaN), and conversion of each element type to float32,
// float16 and float64 from unaligned input.
#include "hdf5/element_conversion.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "tensorscope/tensor/element_type.h"

namespace tensorscope::recording::hdf5 {
namespace {

using wire::DType;

TEST(Hdf5ElementConversion, EveryHalfRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const double d = tensor::float16_to_float(h);
    if (std::isnan(d)) {
      EXPECT_TRUE(std::isnan(tensor::float16_to_float(double_to_half(d)))) << bits;
    } else {
      EXPECT_EQ(double_to_half(d), h) << bits;
    }
  }
}

TEST(Hdf5ElementConversion, HalfRoundingAndRange) {
  EXPECT_EQ(double_to_half(1.0 + 0x1p-11), 0x3c00);      // halfway: to even (1.0)
  EXPECT_EQ(double_to_half(1.0 + 3 * 0x1p-11), 0x3c02);  // halfway: to even (up)
  EXPECT_EQ(double_to_half(1.0 + 0x1p-11 + 0x1p-30), 0x3c01);
  EXPECT_EQ(double_to_half(65504.0), 0x7bff);  // the largest half
  EXPECT_EQ(double_to_half(65519.99), 0x7bff);
  EXPECT_EQ(double_to_half(65520.0), 0x7c00);  // rounds past it: Inf
  EXPECT_EQ(double_to_half(-1e300), 0xfc00);
  EXPECT_EQ(double_to_half(std::numeric_limits<double>::infinity()), 0x7c00);
  EXPECT_EQ(double_to_half(0x1p-24), 0x0001);            // the smallest subnormal
  EXPECT_EQ(double_to_half(0x1p-26), 0x0000);            // below half of it: zero
  EXPECT_EQ(double_to_half(0x1p-14 - 0x1p-30), 0x0400);  // rounds up to the smallest normal
  EXPECT_EQ(double_to_half(-0.0), 0x8000);
  const uint16_t nan = double_to_half(std::nan(""));
  EXPECT_EQ(nan & 0x7e00, 0x7e00);  // a quiet NaN
}

template <typename T>
std::vector<unsigned char> bytes_of(const std::vector<T>& values) {
  std::vector<unsigned char> out(1 + values.size() * sizeof(T));  // unaligned after byte 0
  std::memcpy(out.data() + 1, values.data(), values.size() * sizeof(T));
  return out;
}

template <typename T>
std::vector<T> values_of(const std::vector<unsigned char>& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

TEST(Hdf5ElementConversion, ConvertsEachTypeToFloats) {
  const std::vector<unsigned char> ints = bytes_of<int32_t>({-3, 0, 70000});
  std::vector<unsigned char> out(3 * 8);
  convert(DType::kInt32, ints.data() + 1, 3, DType::kFloat64, out.data());
  EXPECT_EQ(values_of<double>(out), (std::vector<double>{-3, 0, 70000}));

  out.assign(3 * 4, 0);
  convert(DType::kInt32, ints.data() + 1, 3, DType::kFloat32, out.data());
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{-3, 0, 70000}));

  out.assign(3 * 2, 0);
  convert(DType::kInt32, ints.data() + 1, 3, DType::kFloat16, out.data());
  EXPECT_EQ(values_of<uint16_t>(out), (std::vector<uint16_t>{0xc200, 0x0000, 0x7c00}));

  // An int64 converting to float32 rounds once (2^53 + 1 is not a double).
  const int64_t big = (int64_t{1} << 53) + (int64_t{1} << 29) + 1;
  const std::vector<unsigned char> longs = bytes_of<int64_t>({big});
  out.assign(4, 0);
  convert(DType::kInt64, longs.data() + 1, 1, DType::kFloat32, out.data());
  EXPECT_EQ(values_of<float>(out)[0], static_cast<float>(big));

  const std::vector<unsigned char> bools = bytes_of<uint8_t>({0, 1, 7});
  out.assign(3 * 4, 0);
  convert(DType::kBool, bools.data() + 1, 3, DType::kFloat32, out.data());
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{0, 1, 1}));

  const std::vector<unsigned char> bf16 = bytes_of<uint16_t>({0x3f80, 0xc000});  // 1, -2
  out.assign(2 * 8, 0);
  convert(DType::kBFloat16, bf16.data() + 1, 2, DType::kFloat64, out.data());
  EXPECT_EQ(values_of<double>(out), (std::vector<double>{1, -2}));

  const std::vector<unsigned char> halves = bytes_of<uint16_t>({0x3c00, 0x7c00});  // 1, Inf
  out.assign(2 * 4, 0);
  convert(DType::kFloat16, halves.data() + 1, 2, DType::kFloat32, out.data());
  EXPECT_EQ(values_of<float>(out)[0], 1.0f);
  EXPECT_TRUE(std::isinf(values_of<float>(out)[1]));
}

TEST(Hdf5ElementConversion, ANonFloatTargetWritesNothing) {
  const std::vector<unsigned char> ints = bytes_of<int32_t>({1, 2});
  std::vector<unsigned char> out(8, 0xab);
  convert(DType::kInt32, ints.data() + 1, 2, DType::kInt64, out.data());
  EXPECT_EQ(out, std::vector<unsigned char>(8, 0xab));
}

}  // namespace
}  // namespace tensorscope::recording::hdf5
