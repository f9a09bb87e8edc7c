// The one dispatch over element types (visit_element_type), convert_to_double, and the
// two block iterations every reader of elements uses.
#include "tensorscope/tensor/element_blocks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tensorscope/tensor/element_type.h"

namespace tensorscope::tensor {
namespace {

constexpr ElementType kEveryType[] = {
    ElementType::kFloat32, ElementType::kFloat64, ElementType::kFloat16, ElementType::kBFloat16, ElementType::kInt8,
    ElementType::kInt16,   ElementType::kInt32,   ElementType::kInt64,   ElementType::kUInt8,    ElementType::kBool};

TEST(VisitElementType, EveryTypeOnceWithItsStorage) {
  for (ElementType type : kEveryType) {
    int calls = 0;
    size_t size = 0;
    bool floating = false;
    EXPECT_TRUE(visit_element_type(type, [&](auto tag) {
      using T = typename decltype(tag)::type;
      ++calls;
      size = sizeof(T);
      floating = kIsFloatingStorage<T>;
    }));
    EXPECT_EQ(calls, 1) << element_type_name(type);
    EXPECT_EQ(size, element_size(type)) << element_type_name(type);
    EXPECT_EQ(floating, is_floating(type)) << element_type_name(type);
  }
  int calls = 0;
  EXPECT_FALSE(visit_element_type(static_cast<ElementType>(200), [&](auto) { ++calls; }));
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(element_size(static_cast<ElementType>(200)), 0u);
  EXPECT_STREQ(element_type_name(static_cast<ElementType>(200)), "invalid");
  EXPECT_TRUE(std::isnan(element_as_double("", static_cast<ElementType>(200), 0)));
}

// Bytes of `n` elements of every type, with NaN/Inf where the type has them.
std::vector<unsigned char> sample_bytes(ElementType type, size_t n) {
  std::vector<unsigned char> bytes(n * element_size(type) + 1);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 37 + 11);
  if (type == ElementType::kFloat32 && n > 2) {
    const float specials[2] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()};
    std::memcpy(bytes.data() + 4, specials, sizeof(specials));
  }
  return bytes;
}

TEST(ConvertToDouble, AgreesWithElementAsDoubleForEveryTypeUnaligned) {
  constexpr size_t kCount = 3000;  // more than one internal chunk
  for (ElementType type : kEveryType) {
    const std::vector<unsigned char> bytes = sample_bytes(type, kCount);
    const unsigned char* data = bytes.data() + 1;  // misaligned
    std::vector<double> out(kCount, -12345.0);
    convert_to_double(data, type, kCount, out.data());
    for (size_t i = 0; i < kCount; ++i) {
      const double want = element_as_double(data, type, static_cast<int64_t>(i));
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(out[i])) << element_type_name(type) << " at " << i;
      } else {
        ASSERT_EQ(out[i], want) << element_type_name(type) << " at " << i;
      }
    }
  }
}

TEST(ElementBlocks, OrderedBlocksCoverEveryElementInOrder) {
  const size_t n = kOrderedBlockElements * 2 + 5;
  for (ElementType type : kEveryType) {
    const std::vector<unsigned char> bytes = sample_bytes(type, n);
    const TensorView view{bytes.data(), type, {static_cast<int64_t>(n)}};
    int64_t next = 0;
    for_each_ordered_block(view, [&](int64_t first, const double* v, size_t count) {
      ASSERT_EQ(first, next);
      for (size_t i = 0; i < count; ++i) {
        const double want = element_as_double(view.data, type, first + static_cast<int64_t>(i));
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(v[i]));
        } else {
          ASSERT_EQ(v[i], want) << element_type_name(type);
        }
      }
      next += static_cast<int64_t>(count);
    });
    EXPECT_EQ(next, static_cast<int64_t>(n)) << element_type_name(type);
  }
}

TEST(ElementBlocks, FiniteBlocksKeepFiniteValuesAndCountTheRest) {
  const size_t n = kBlockElements + 100;
  for (ElementType type : kEveryType) {
    const std::vector<unsigned char> bytes = sample_bytes(type, n);
    const TensorView view{bytes.data(), type, {static_cast<int64_t>(n)}};
    std::vector<double> want;
    NonFiniteCounts want_nf;
    for (size_t i = 0; i < n; ++i) {
      const double x = element_as_double(view.data, type, static_cast<int64_t>(i));
      if (std::isnan(x)) {
        ++want_nf.nan;
      } else if (x == std::numeric_limits<double>::infinity()) {
        ++want_nf.pos_inf;
      } else if (x == -std::numeric_limits<double>::infinity()) {
        ++want_nf.neg_inf;
      } else {
        want.push_back(x);
      }
    }
    std::vector<double> got;
    NonFiniteCounts nf;
    for_each_finite_block(view, &nf, [&](const double* v, size_t count) { got.insert(got.end(), v, v + count); });
    EXPECT_EQ(got, want) << element_type_name(type);
    EXPECT_EQ(nf.nan, want_nf.nan) << element_type_name(type);
    EXPECT_EQ(nf.pos_inf, want_nf.pos_inf) << element_type_name(type);
    EXPECT_EQ(nf.neg_inf, want_nf.neg_inf) << element_type_name(type);
    if (type == ElementType::kFloat32) {  // the NaN and -Inf planted by sample_bytes
      EXPECT_GE(nf.nan, 1u);
      EXPECT_GE(nf.neg_inf, 1u);
    }
  }
}

TEST(ElementBlocks, InvalidViewsGiveNothing) {
  float x = 1;
  int calls = 0;
  NonFiniteCounts nf;
  for_each_finite_block(TensorView{&x, static_cast<ElementType>(99), {1}}, &nf,
                        [&](const double*, size_t) { ++calls; });
  for_each_ordered_block(TensorView{nullptr, ElementType::kFloat32, {4}},
                         [&](int64_t, const double*, size_t) { ++calls; });
  for_each_ordered_block(TensorView{&x, ElementType::kFloat32, {2, -1}},
                         [&](int64_t, const double*, size_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace tensorscope::tensor
