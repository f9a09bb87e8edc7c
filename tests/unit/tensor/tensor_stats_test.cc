// compute_stats on known data: NaN/Inf, integers, bool, all equal, empty, huge values.
#include "tensorscope/tensor/tensor_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace tensorscope::tensor {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

template <typename T>
TensorStats stats_of(const std::vector<T>& v, ElementType type) {
  return compute_stats(TensorView{v.data(), type, {static_cast<int64_t>(v.size())}});
}

// Two-pass in long double over the finite values.
struct Reference {
  long double mean = 0, std = 0;
};
Reference reference(const std::vector<double>& v) {
  long double sum = 0;
  size_t n = 0;
  for (double x : v) {
    if (std::isfinite(x)) {
      sum += x;
      ++n;
    }
  }
  Reference r;
  r.mean = sum / n;
  long double m2 = 0;
  for (double x : v) {
    if (std::isfinite(x)) m2 += (x - r.mean) * (x - r.mean);
  }
  r.std = std::sqrt(m2 / n);
  return r;
}

TEST(TensorStats, KnownFloats) {
  const TensorStats s = stats_of(std::vector<float>{1, 2, 3, 4}, ElementType::kFloat32);
  EXPECT_EQ(s.count, 4u);
  EXPECT_EQ(s.finite_count, 4u);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.std, std::sqrt(1.25));
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 4);
}

TEST(TensorStats, NaNAndInfAreCountedApart) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> v = {1, NAN, inf, -inf, 3, NAN, inf};
  const TensorStats s = stats_of(v, ElementType::kFloat32);
  EXPECT_EQ(s.count, 7u);
  EXPECT_EQ(s.finite_count, 2u);
  EXPECT_EQ(s.nan_count, 2u);
  EXPECT_EQ(s.pos_inf_count, 2u);
  EXPECT_EQ(s.neg_inf_count, 1u);
  EXPECT_DOUBLE_EQ(s.mean, 2);
  EXPECT_DOUBLE_EQ(s.std, 1);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 3);
}

TEST(TensorStats, NoFiniteValuesGiveNaN) {
  const TensorStats s = stats_of(std::vector<double>{kNaN, kInf, -kInf}, ElementType::kFloat64);
  EXPECT_EQ(s.count, 3u);
  EXPECT_EQ(s.finite_count, 0u);
  EXPECT_TRUE(std::isnan(s.mean));
  EXPECT_TRUE(std::isnan(s.std));
  EXPECT_TRUE(std::isnan(s.min));
  EXPECT_TRUE(std::isnan(s.max));
}

TEST(TensorStats, Empty) {
  const TensorStats s = compute_stats(TensorView{nullptr, ElementType::kFloat32, {0, 5}});
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.finite_count, 0u);
  EXPECT_TRUE(std::isnan(s.mean));
  const TensorStats bad = compute_stats(TensorView{nullptr, ElementType::kFloat32, {4}});
  EXPECT_EQ(bad.count, 0u);  // invalid view: nothing is read
}

TEST(TensorStats, Integers) {
  const TensorStats s8 = stats_of(std::vector<int8_t>{-128, 127, 0, 1}, ElementType::kInt8);
  EXPECT_EQ(s8.finite_count, 4u);
  EXPECT_EQ(s8.min, -128);
  EXPECT_EQ(s8.max, 127);
  EXPECT_DOUBLE_EQ(s8.mean, 0);
  const TensorStats u8 = stats_of(std::vector<uint8_t>{0, 255, 255, 0}, ElementType::kUInt8);
  EXPECT_DOUBLE_EQ(u8.mean, 127.5);
  EXPECT_DOUBLE_EQ(u8.std, 127.5);
  const int64_t big = int64_t{1} << 50;
  const TensorStats s64 = stats_of(std::vector<int64_t>{big, big + 2}, ElementType::kInt64);
  EXPECT_DOUBLE_EQ(s64.mean, static_cast<double>(big + 1));
  EXPECT_DOUBLE_EQ(s64.std, 1);
  const TensorStats s16 = stats_of(std::vector<int16_t>{-5, 5}, ElementType::kInt16);
  EXPECT_DOUBLE_EQ(s16.std, 5);
  const TensorStats s32 = stats_of(std::vector<int32_t>{-7, -7, -7}, ElementType::kInt32);
  EXPECT_EQ(s32.mean, -7);
  EXPECT_EQ(s32.std, 0);
}

TEST(TensorStats, BoolBytes) {
  // Any non-zero byte is true.
  const TensorStats s = stats_of(std::vector<uint8_t>{0, 1, 2, 255}, ElementType::kBool);
  EXPECT_EQ(s.finite_count, 4u);
  EXPECT_DOUBLE_EQ(s.mean, 0.75);
  EXPECT_EQ(s.min, 0);
  EXPECT_EQ(s.max, 1);
}

