// Element types, sizes, names, numel, and the hand-written float16/bfloat16 conversions.
#include "tensorscope/tensor/tensor_view.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace tensorscope::tensor {
namespace {

TEST(ElementType, SizesAndNames) {
  EXPECT_EQ(element_size(ElementType::kFloat32), 4u);
  EXPECT_EQ(element_size(ElementType::kFloat64), 8u);
  EXPECT_EQ(element_size(ElementType::kFloat16), 2u);
  EXPECT_EQ(element_size(ElementType::kBFloat16), 2u);
  EXPECT_EQ(element_size(ElementType::kInt8), 1u);
  EXPECT_EQ(element_size(ElementType::kInt16), 2u);
  EXPECT_EQ(element_size(ElementType::kInt32), 4u);
  EXPECT_EQ(element_size(ElementType::kInt64), 8u);
  EXPECT_EQ(element_size(ElementType::kUInt8), 1u);
  EXPECT_EQ(element_size(ElementType::kBool), 1u);
  EXPECT_EQ(element_size(static_cast<ElementType>(200)), 0u);
  EXPECT_STREQ(element_type_name(ElementType::kFloat32), "float32");
  EXPECT_STREQ(element_type_name(ElementType::kBFloat16), "bfloat16");
  EXPECT_STREQ(element_type_name(ElementType::kFloat16), "float16");
  EXPECT_STREQ(element_type_name(ElementType::kUInt8), "uint8");
  EXPECT_STREQ(element_type_name(ElementType::kBool), "bool");
  EXPECT_STREQ(element_type_name(static_cast<ElementType>(200)), "invalid");
  EXPECT_TRUE(is_floating(ElementType::kBFloat16));
  EXPECT_FALSE(is_floating(ElementType::kInt64));
}

TEST(Float16, KnownValues) {
  EXPECT_EQ(float16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(float16_to_float(0xc000), -2.0f);
  EXPECT_EQ(float16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(float16_to_float(0x0400), std::ldexp(1.0f, -14));         // smallest normal
  EXPECT_EQ(float16_to_float(0x0001), std::ldexp(1.0f, -24));         // smallest subnormal
  EXPECT_EQ(float16_to_float(0x03ff), 1023 * std::ldexp(1.0f, -24));  // largest subnormal
  EXPECT_EQ(float16_to_float(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(float16_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(std::bit_cast<uint32_t>(float16_to_float(0x0000)), 0u);
  EXPECT_EQ(std::bit_cast<uint32_t>(float16_to_float(0x8000)), 0x80000000u);  // -0
  EXPECT_EQ(float16_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(float16_to_float(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(float16_to_float(0x7e00)));
  EXPECT_TRUE(std::isnan(float16_to_float(0x7c01)));  // signalling NaN stays NaN
  EXPECT_TRUE(std::isnan(float16_to_float(0xfe00)));
}

TEST(Float16, AllBitPatternsMatchTheFormula) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const int sign = (bits & 0x8000) ? -1 : 1;
    const int exponent = (bits >> 10) & 0x1f;
    const int mantissa = bits & 0x3ff;
    const float got = float16_to_float(static_cast<uint16_t>(bits));
    if (exponent == 0x1f) {
      if (mantissa == 0) {
        EXPECT_EQ(got, sign * std::numeric_limits<float>::infinity()) << bits;
      } else {
        EXPECT_TRUE(std::isnan(got)) << bits;
      }
      continue;
    }
    const double expected = exponent == 0 ? sign * std::ldexp(double(mantissa), -24)
                                          : sign * std::ldexp(1.0 + mantissa / 1024.0, exponent - 15);
    ASSERT_EQ(static_cast<double>(got), expected) << "bits " << bits;
    EXPECT_EQ(std::signbit(got), sign < 0) << bits;
  }
}

TEST(BFloat16, KnownValuesAndAllPatterns) {
  EXPECT_EQ(bfloat16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bfloat16_to_float(0xc040), -3.0f);
  EXPECT_EQ(bfloat16_to_float(0x4049), 3.140625f);
  EXPECT_EQ(bfloat16_to_float(0x0001), std::ldexp(1.0f, -133));  // subnormal
  EXPECT_EQ(bfloat16_to_float(0x7f7f), 0x1.fep127f);             // largest finite
  EXPECT_EQ(bfloat16_to_float(0x7f80), std::numeric_limits<float>::infinity());
  EXPECT_EQ(bfloat16_to_float(0xff80), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(bfloat16_to_float(0x7fc0)));
  EXPECT_TRUE(std::isnan(bfloat16_to_float(0xffc1)));
  EXPECT_EQ(std::bit_cast<uint32_t>(bfloat16_to_float(0x8000)), 0x80000000u);
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float got = bfloat16_to_float(static_cast<uint16_t>(bits));
    ASSERT_EQ(std::bit_cast<uint32_t>(got), bits << 16);
  }
}

TEST(ElementAsDouble, EveryTypeUnaligned) {
  alignas(8) unsigned char buffer[32] = {};
  unsigned char* p = buffer + 1;  // deliberately misaligned
  auto put = [&](const auto& v) { std::memcpy(p + sizeof(v), &v, sizeof(v)); };
  put(-1.5f);
  EXPECT_EQ(element_as_double(p, ElementType::kFloat32, 1), -1.5);
  put(1e300);
  EXPECT_EQ(element_as_double(p, ElementType::kFloat64, 1), 1e300);
  put(uint16_t{0x3c00});
  EXPECT_EQ(element_as_double(p, ElementType::kFloat16, 1), 1.0);
  put(uint16_t{0xbf80});
  EXPECT_EQ(element_as_double(p, ElementType::kBFloat16, 1), -1.0);
  put(int8_t{-128});
  EXPECT_EQ(element_as_double(p, ElementType::kInt8, 1), -128.0);
  put(int16_t{-32768});
  EXPECT_EQ(element_as_double(p, ElementType::kInt16, 1), -32768.0);
  put(int32_t{-7});
  EXPECT_EQ(element_as_double(p, ElementType::kInt32, 1), -7.0);
  put(int64_t{1} << 40);
  EXPECT_EQ(element_as_double(p, ElementType::kInt64, 1), std::ldexp(1.0, 40));
  put(uint8_t{255});
  EXPECT_EQ(element_as_double(p, ElementType::kUInt8, 1), 255.0);
  put(uint8_t{7});  // a bool byte that is neither 0 nor 1 is true
  EXPECT_EQ(element_as_double(p, ElementType::kBool, 1), 1.0);
  put(uint8_t{0});
  EXPECT_EQ(element_as_double(p, ElementType::kBool, 1), 0.0);
}

TEST(TensorView, NumelAndValidity) {
  float x = 0;
  EXPECT_EQ((TensorView{&x, ElementType::kFloat32, {}}).numel(), 1);  // scalar
  EXPECT_EQ((TensorView{&x, ElementType::kFloat32, {2, 3, 4}}).numel(), 24);
  EXPECT_EQ((TensorView{&x, ElementType::kFloat32, {2, 3, 4}}).nbytes(), 96u);
  EXPECT_EQ((TensorView{&x, ElementType::kFloat32, {2, 0, 4}}).numel(), 0);
  EXPECT_TRUE((TensorView{nullptr, ElementType::kFloat32, {2, 0}}).valid());
  EXPECT_FALSE((TensorView{nullptr, ElementType::kFloat32, {2}}).valid());
  EXPECT_EQ((TensorView{&x, ElementType::kFloat32, {2, -3}}).numel(), 0);
  EXPECT_FALSE((TensorView{&x, ElementType::kFloat32, {2, -3}}).valid());
  const int64_t big = int64_t{1} << 40;
  EXPECT_EQ((TensorView{&x, ElementType::kFloat32, {big, big}}).numel(), 0);  // overflow
  EXPECT_FALSE((TensorView{&x, ElementType::kFloat32, {big, big}}).valid());
  // The element count fits but the byte count would not.
  EXPECT_EQ((TensorView{&x, ElementType::kFloat64, {int64_t{1} << 61}}).numel(), 0);
  EXPECT_FALSE((TensorView{&x, static_cast<ElementType>(99), {1}}).valid());
}

}  // namespace
}  // namespace tensorscope::tensor
