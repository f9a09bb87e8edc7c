// The cast formats' table: names and values agree, and each format's limits are the
// midpoints a round-to-nearest-even cast decides at (checked against the formats' own
// smallest subnormal and largest finite value, computed from their bit widths here).
#include "tensorscope/shared/cast_formats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

namespace tensorscope {
namespace {

TEST(CastFormats, NamesRoundTripAndNothingElseIsAFormat) {
  std::set<std::string> names;
  for (const CastFormatInfo& f : kCastFormats) {
    EXPECT_EQ(cast_format_from_name(f.name), f.format);
    EXPECT_EQ(cast_format_name(f.format), f.name);
    names.insert(std::string(f.name));
  }
  EXPECT_EQ(names.size(), kCastFormats.size());
  EXPECT_EQ(cast_format_name(CastFormat::kNone), "");
  EXPECT_EQ(cast_format_name(static_cast<CastFormat>(kMaxCastFormat + 1)), "");
  EXPECT_FALSE(cast_format_from_name(""));
  EXPECT_FALSE(cast_format_from_name("BF16"));
  EXPECT_FALSE(cast_format_from_name("fp8"));
}

// exponent bits, mantissa bits, whether the all-ones exponent holds finite values (e4m3fn)
struct Layout {
  int exponent, mantissa;
  bool no_inf;
};

TEST(CastFormats, LimitsAreTheRoundingMidpointsOfEachFormat) {
  const std::pair<CastFormat, Layout> layouts[] = {{CastFormat::kBf16, {8, 7, false}},
                                                   {CastFormat::kFp16, {5, 10, false}},
                                                   {CastFormat::kFp8E4m3, {4, 3, true}},
                                                   {CastFormat::kFp8E5m2, {5, 2, false}}};
  for (const auto& [format, l] : layouts) {
    const CastFormatInfo* info = cast_format_info(format);
    ASSERT_NE(info, nullptr);
    const int bias = (1 << (l.exponent - 1)) - 1;
    const double min_subnormal = std::ldexp(1.0, 1 - bias - l.mantissa);
    EXPECT_EQ(info->underflow_at_most, min_subnormal / 2) << info->name;
    // The largest finite value: all-ones exponent less one (with Inf), or all-ones
    // exponent with the mantissa 1..10 (e4m3fn: all ones is NaN).
    const int top = l.no_inf ? (1 << l.exponent) - 1 - bias : (1 << l.exponent) - 2 - bias;
    const int top_mantissa = l.no_inf ? (1 << l.mantissa) - 2 : (1 << l.mantissa) - 1;
    const double ulp = std::ldexp(1.0, top - l.mantissa);
    const double largest = std::ldexp(1.0, top) + top_mantissa * ulp;
    const double midpoint = largest + ulp / 2;
    // The midpoint rounds to the even neighbour: up (overflow) when the largest value's
    // mantissa is odd, down when it is even.
    if (top_mantissa % 2 == 1) {
      EXPECT_EQ(info->overflow_from, midpoint) << info->name;
    } else {
      EXPECT_GT(info->overflow_from, midpoint) << info->name;
      EXPECT_EQ(std::nextafter(midpoint, 1e300), info->overflow_from) << info->name;
    }
  }
}

}  // namespace
}  // namespace tensorscope
