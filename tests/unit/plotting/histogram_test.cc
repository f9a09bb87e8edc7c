// Histogram counts against a straightforward reference, edges, under/overflow, NaN/Inf,
// range choice, and summarize's one-pass path.
#include "tensorscope/plotting/histogram.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "test_util.h"

namespace tensorscope::plotting {
namespace {

using testing::reference_histogram;

void expect_same(const Histogram& got, const Histogram& want) {
  EXPECT_EQ(got.range.lo, want.range.lo);
  EXPECT_EQ(got.range.hi, want.range.hi);
  ASSERT_EQ(got.counts.size(), want.counts.size());
  for (size_t i = 0; i < got.counts.size(); ++i) EXPECT_EQ(got.counts[i], want.counts[i]) << "bin " << i;
  EXPECT_EQ(got.underflow, want.underflow);
  EXPECT_EQ(got.overflow, want.overflow);
  EXPECT_EQ(got.nan, want.nan);
  EXPECT_EQ(got.pos_inf, want.pos_inf);
  EXPECT_EQ(got.neg_inf, want.neg_inf);
}

template <typename T>
tensor::TensorView view_of(const std::vector<T>& v, tensor::ElementType type) {
  return tensor::TensorView{v.data(), type, {static_cast<int64_t>(v.size())}};
}

// Random bit patterns (so every special value shows up) for the 16-bit float types;
// random values with some NaN/Inf for the others.
class RandomData : public ::testing::TestWithParam<tensor::ElementType> {};

TEST_P(RandomData, MatchesReference) {
  const tensor::ElementType type = GetParam();
  const size_t n = 100003;  // not a multiple of the block size
  std::vector<unsigned char> bytes(n * tensor::element_size(type));
  std::mt19937_64 rng(static_cast<uint64_t>(type) + 1);
  std::normal_distribution<double> normal(0.0, 10.0);
  for (size_t i = 0; i < n; ++i) {
    unsigned char* p = bytes.data() + i * tensor::element_size(type);
    const double x = normal(rng);
    const bool special = i % 97 == 0;
    switch (type) {
      case tensor::ElementType::kFloat32: {
        float f = special ? (i % 3 == 0 ? NAN : (i % 2 ? INFINITY : -INFINITY)) : static_cast<float>(x);
        std::memcpy(p, &f, 4);
        break;
      }
      case tensor::ElementType::kFloat64: {
        double d = special ? (i % 3 == 0 ? NAN : (i % 2 ? INFINITY : -INFINITY)) : x;
        std::memcpy(p, &d, 8);
        break;
      }
      case tensor::ElementType::kFloat16:
      case tensor::ElementType::kBFloat16: {
        uint16_t bits = static_cast<uint16_t>(rng());
        std::memcpy(p, &bits, 2);
        break;
      }
      case tensor::ElementType::kInt8: {
        int8_t v = static_cast<int8_t>(rng());
        std::memcpy(p, &v, 1);
        break;
      }
      case tensor::ElementType::kInt16: {
        int16_t v = static_cast<int16_t>(x * 100);
        std::memcpy(p, &v, 2);
        break;
      }
      case tensor::ElementType::kInt32: {
        int32_t v = static_cast<int32_t>(x * 1e6);
        std::memcpy(p, &v, 4);
        break;
      }
      case tensor::ElementType::kInt64: {
        int64_t v = static_cast<int64_t>(rng());
        std::memcpy(p, &v, 8);
        break;
      }
      case tensor::ElementType::kUInt8: {
        uint8_t v = static_cast<uint8_t>(rng());
        std::memcpy(p, &v, 1);
        break;
      }
      case tensor::ElementType::kBool: {
        uint8_t v = static_cast<uint8_t>(rng() % 3);
        std::memcpy(p, &v, 1);
        break;
      }
    }
  }
  const tensor::TensorView view{bytes.data(), type, {static_cast<int64_t>(n)}};
  const tensor::TensorStats stats = tensor::compute_stats(view);
  for (const HistogramRange& range : {choose_histogram_range(stats, 64, 0.05, !tensor::is_floating(type)),
                                      choose_histogram_range(stats, 37, 0.0, false),
                                      // a narrow fixed range: most values under/overflow
                                      HistogramRange{stats.mean - stats.std / 4, stats.mean + stats.std / 4, 10}}) {
    SCOPED_TRACE(::testing::Message() << tensor::element_type_name(type) << " [" << range.lo << ", " << range.hi
                                      << "] x" << range.bins);
    ASSERT_TRUE(range.valid());
    const Histogram got = compute_histogram(view, range);
    expect_same(got, reference_histogram(view, range));
    EXPECT_EQ(got.total(), n);
    EXPECT_EQ(got.nan, stats.nan_count);
    EXPECT_EQ(got.pos_inf, stats.pos_inf_count);
    EXPECT_EQ(got.neg_inf, stats.neg_inf_count);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, RandomData,
                         ::testing::Values(tensor::ElementType::kFloat32, tensor::ElementType::kFloat64,
                                           tensor::ElementType::kFloat16, tensor::ElementType::kBFloat16,
                                           tensor::ElementType::kInt8, tensor::ElementType::kInt16,
                                           tensor::ElementType::kInt32, tensor::ElementType::kInt64,
                                           tensor::ElementType::kUInt8, tensor::ElementType::kBool),
                         [](const auto& info) { return std::string(tensor::element_type_name(info.param)); });

TEST(Histogram, Edges) {
  const HistogramRange range{0.0, 1.0, 4};
  const double below = std::nextafter(0.0, -1.0), above = std::nextafter(1.0, 2.0);
  const std::vector<double> v = {0.0, 0.25, 0.5, 0.9999, 1.0, below, above, -5, 5, NAN, INFINITY, -INFINITY, -INFINITY};
  const Histogram h = compute_histogram(view_of(v, tensor::ElementType::kFloat64), range);
  EXPECT_EQ(h.counts, (std::vector<uint64_t>{1, 1, 1, 2}));  // 1.0 == hi is in the last bin
  EXPECT_EQ(h.underflow, 2u);
  EXPECT_EQ(h.overflow, 2u);
  EXPECT_EQ(h.nan, 1u);
  EXPECT_EQ(h.pos_inf, 1u);
  EXPECT_EQ(h.neg_inf, 2u);
  EXPECT_EQ(h.total(), v.size());
}

TEST(Histogram, UnalignedData) {
  std::vector<unsigned char> bytes(1 + 5 * sizeof(float));
  const float values[5] = {0.1f, 0.2f, 0.6f, 0.7f, 0.8f};
  std::memcpy(bytes.data() + 1, values, sizeof(values));
  const Histogram h =
      compute_histogram(tensor::TensorView{bytes.data() + 1, tensor::ElementType::kFloat32, {5}}, {0, 1, 2});
  EXPECT_EQ(h.counts, (std::vector<uint64_t>{2, 3}));
}

TEST(Histogram, EmptyAndInvalidViews) {
  const Histogram empty = compute_histogram(tensor::TensorView{nullptr, tensor::ElementType::kFloat32, {0}}, {0, 1, 8});
  EXPECT_EQ(empty.total(), 0u);
  EXPECT_EQ(empty.counts.size(), 8u);
  const Histogram invalid =
      compute_histogram(tensor::TensorView{nullptr, tensor::ElementType::kFloat32, {3}}, {0, 1, 8});
  EXPECT_EQ(invalid.total(), 0u);
}

TEST(Histogram, InvalidRangesAreSanitized) {
  const std::vector<float> v = {1, 2, 3};
  for (const HistogramRange& bad : {HistogramRange{1, 1, 10}, HistogramRange{3, 1, 10}, HistogramRange{NAN, 2, 10},
                                    HistogramRange{0, INFINITY, 10}, HistogramRange{0, 1, 0}, HistogramRange{0, 1, -5},
                                    HistogramRange{5e-324, 1e-323, 100}, HistogramRange{-1e308, 1e308, 10}}) {
    const Histogram h = compute_histogram(view_of(v, tensor::ElementType::kFloat32), bad);
    EXPECT_TRUE(h.range.valid());
    EXPECT_EQ(h.total(), 3u);
    EXPECT_EQ(h.counts.size(), static_cast<size_t>(h.range.bins));
  }
  EXPECT_EQ(sanitize_range({0, 1, kMaxHistogramBins + 5}).bins, kMaxHistogramBins);
}

TEST(HistogramRange, ChooseFromStats) {
  tensor::TensorStats s;
  s.finite_count = 10;
  s.min = -2;
  s.max = 6;
  const HistogramRange r = choose_histogram_range(s, 64, 0.05);
  EXPECT_DOUBLE_EQ(r.lo, -2.4);
  EXPECT_DOUBLE_EQ(r.hi, 6.4);
  EXPECT_EQ(r.bins, 64);

  s.min = s.max = 3.5;  // all equal: the value sits mid-bin
  const HistogramRange eq = choose_histogram_range(s, 64, 0.05);
  ASSERT_TRUE(eq.valid());
  const double t = (3.5 - eq.lo) / (eq.hi - eq.lo) * eq.bins;
  EXPECT_NEAR(t - std::floor(t), 0.5, 1e-6);
  s.min = s.max = 0;
  EXPECT_TRUE(choose_histogram_range(s, 7, 0.1).valid());
  s.min = s.max = std::numeric_limits<double>::max();
  EXPECT_TRUE(choose_histogram_range(s, 7, 0.1).valid());
  s.min = s.max = 5e-324;
  EXPECT_TRUE(choose_histogram_range(s, 7, 0.1).valid());
  s.min = -std::numeric_limits<double>::max();
  s.max = std::numeric_limits<double>::max();
  EXPECT_TRUE(choose_histogram_range(s, 7, 0.1).valid());

  tensor::TensorStats none;  // no finite values
  none.min = none.max = NAN;
  const HistogramRange n = choose_histogram_range(none, 16, 0.05);
  EXPECT_TRUE(n.valid());
  EXPECT_EQ(n.lo, -1);
  EXPECT_EQ(n.hi, 1);
}

TEST(HistogramRange, IntegerAligned) {
  tensor::TensorStats b;  // bool
  b.finite_count = 4;
  b.min = 0;
  b.max = 1;
  const HistogramRange rb = choose_histogram_range(b, 64, 0.05, true);
  EXPECT_EQ(rb.bins, 2);
  EXPECT_EQ(rb.lo, -0.5);
  EXPECT_EQ(rb.hi, 1.5);

  tensor::TensorStats s;
  s.finite_count = 4;
  s.min = -3;
  s.max = 300;
  const HistogramRange r = choose_histogram_range(s, 64, 0.0, true);
  ASSERT_TRUE(r.valid());
  const double width = (r.hi - r.lo) / r.bins;
  EXPECT_EQ(width, std::round(width));  // whole integers per bin
  EXPECT_EQ(r.lo, -3.5);
  EXPECT_GE(r.hi, 300.5);
  EXPECT_LE(r.bins, 64);
  // margin rounded to whole integers
  const HistogramRange m = choose_histogram_range(s, 1000, 0.1, true);
  EXPECT_EQ(m.lo, -3.5 - 30);
  EXPECT_EQ(m.hi, 300.5 + 30);
  EXPECT_EQ(m.bins, 364);
}

TEST(Summarize, FixedRangeIsOnePassAndMatches) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(1.0f, 2.0f);
  std::vector<float> v(70001);
  for (float& x : v) x = normal(rng);
  v[10] = NAN;
  v[20] = -INFINITY;
  const tensor::TensorView view = view_of(v, tensor::ElementType::kFloat32);
  const HistogramRange fixed{-1, 2, 30};
  tensor::TensorStats s;
  Histogram h;
  summarize(view, &fixed, 0, 0, &s, &h);
  const tensor::TensorStats ref_stats = tensor::compute_stats(view);
  EXPECT_EQ(s.count, ref_stats.count);
  EXPECT_EQ(s.finite_count, ref_stats.finite_count);
  EXPECT_EQ(s.mean, ref_stats.mean);
  EXPECT_EQ(s.std, ref_stats.std);
  EXPECT_EQ(s.min, ref_stats.min);
  EXPECT_EQ(s.max, ref_stats.max);
  expect_same(h, reference_histogram(view, fixed));

  // Without a fixed range the chosen one covers everything finite.
  summarize(view, nullptr, 50, 0.05, &s, &h);
  EXPECT_EQ(h.range.bins, 50);
  EXPECT_EQ(h.underflow + h.overflow, 0u);
  EXPECT_EQ(h.total(), v.size());
  expect_same(h, reference_histogram(view, h.range));

  // Null outputs are fine.
  summarize(view, &fixed, 0, 0, nullptr, &h);
  summarize(view, &fixed, 0, 0, &s, nullptr);
  summarize(view, nullptr, 10, 0, nullptr, nullptr);
}

// Symlog bins: equal widths in sign(x) log10(1 + |x| / c), both signs and 0, tails
// outside; the same counts as the element-by-element reference.
TEST(Histogram, SymlogBinsMatchTheReference) {
  std::vector<double> v;
  for (int i = -400; i <= 400; ++i) v.push_back(std::copysign(std::pow(10.0, std::abs(i) / 80.0 - 3), i));
  v.push_back(0.0);
  v.push_back(-1e9);
  v.push_back(1e9);
  const tensor::TensorView view{v.data(), tensor::ElementType::kFloat64, {static_cast<int64_t>(v.size())}};
  for (double c : {1e-3, 0.5, 40.0}) {
    const HistogramRange range{-1000, 2000, 37, HistogramAxis::kSymlog, c};
    ASSERT_TRUE(range.valid());
    const Histogram got = compute_histogram(view, range);
    const Histogram want = testing::reference_histogram(view, range);
    EXPECT_EQ(got.counts, want.counts) << c;
    EXPECT_EQ(got.underflow, 1u);
    EXPECT_EQ(got.overflow, 1u);
    EXPECT_NEAR(range.edge(0), -1000, 1e-9);
    EXPECT_EQ(range.edge(37), 2000);
    for (int i = 0; i < 37; ++i) EXPECT_LT(range.edge(i), range.edge(i + 1));
  }
  // A symlog range that cannot be binned becomes a linear one.
  EXPECT_EQ(sanitize_range(HistogramRange{0, 1, 8, HistogramAxis::kSymlog, -1}).axis, HistogramAxis::kLinear);
  EXPECT_EQ(sanitize_range(HistogramRange{0, 1, 8, HistogramAxis::kSymlog, NAN}).axis, HistogramAxis::kLinear);
}

}  // namespace
}  // namespace tensorscope::plotting