TEST(TensorStats, AllEqual) {
  const std::vector<float> v(100000, 0.1f);
  const TensorStats s = stats_of(v, ElementType::kFloat32);
  EXPECT_EQ(s.mean, static_cast<double>(0.1f));
  EXPECT_NEAR(s.std, 0, 1e-15);
  EXPECT_EQ(s.min, s.max);
}

TEST(TensorStats, HugeFloat32DoesNotOverflow) {
  const float big = 3.0e38f;
  const std::vector<float> same(1 << 20, big);
  const TensorStats a = stats_of(same, ElementType::kFloat32);
  EXPECT_DOUBLE_EQ(a.mean, static_cast<double>(big));
  EXPECT_NEAR(a.std, 0, 1e25);
  std::vector<float> alternating(1 << 20);
  for (size_t i = 0; i < alternating.size(); ++i) {
    alternating[i] = i % 2 ? std::numeric_limits<float>::max() : -std::numeric_limits<float>::max();
  }
  const TensorStats b = stats_of(alternating, ElementType::kFloat32);
  EXPECT_TRUE(std::isfinite(b.mean));
  EXPECT_NEAR(b.mean, 0, 1e30);
  EXPECT_NEAR(b.std / std::numeric_limits<float>::max(), 1.0, 1e-12);
}

TEST(TensorStats, HugeFloat64DoesNotOverflow) {
  const double big = std::numeric_limits<double>::max();
  std::vector<double> v = {1.0, 2.0};  // small values before the huge ones
  for (int i = 0; i < 5000; ++i) v.push_back(i % 2 ? big : -big);
  const TensorStats s = stats_of(v, ElementType::kFloat64);
  EXPECT_TRUE(std::isfinite(s.mean));
  EXPECT_TRUE(std::isfinite(s.std));
  EXPECT_NEAR(s.std / big, 1.0, 1e-3);
  EXPECT_EQ(s.max, big);
  EXPECT_EQ(s.min, -big);
  const TensorStats same = stats_of(std::vector<double>(3000, 1e300), ElementType::kFloat64);
  EXPECT_DOUBLE_EQ(same.mean, 1e300);
  EXPECT_EQ(same.std, 0);
}

TEST(TensorStats, LargeOffsetSmallSpread) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(1e9, 1.0);
  std::vector<double> v(300000);
  for (double& x : v) x = normal(rng);
  const TensorStats s = stats_of(v, ElementType::kFloat64);
  const Reference r = reference(v);
  EXPECT_NEAR(s.mean, static_cast<double>(r.mean), 1e-6);
  EXPECT_NEAR(s.std, static_cast<double>(r.std), 1e-6);
}

TEST(TensorStats, RandomDataMatchesReference) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.5f, 3.0f);
  std::vector<float> f(123457);
  std::vector<double> as_double(f.size());
  for (size_t i = 0; i < f.size(); ++i) {
    f[i] = i % 1000 == 3 ? NAN : normal(rng);
    as_double[i] = f[i];
  }
  const TensorStats s = stats_of(f, ElementType::kFloat32);
  const Reference r = reference(as_double);
  EXPECT_EQ(s.nan_count, 124u);
  EXPECT_EQ(s.finite_count, f.size() - 124);
  EXPECT_NEAR(s.mean, static_cast<double>(r.mean), 1e-12);
  EXPECT_NEAR(s.std, static_cast<double>(r.std), 1e-12);

  std::vector<int32_t> ints(54321);
  std::vector<double> ints_double(ints.size());
  std::uniform_int_distribution<int32_t> uniform(-1000000, 1000000);
  for (size_t i = 0; i < ints.size(); ++i) ints_double[i] = ints[i] = uniform(rng);
  const TensorStats si = stats_of(ints, ElementType::kInt32);
  const Reference ri = reference(ints_double);
  EXPECT_NEAR(si.mean, static_cast<double>(ri.mean), 1e-6);
  EXPECT_NEAR(si.std, static_cast<double>(ri.std), 1e-6);
}

TEST(TensorStats, HalfPrecisionSpecials) {
  // float16: 1.0, -2.0, +Inf, NaN, smallest subnormal.
  const std::vector<uint16_t> h = {0x3c00, 0xc000, 0x7c00, 0x7e00, 0x0001};
  const TensorStats s = stats_of(h, ElementType::kFloat16);
  EXPECT_EQ(s.finite_count, 3u);
  EXPECT_EQ(s.pos_inf_count, 1u);
  EXPECT_EQ(s.nan_count, 1u);
  EXPECT_EQ(s.min, -2.0);
  EXPECT_EQ(s.max, 1.0);
  // bfloat16: 1.0, -Inf, 3.0.
  const std::vector<uint16_t> b = {0x3f80, 0xff80, 0x4040};
  const TensorStats sb = stats_of(b, ElementType::kBFloat16);
  EXPECT_EQ(sb.neg_inf_count, 1u);
  EXPECT_DOUBLE_EQ(sb.mean, 2.0);
}

}  // namespace
}  // namespace tensorscope::tensor

