// Nice tick steps and compact number formats used on frames.
#include "tensorscope/plotting/axis_ticks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace tensorscope::plotting {
namespace {

TEST(NiceTicks, OneTwoFive) {
  const AxisTicks t = nice_ticks(-4.6, 5.3, 11);
  EXPECT_EQ(t.step, 1);
  ASSERT_FALSE(t.values.empty());
  EXPECT_EQ(t.values.front(), -4);
  EXPECT_EQ(t.values.back(), 5);
  const AxisTicks small = nice_ticks(0.001, 0.0093, 5);
  EXPECT_DOUBLE_EQ(small.step, 0.002);
  EXPECT_LE(small.values.size(), 5u);
  const AxisTicks zero = nice_ticks(-0.3, 0.3, 7);
  bool has_exact_zero = false;
  for (double v : zero.values) has_exact_zero |= (v == 0 && !std::signbit(v));
  EXPECT_TRUE(has_exact_zero);
}

TEST(NiceTicks, NeverTooManyAndDegenerateInputs) {
  for (int max_ticks = 2; max_ticks < 15; ++max_ticks) {
    for (double hi : {0.7, 1.0, 13.0, 999.0, 1e7}) {
      EXPECT_LE(nice_ticks(0, hi, max_ticks).values.size(), static_cast<size_t>(max_ticks));
    }
  }
  EXPECT_TRUE(nice_ticks(1, 1, 5).values.empty());
  EXPECT_TRUE(nice_ticks(2, 1, 5).values.empty());
  EXPECT_TRUE(nice_ticks(0, NAN, 5).values.empty());
  EXPECT_TRUE(nice_ticks(0, INFINITY, 5).values.empty());
  const double big = std::numeric_limits<double>::max();
  EXPECT_LE(nice_ticks(-big / 2, big / 2, 5).values.size(), 5u);
  // A span too narrow for its magnitude must not loop forever.
  EXPECT_LE(nice_ticks(1e20, std::nextafter(1e20, 2e20), 5).values.size(), 5u);
}

TEST(FormatTick, DigitsFollowTheStep) {
  EXPECT_EQ(format_tick(0.25, 0.25), "0.25");
  EXPECT_EQ(format_tick(-3, 1), "-3");
  EXPECT_EQ(format_tick(1.5, 0.5), "1.5");
  EXPECT_EQ(format_tick(1000.5, 0.5), "1000.5");
  EXPECT_EQ(format_tick(-1e-17, 0.5), "0");
  EXPECT_EQ(format_tick(1.5e-7, 5e-8), "1.5e-7");
  EXPECT_EQ(format_tick(2e38, 1e38), "2e38");
  EXPECT_EQ(format_tick(3e6, 1e6), "3e6");
}

TEST(FormatNumber, Compact) {
  EXPECT_EQ(format_number(0.1011), "0.1011");
  EXPECT_EQ(format_number(-1.23456e-5), "-1.235e-5");
  EXPECT_EQ(format_number(1e38), "1e38");
  EXPECT_EQ(format_number(3.5), "3.5");
  EXPECT_EQ(format_number(-0.0), "0");
  EXPECT_EQ(format_number(NAN), "nan");
  EXPECT_EQ(format_number(INFINITY), "inf");
  EXPECT_EQ(format_number(-INFINITY), "-inf");
}

TEST(FormatCount, Compact) {
  EXPECT_EQ(format_count(0), "0");
  EXPECT_EQ(format_count(9999), "9999");
  EXPECT_EQ(format_count(10000), "10k");
  EXPECT_EQ(format_count(12345), "12.3k");
  EXPECT_EQ(format_count(60000), "60k");
  EXPECT_EQ(format_count(1500000), "1.5M");
  EXPECT_EQ(format_count(999999), "1M");
  EXPECT_EQ(format_count(4560000000ull), "4.56G");
  EXPECT_EQ(format_count(UINT64_MAX), "18.4E");
}

TEST(AxisTicks, SymlogRoundTripAndTickCandidates) {
  for (double c : {1e-6, 0.3, 50.0}) {
    for (double x : {-1e6, -2.5, -1e-7, 0.0, 3e-5, 1.0, 7e8}) {
      EXPECT_NEAR(symlog_inverse(symlog(x, c), c), x, std::abs(x) * 1e-9 + 1e-300) << x << " " << c;
    }
    EXPECT_EQ(symlog(0.0, c), 0.0);
    EXPECT_LT(symlog(-1.0, c), 0);
  }
  const std::vector<double> t = symlog_tick_candidates(-50, 2000, 0.01);
  ASSERT_GE(t.size(), 3u);
  EXPECT_EQ(t[0], 0);
  EXPECT_EQ(t[1], 1000);  // the outermost decade first
  EXPECT_EQ(t.back(), -0.01);
  for (double v : t) EXPECT_TRUE(v >= -50 && v <= 2000) << v;
  EXPECT_TRUE(symlog_tick_candidates(1, 1, 0.1).empty());
  EXPECT_TRUE(symlog_tick_candidates(0, 1, 0).empty());
  EXPECT_TRUE(symlog_tick_candidates(NAN, 1, 1).empty());
}

}  // namespace
}  // namespace tensorscope::plotting
