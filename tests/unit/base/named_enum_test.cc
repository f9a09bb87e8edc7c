// named_enum_test.cc — an enum and its names from one X-macro list: values numbered in
// list order, each name at its value's index; named_and_distinct refuses an empty or a
// repeated name.
#include "tensorscope/base/named_enum.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string_view>

namespace tensorscope {
namespace {

#define FRUITS(X) X(kApple, "apple") X(kPear, "pear") X(kPlum, "plum")
TENSORSCOPE_NAMED_ENUM(Fruit, uint8_t, kFruitNames, FRUITS);

TEST(NamedEnum, ValuesAreNumberedInListOrderWithTheirNames) {
  static_assert(kFruitNames.size() == 3);
  static_assert(static_cast<int>(Fruit::kApple) == 0 && static_cast<int>(Fruit::kPlum) == 2);
  EXPECT_EQ(kFruitNames[static_cast<size_t>(Fruit::kPear)], "pear");
  EXPECT_TRUE(named_and_distinct(kFruitNames));
}

TEST(NamedEnum, EmptyOrRepeatedNamesAreCaught) {
  constexpr std::array<std::string_view, 3> empty = {"a", "", "c"};
  constexpr std::array<std::string_view, 3> repeated = {"a", "b", "a"};
  constexpr std::array<std::string_view, 3> unnamed_first = {"", "b", "c"};
  static_assert(!named_and_distinct(empty));
  static_assert(!named_and_distinct(repeated));
  static_assert(!named_and_distinct(unnamed_first));
  static_assert(named_and_distinct(unnamed_first, 1));
  EXPECT_TRUE(named_and_distinct(repeated, 1)) << "from 1 on: b, a";
  EXPECT_FALSE(named_and_distinct(std::array<std::string_view, 2>{"b", "b"}));
}

}  // namespace
}  // namespace tensorscope