namespace tensorscope::tensor {
namespace {

// compute_summary_stats: zeros counted exactly, L2 norm and max |x| over the finite values.
TEST(SummaryStats, ZerosNormAndMaxAbsOfTheFiniteValues) {
  const std::vector<float> v = {
      0.0f, -0.0f, 3.0f, -4.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
      0.0f, 1.0f};
  const SummaryStats s = compute_summary_stats(TensorView{v.data(), ElementType::kFloat32, {8}});
  EXPECT_EQ(s.count, 8u);
  EXPECT_EQ(s.nan_count, 1u);
  EXPECT_EQ(s.inf_count, 1u);
  EXPECT_EQ(s.finite_count, 6u);
  EXPECT_NEAR(s.mean, 0.0, 1e-12);
  EXPECT_EQ(s.zero_count, 3u) << "+0 and -0";
  EXPECT_NEAR(s.l2, std::sqrt(9.0 + 16.0 + 1.0), 1e-12);
  EXPECT_EQ(s.max_abs, 4.0);
}

TEST(SummaryStats, LargeRandomDataMatchesADirectSum) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> v(100000);
  double sum_sq = 0, max_abs = 0;
  uint64_t zeros = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = i % 7 == 0 ? 0.0f : normal(rng);
    sum_sq += static_cast<double>(v[i]) * v[i];
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(v[i])));
    zeros += v[i] == 0.0f ? 1 : 0;
  }
  const SummaryStats s = compute_summary_stats(TensorView{v.data(), ElementType::kFloat32, {100000}});
  EXPECT_EQ(s.zero_count, zeros);
  EXPECT_NEAR(s.l2, std::sqrt(sum_sq), 1e-5 * std::sqrt(sum_sq)) << "float sums in blocks";
  EXPECT_EQ(s.max_abs, max_abs);
}

TEST(SummaryStats, Float32FastPathAgreesWithTheCarefulOneWhenTheMeanDwarfsTheSpread) {
  std::mt19937 rng(6);
  std::normal_distribution<float> noise(0.0f, 0.01f);
  std::vector<float> f(50001);
  std::vector<double> d(f.size());
  for (size_t i = 0; i < f.size(); ++i) {
    f[i] = 1000.0f + noise(rng);
    d[i] = f[i];
  }
  const SummaryStats fast = compute_summary_stats(TensorView{f.data(), ElementType::kFloat32, {50001}});
  const SummaryStats careful = compute_summary_stats(TensorView{d.data(), ElementType::kFloat64, {50001}});
  EXPECT_NEAR(fast.mean, careful.mean, 1e-6);
  EXPECT_NEAR(fast.std, careful.std, 1e-4 * careful.std) << "no cancellation around a large mean";
  EXPECT_NEAR(fast.l2, careful.l2, 1e-5 * careful.l2);
  EXPECT_EQ(fast.max_abs, careful.max_abs);
  EXPECT_EQ(fast.count, careful.count);
}

// NaN and Inf anywhere (the vector loop's blocks, a block's tail, the first element):
// counted, and left out of the sums, the zeros and max |x| (the fast path reads a block
// of finite values without masks and a block with a NaN or Inf again with them).
TEST(SummaryStats, NonFiniteValuesAnywhereAreCountedAndLeftOut) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> v(3 * 4096 + 13);
  for (size_t i = 0; i < v.size(); ++i) v[i] = i % 11 == 0 ? 0.0f : normal(rng);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  v[0] = nan;                // before the first finite value
  v[17] = inf;               // in the vector loop of block 0
  v[4096 + 4095] = -inf;     // the last element of block 1
  v[2 * 4096 + 100] = -nan;  // block 2
  v[v.size() - 1] = nan;     // the tail of the last block
  v[v.size() - 3] = 1e30f;   // the largest |x|, finite
  double sum_sq = 0, max_abs = 0;
  uint64_t zeros = 0, finite = 0;
  for (float x : v) {
    if (!std::isfinite(x)) continue;
    ++finite;
    sum_sq += static_cast<double>(x) * x;
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(x)));
    zeros += x == 0.0f ? 1 : 0;
  }
  const SummaryStats s =
      compute_summary_stats(TensorView{v.data(), ElementType::kFloat32, {static_cast<int64_t>(v.size())}});
  EXPECT_EQ(s.nan_count, 3u);
  EXPECT_EQ(s.inf_count, 2u);
  EXPECT_EQ(s.finite_count, finite);
  EXPECT_EQ(s.zero_count, zeros);
  EXPECT_EQ(s.max_abs, max_abs);
  EXPECT_NEAR(s.l2, std::sqrt(sum_sq), 1e-5 * std::sqrt(sum_sq));
}

TEST(SummaryStats, NothingFiniteGivesZeroNormAndMaxAbs) {
  const std::vector<double> v = {kNaN, -kInf};
  const SummaryStats s = compute_summary_stats(TensorView{v.data(), ElementType::kFloat64, {2}});
  EXPECT_EQ(s.l2, 0.0);
  EXPECT_EQ(s.max_abs, 0.0);
  EXPECT_EQ(s.zero_count, 0u);
}

// Cast limits (fp16's: a non-zero |x| <= 2^-25 becomes 0, |x| >= 65520 becomes Inf):
// the values at and beside each limit, NaN and Inf left out, the same from the float32
// fast path and from float64 values through the blocks.
TEST(SummaryStats, CastLimitsCountWhatACastLosesAtTheLimitsExactly) {
  const CastLimits fp16{std::ldexp(1.0, -25), 65520.0};
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float tiny = std::ldexp(1.0f, -25);
  const std::vector<float> f = {0.0f,
                                -0.0f,
                                tiny,
                                -std::nextafter(tiny, 1.0f),
                                std::nextafter(tiny, 0.0f),
                                1.0f,
                                -3.0f,
                                65520.0f,
                                -std::nextafter(65520.0f, 0.0f),
                                1e30f,
                                nan,
                                inf,
                                std::numeric_limits<float>::denorm_min()};
  // Underflow: tiny, the float below it, the smallest subnormal; overflow: 65520, 1e30.
  std::vector<double> d(f.begin(), f.end());
  for (const SummaryStats& s :
       {compute_summary_stats(TensorView{f.data(), ElementType::kFloat32, {static_cast<int64_t>(f.size())}}, &fp16),
        compute_summary_stats(TensorView{d.data(), ElementType::kFloat64, {static_cast<int64_t>(d.size())}}, &fp16)}) {
    EXPECT_EQ(s.underflow_count, 3u);
    EXPECT_EQ(s.overflow_count, 2u) << "Inf is not a finite value that overflows";
    EXPECT_EQ(s.min_abs_nonzero, static_cast<double>(std::numeric_limits<float>::denorm_min()));
    EXPECT_EQ(s.max_abs, 1e30f);
  }
  const SummaryStats without = compute_summary_stats(TensorView{f.data(), ElementType::kFloat32, {13}});
  EXPECT_EQ(without.underflow_count + without.overflow_count, 0u) << "no limits, nothing counted";
  EXPECT_EQ(without.min_abs_nonzero, 0.0);
}

// A limit between two floats (e4m3's 464 + 2^-44: |x| > 464 overflows) is read for
// float32 values as the next float up; a limit below the smallest float underflows none.
TEST(SummaryStats, CastLimitsBetweenFloatsAndOnLargeRandomData) {
  const CastLimits e4m3{std::ldexp(1.0, -160), 464.0 + std::ldexp(1.0, -44)};
  std::mt19937 rng(8);
  std::uniform_real_distribution<double> exponent(-40.0, 12.0);
  std::vector<float> f(3 * 4096 + 5);
  for (size_t i = 0; i < f.size(); ++i) {
    f[i] = static_cast<float>((i % 2 == 0 ? 1 : -1) * std::exp2(exponent(rng)));
    if (i % 97 == 0) f[i] = 0;
  }
  f[7] = 464.0f;
  f[8] = std::nextafter(464.0f, 1000.0f);
  uint64_t over = 0;
  double smallest = 1e300;
  for (float x : f) {
    over += std::fabs(x) > 464.0f ? 1 : 0;
    if (x != 0) smallest = std::min(smallest, static_cast<double>(std::fabs(x)));
  }
  std::vector<double> d(f.begin(), f.end());
  const auto n = static_cast<int64_t>(f.size());
  const SummaryStats a = compute_summary_stats(TensorView{f.data(), ElementType::kFloat32, {n}}, &e4m3);
  const SummaryStats b = compute_summary_stats(TensorView{d.data(), ElementType::kFloat64, {n}}, &e4m3);
  EXPECT_GT(over, 100u);
  EXPECT_EQ(a.overflow_count, over);
  EXPECT_EQ(b.overflow_count, over);
  EXPECT_EQ(a.underflow_count, 0u);
  EXPECT_EQ(b.underflow_count, 0u);
  EXPECT_EQ(a.min_abs_nonzero, smallest);
  EXPECT_EQ(b.min_abs_nonzero, smallest);
}

}  // namespace
}  // namespace tensorscope::tensor
