// stats_table_test.cc — compute_stats_row on known inputs of every dtype (checked against
// statistics computed here in long double, with this file's own float16/bfloat16
// decoding), and the CSV table: line format, quoting, round-tripping numbers, flushing
// every line and appending without a second header.
#include "tensorscope/recording/stats_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace tensorscope::recording {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using wire::DType;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- independent reference ----

// IEEE binary16 bits to a value, by the definition (not by bit manipulation).
long double half_value(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  const long double sign = (h & 0x8000) ? -1.0L : 1.0L;
  if (exponent == 0x1f) {
    return mantissa != 0 ? std::numeric_limits<long double>::quiet_NaN()
                         : sign * std::numeric_limits<long double>::infinity();
  }
  if (exponent == 0) return sign * std::ldexp(static_cast<long double>(mantissa), -24);
  return sign * std::ldexp(static_cast<long double>(mantissa + 1024), exponent - 25);
}

// bfloat16 bits (8-bit exponent, 7-bit mantissa) to a value, by the definition.
long double bfloat16_value(uint16_t b) {
  const int exponent = (b >> 7) & 0xff;
  const int mantissa = b & 0x7f;
  const long double sign = (b & 0x8000) ? -1.0L : 1.0L;
  if (exponent == 0xff) {
    return mantissa != 0 ? std::numeric_limits<long double>::quiet_NaN()
                         : sign * std::numeric_limits<long double>::infinity();
  }
  if (exponent == 0) return sign * std::ldexp(static_cast<long double>(mantissa), -133);
  return sign * std::ldexp(static_cast<long double>(mantissa + 128), exponent - 134);
}

struct Reference {
  uint64_t count = 0, finite = 0, nan = 0, inf = 0, zeros = 0;
  long double mean = kNaN, std = kNaN, min = kNaN, max = kNaN, l2 = kNaN;
  long double max_abs = 0;
  double zero_fraction = kNaN;
};

// Two passes in long double over the values.
Reference reference(const std::vector<long double>& values) {
  Reference r;
  r.count = values.size();
  long double sum = 0, sum_sq = 0;
  for (const long double v : values) {
    if (std::isnan(v)) {
      ++r.nan;
      continue;
    }
    if (std::isinf(v)) {
      ++r.inf;
      continue;
    }
    if (v == 0) ++r.zeros;
    if (r.finite == 0 || v < r.min) r.min = v;
    if (r.finite == 0 || v > r.max) r.max = v;
    ++r.finite;
    sum += v;
    sum_sq += v * v;
    r.max_abs = std::max(r.max_abs, std::fabs(v));
  }
  if (r.count > 0) r.zero_fraction = static_cast<double>(r.zeros) / static_cast<double>(r.count);
  if (r.finite == 0) return r;
  r.mean = sum / static_cast<long double>(r.finite);
  long double dev = 0;
  for (const long double v : values) {
    if (std::isfinite(v)) dev += (v - r.mean) * (v - r.mean);
  }
  r.std = std::sqrt(dev / static_cast<long double>(r.finite));
  r.l2 = std::sqrt(sum_sq);
  return r;
}

// Compares a row with the reference: counts exactly, min/max exactly (every element
// converts to double exactly, except int64 beyond 2^53, rounded the same way here),
// mean/std within `rel` of the largest magnitude, l2 within `rel` of itself.
void expect_matches(const TensorStatsRow& row, const Reference& ref, double rel = 1e-12) {
  EXPECT_EQ(row.count, ref.count);
  EXPECT_EQ(row.finite_count, ref.finite);
  EXPECT_EQ(row.nan_count, ref.nan);
  EXPECT_EQ(row.inf_count, ref.inf);
  if (std::isnan(ref.zero_fraction)) {
    EXPECT_TRUE(std::isnan(row.zero_fraction)) << row.zero_fraction;
  } else {
    EXPECT_DOUBLE_EQ(row.zero_fraction, ref.zero_fraction);
  }
  if (ref.finite == 0) {
    EXPECT_TRUE(std::isnan(row.mean)) << row.mean;
    EXPECT_TRUE(std::isnan(row.std)) << row.std;
    EXPECT_TRUE(std::isnan(row.min)) << row.min;
    EXPECT_TRUE(std::isnan(row.max)) << row.max;
    EXPECT_TRUE(std::isnan(row.l2_norm)) << row.l2_norm;
    return;
  }
  EXPECT_EQ(row.min, static_cast<double>(ref.min));
  EXPECT_EQ(row.max, static_cast<double>(ref.max));
  const double scale = static_cast<double>(ref.max_abs);
  EXPECT_NEAR(row.mean, static_cast<double>(ref.mean), rel * scale);
  EXPECT_NEAR(row.std, static_cast<double>(ref.std), rel * scale);
  EXPECT_NEAR(row.l2_norm, static_cast<double>(ref.l2), rel * static_cast<double>(ref.l2));
}

template <typename T>
std::string bytes_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

TensorStatsRow stats_of(DType dtype, const std::string& bytes) {
  return compute_stats_row(dtype, bytes.data(), bytes.size() / wire::dtype_size(dtype));
}

// ---- compute_stats_row ----

TEST(StatsRow, KnownFloat32Values) {
  const std::vector<float> v = {1, 2, 3, 4};
  const TensorStatsRow row = compute_stats_row(DType::kFloat32, v.data(), v.size());
  EXPECT_EQ(row.count, 4u);
  EXPECT_EQ(row.finite_count, 4u);
  EXPECT_EQ(row.mean, 2.5);
  EXPECT_EQ(row.std, std::sqrt(1.25));
  EXPECT_EQ(row.min, 1.0);
  EXPECT_EQ(row.max, 4.0);
  EXPECT_EQ(row.l2_norm, std::sqrt(30.0));
  EXPECT_EQ(row.nan_count, 0u);
  EXPECT_EQ(row.inf_count, 0u);
  EXPECT_EQ(row.zero_fraction, 0.0);
}

TEST(StatsRow, NaNAndInfAreCountedAndLeftOut) {
  const std::vector<double> values = {1, kNaN, kInf, -kInf, 3, 0};
  const std::vector<float> f(values.begin(), values.end());
  for (const DType dtype : {DType::kFloat32, DType::kFloat64}) {
    SCOPED_TRACE(wire::dtype_name(dtype));
    const TensorStatsRow row = dtype == DType::kFloat32 ? compute_stats_row(dtype, f.data(), f.size())
                                                        : compute_stats_row(dtype, values.data(), values.size());
    EXPECT_EQ(row.count, 6u);
    EXPECT_EQ(row.finite_count, 3u);
    EXPECT_EQ(row.nan_count, 1u);
    EXPECT_EQ(row.inf_count, 2u);
    EXPECT_DOUBLE_EQ(row.mean, 4.0 / 3.0);
    const double m = 4.0 / 3.0;
    EXPECT_DOUBLE_EQ(row.std, std::sqrt(((1 - m) * (1 - m) + (3 - m) * (3 - m) + m * m) / 3));
    EXPECT_EQ(row.min, 0.0);
    EXPECT_EQ(row.max, 3.0);
    EXPECT_DOUBLE_EQ(row.l2_norm, std::sqrt(10.0));
    EXPECT_DOUBLE_EQ(row.zero_fraction, 1.0 / 6.0);
  }
}

TEST(StatsRow, AllZeroIncludingNegativeZero) {
  const std::vector<float> v = {0.0f, -0.0f, 0.0f, 0.0f, -0.0f};
  const TensorStatsRow row = compute_stats_row(DType::kFloat32, v.data(), v.size());
  EXPECT_EQ(row.count, 5u);
  EXPECT_EQ(row.mean, 0.0);
  EXPECT_EQ(row.std, 0.0);
  EXPECT_EQ(row.min, 0.0);
  EXPECT_EQ(row.max, 0.0);
  EXPECT_EQ(row.l2_norm, 0.0);
  EXPECT_EQ(row.zero_fraction, 1.0);
  const std::vector<int32_t> ints(7, 0);
  const TensorStatsRow irow = compute_stats_row(DType::kInt32, ints.data(), ints.size());
  EXPECT_EQ(irow.l2_norm, 0.0);
  EXPECT_EQ(irow.zero_fraction, 1.0);
}

TEST(StatsRow, EmptyTensorHasCountZeroAndNoValues) {
  const float dummy = 1;
  for (const void* data : {static_cast<const void*>(&dummy), static_cast<const void*>(nullptr)}) {
    const TensorStatsRow row = compute_stats_row(DType::kFloat32, data, 0);
    expect_matches(row, reference({}));
    EXPECT_EQ(row.count, 0u);
    EXPECT_TRUE(std::isnan(row.zero_fraction));
  }
}

TEST(StatsRow, AllNaNHasNoFiniteStatistics) {
  const std::vector<float> v = {NAN, NAN, -NAN};
  const TensorStatsRow row = compute_stats_row(DType::kFloat32, v.data(), v.size());
  EXPECT_EQ(row.count, 3u);
  EXPECT_EQ(row.nan_count, 3u);
  EXPECT_TRUE(std::isnan(row.mean));
  EXPECT_TRUE(std::isnan(row.l2_norm));
  EXPECT_EQ(row.zero_fraction, 0.0);
}

TEST(StatsRow, BoolIsZeroOrOne) {
  const std::vector<uint8_t> v = {0, 1, 1, 0, 1, 2};  // any non-zero byte is true
  const TensorStatsRow row = compute_stats_row(DType::kBool, v.data(), v.size());
  EXPECT_EQ(row.count, 6u);
  EXPECT_DOUBLE_EQ(row.mean, 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(row.std, std::sqrt((4.0 / 6.0) * (2.0 / 6.0)));
  EXPECT_EQ(row.min, 0.0);
  EXPECT_EQ(row.max, 1.0);
  EXPECT_EQ(row.l2_norm, 2.0);
  EXPECT_EQ(row.nan_count, 0u);
  EXPECT_DOUBLE_EQ(row.zero_fraction, 2.0 / 6.0);
}

TEST(StatsRow, IntegerExtremes) {
  const std::vector<int64_t> i64 = {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 0, -1};
  TensorStatsRow row = compute_stats_row(DType::kInt64, i64.data(), i64.size());
  EXPECT_EQ(row.min, -9223372036854775808.0);
  EXPECT_EQ(row.max, 9223372036854775808.0);  // INT64_MAX rounds to 2^63 in double
  // Exact: mean = -2/4 = -0.5; std = sqrt((2^126 + 2^126 + ...) / 4) ~ 2^62 * sqrt(2).
  EXPECT_NEAR(row.mean, -0.5, 1e-15 * 9.3e18);
  EXPECT_NEAR(row.std, std::ldexp(std::sqrt(2.0), 62), 1e-12 * 6.6e18);
  EXPECT_NEAR(row.l2_norm, std::ldexp(std::sqrt(2.0), 63), 1e-12 * 1.4e19);
  EXPECT_EQ(row.zero_fraction, 0.25);
  std::vector<long double> ref;
  for (const int64_t v : i64) ref.push_back(static_cast<long double>(v));
  expect_matches(row, reference(ref));

  const std::vector<int8_t> i8 = {-128, 127};
  row = compute_stats_row(DType::kInt8, i8.data(), i8.size());
  EXPECT_EQ(row.min, -128.0);
  EXPECT_EQ(row.max, 127.0);
  EXPECT_EQ(row.mean, -0.5);
  EXPECT_EQ(row.std, 127.5);
  const std::vector<uint8_t> u8 = {0, 255};
  row = compute_stats_row(DType::kUInt8, u8.data(), u8.size());
  EXPECT_EQ(row.max, 255.0);
  EXPECT_EQ(row.mean, 127.5);
  EXPECT_EQ(row.zero_fraction, 0.5);
  const std::vector<int16_t> i16 = {-32768, 32767};
  row = compute_stats_row(DType::kInt16, i16.data(), i16.size());
  EXPECT_EQ(row.min, -32768.0);
  EXPECT_EQ(row.l2_norm, std::sqrt(32768.0 * 32768.0 + 32767.0 * 32767.0));
}

TEST(StatsRow, Float16BitPatterns) {
  // 1, -2, smallest subnormal 2^-24, largest 65504, +Inf, -Inf, NaN, -0, 0.333251953125.
  const std::vector<uint16_t> bits = {0x3c00, 0xc000, 0x0001, 0x7bff, 0x7c00, 0xfc00, 0x7e00, 0x8000, 0x3555};
  const std::vector<long double> values = {1, -2, 0x1p-24L, 65504, kInf, -kInf, kNaN, -0.0L, 0.333251953125L};
  for (size_t i = 0; i < bits.size(); ++i) {
    const long double v = half_value(bits[i]);
    EXPECT_TRUE(v == values[i] || (std::isnan(v) && std::isnan(values[i]))) << i;
  }
  const TensorStatsRow row = compute_stats_row(DType::kFloat16, bits.data(), bits.size());
  EXPECT_EQ(row.nan_count, 1u);
  EXPECT_EQ(row.inf_count, 2u);
  EXPECT_EQ(row.min, -2.0);
  EXPECT_EQ(row.max, 65504.0);
  EXPECT_DOUBLE_EQ(row.zero_fraction, 1.0 / 9.0);
  expect_matches(row, reference(values));
}

TEST(StatsRow, BFloat16BitPatterns) {
  // 1, -3, 3.140625, +Inf, NaN, 0, the largest finite bfloat16, the smallest subnormal.
  const std::vector<uint16_t> bits = {0x3f80, 0xc040, 0x4049, 0x7f80, 0x7fc0, 0x0000, 0x7f7f, 0x0001};
  const std::vector<long double> values = {1, -3, 3.140625L, kInf, kNaN, 0, std::ldexp(255.0L, 120), 0x1p-133L};
  for (size_t i = 0; i < bits.size(); ++i) {
    const long double v = bfloat16_value(bits[i]);
    EXPECT_TRUE(v == values[i] || (std::isnan(v) && std::isnan(values[i]))) << i;
  }
  // Also from an unaligned address (the payload may sit anywhere in shared memory).
  std::string buffer = "x" + bytes_of(bits);
  const TensorStatsRow row = compute_stats_row(DType::kBFloat16, buffer.data() + 1, bits.size());
  EXPECT_EQ(row.max, static_cast<double>(values[6]));
  EXPECT_EQ(row.min, -3.0);
  expect_matches(row, reference(values));
}

TEST(StatsRow, LargeAndTinyFloat64NeitherOverflowNorUnderflow) {
  const std::vector<double> large = {1e308, -1e308, 1e308};
  TensorStatsRow row = compute_stats_row(DType::kFloat64, large.data(), large.size());
  EXPECT_TRUE(std::isfinite(row.l2_norm));
  EXPECT_NEAR(row.l2_norm, std::sqrt(3.0) * 1e308, 1e-14 * 1.7e308);
  EXPECT_NEAR(row.mean, 1e308 / 3, 1e-14 * 1e308);
  expect_matches(row, reference({1e308L, -1e308L, 1e308L}));

  const std::vector<double> tiny = {3e-300, 4e-300};
  row = compute_stats_row(DType::kFloat64, tiny.data(), tiny.size());
  EXPECT_NEAR(row.l2_norm, 5e-300, 1e-14 * 5e-300);  // squares alone would underflow to 0
  EXPECT_EQ(row.zero_fraction, 0.0);

  const std::vector<double> max_values(4, std::numeric_limits<double>::max());
  row = compute_stats_row(DType::kFloat64, max_values.data(), max_values.size());
  EXPECT_EQ(row.mean, std::numeric_limits<double>::max());
  EXPECT_EQ(row.std, 0.0);
  EXPECT_TRUE(std::isinf(row.l2_norm));  // 2 * DBL_MAX: beyond double, honestly inf
}

TEST(StatsRow, VarianceIsNumericallySound) {
  // Naive sum-of-squares variance loses everything here; the exact variance is 22.5.
  const std::vector<double> v = {1e9 + 4, 1e9 + 7, 1e9 + 13, 1e9 + 16};
  const TensorStatsRow row = compute_stats_row(DType::kFloat64, v.data(), v.size());
  EXPECT_EQ(row.mean, 1e9 + 10);
  EXPECT_NEAR(row.std, std::sqrt(22.5), 1e-9);
  std::vector<float> f(20000);
  for (size_t i = 0; i < f.size(); ++i) f[i] = 1e6f + static_cast<float>(i % 2);
  const TensorStatsRow frow = compute_stats_row(DType::kFloat32, f.data(), f.size());
  EXPECT_DOUBLE_EQ(frow.mean, 1e6 + 0.5);
  EXPECT_NEAR(frow.std, 0.5, 1e-9);
}

// Random data of every dtype, several blocks long, against the long double reference.
TEST(StatsRow, EveryDtypeMatchesTheReference) {
  std::mt19937_64 rng(2024);
  const size_t n = 5003;
  for (int dt = 1; dt <= wire::kMaxDType; ++dt) {
    const auto dtype = static_cast<DType>(dt);
    SCOPED_TRACE(wire::dtype_name(dtype));
    std::string bytes;
    std::vector<long double> values;
    std::uniform_real_distribution<double> uniform(-1000, 1000);
    for (size_t i = 0; i < n; ++i) {
      const uint64_t r = rng();
      switch (dtype) {
        case DType::kFloat32: {
          float x = static_cast<float>(uniform(rng));
          if (i % 97 == 5) x = NAN;
          if (i % 1013 == 7) x = (i & 1) ? INFINITY : -INFINITY;
          if (i % 50 == 3) x = 0;
          bytes.append(reinterpret_cast<const char*>(&x), sizeof(x));
          values.push_back(x);
          break;
        }
        case DType::kFloat64: {
          double x = uniform(rng) * 1e100;
          if (i % 89 == 1) x = kNaN;
          if (i % 1009 == 2) x = -kInf;
          if (i % 60 == 4) x = -0.0;
          bytes.append(reinterpret_cast<const char*>(&x), sizeof(x));
          values.push_back(x);
          break;
        }
        case DType::kFloat16:
        case DType::kBFloat16: {
          // Every bit pattern (NaN payloads, subnormals, both zeros), and some infinities.
          auto b = static_cast<uint16_t>(r);
          const uint16_t inf_bits = dtype == DType::kFloat16 ? 0x7c00 : 0x7f80;
          if (i % 1000 == 17) b = inf_bits;
          if (i % 1000 == 18) b = static_cast<uint16_t>(inf_bits | 0x8000);
          bytes.append(reinterpret_cast<const char*>(&b), sizeof(b));
          values.push_back(dtype == DType::kFloat16 ? half_value(b) : bfloat16_value(b));
          break;
        }
        case DType::kInt8: {
          const auto x = static_cast<int8_t>(r);
          bytes.append(reinterpret_cast<const char*>(&x), sizeof(x));
          values.push_back(x);
          break;
        }
        case DType::kInt16: {
          const auto x = static_cast<int16_t>(r);
          bytes.append(reinterpret_cast<const char*>(&x), sizeof(x));
          values.push_back(x);
          break;
        }
        case DType::kInt32: {
          const auto x = static_cast<int32_t>(r);
          bytes.append(reinterpret_cast<const char*>(&x), sizeof(x));
          values.push_back(x);
          break;
        }
        case DType::kInt64: {
          const auto x = static_cast<int64_t>(r);
          bytes.append(reinterpret_cast<const char*>(&x), sizeof(x));
          values.push_back(static_cast<long double>(x));
          break;
        }
        case DType::kUInt8: {
          const auto x = static_cast<uint8_t>(r);
          bytes.append(reinterpret_cast<const char*>(&x), sizeof(x));
          values.push_back(x);
          break;
        }
        case DType::kBool: {
          const auto x = static_cast<uint8_t>(r % 3 == 0 ? 0 : (r >> 8) | 1);
          bytes.append(reinterpret_cast<const char*>(&x), sizeof(x));
          values.push_back(x != 0 ? 1 : 0);
          break;
        }
        case DType::kInvalid: break;
      }
    }
    ASSERT_EQ(bytes.size(), n * wire::dtype_size(dtype));
    const TensorStatsRow row = stats_of(dtype, bytes);
    const Reference ref = reference(values);
    if (dtype == DType::kFloat16 || dtype == DType::kBFloat16) {
      EXPECT_GT(ref.nan, 0u);
      EXPECT_GT(ref.inf, 0u);
    }
    // int64 loses up to 2^-53 of each element converting to double: min/max compare
    // after that same rounding (done by expect_matches).
    expect_matches(row, ref);
  }
}

TEST(StatsRow, BadInputGivesAnEmptyRow) {
  const std::vector<float> v = {1, 2};
  for (const TensorStatsRow& row :
       {compute_stats_row(DType::kInvalid, v.data(), v.size()),
        compute_stats_row(static_cast<DType>(200), v.data(), v.size()), compute_stats_row(DType::kFloat32, nullptr, 5),
        compute_stats_row(DType::kFloat64, v.data(), std::numeric_limits<uint64_t>::max())}) {
    EXPECT_EQ(row.count, 0u);
    EXPECT_TRUE(std::isnan(row.mean));
    EXPECT_TRUE(std::isnan(row.zero_fraction));
  }
}

// ---- the CSV table ----

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// One RFC 4180 record from `text` at *pos (quoted fields may hold ',', '"' and '\n').
std::vector<std::string> parse_csv_record(const std::string& text, size_t* pos) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  size_t i = *pos;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c == '\n') {
      ++i;
      break;
    } else {
      fields.back() += c;
    }
  }
  *pos = i;
  return fields;
}

StatsRowMeta meta(std::string stream, std::vector<int64_t> shape = {4, 3, 28, 28}) {
  StatsRowMeta m;
  m.step = 12;
  m.stream = std::move(stream);
  m.kind = "activation";
  m.rank = 1;
  m.device = "cuda0";
  m.dtype = DType::kFloat32;
  m.shape = std::move(shape);
  return m;
}

TEST(StatsTable, LineFormat) {
  const std::vector<float> v = {1, 2, 3, 4};
  const TensorStatsRow row = compute_stats_row(DType::kFloat32, v.data(), v.size());
  EXPECT_EQ(stats_table_line(meta("conv1"), row),
            "12,conv1,activation,1,cuda0,float32,4x3x28x28,2.5,1.118033988749895,1,4,"
            "5.477225575051661,0,0,0");

  const std::vector<double> d = {1, kNaN, kInf, -kInf, 3, 0};
  StatsRowMeta m = meta("x", {6});
  m.dtype = DType::kFloat64;
  m.step = -3;
  m.rank = 0;
  m.device = "cpu";
  m.kind = "gradient";
  EXPECT_EQ(stats_table_line(m, compute_stats_row(DType::kFloat64, d.data(), d.size())),
            "-3,x,gradient,0,cpu,float64,6,1.3333333333333333,1.247219128924647,0,3,"
            "3.1622776601683795,1,2,0.16666666666666666");

  // Scalars and empty tensors.
  EXPECT_THAT(stats_table_line(meta("s", {}), row), HasSubstr(",float32,scalar,2.5,"));
  EXPECT_EQ(stats_table_line(meta("e", {0}), compute_stats_row(DType::kFloat32, v.data(), 0)),
            "12,e,activation,1,cuda0,float32,0,,,,,,0,0,");
  EXPECT_THAT(stats_table_line(meta("e", {3, 0}), compute_stats_row(DType::kFloat32, nullptr, 0)),
              HasSubstr(",3x0,,,,,,0,0,"));
  // All NaN: no finite statistics, but counts and the zero fraction.
  const std::vector<float> nans = {NAN, NAN};
  EXPECT_EQ(stats_table_line(meta("n", {2}), compute_stats_row(DType::kFloat32, nans.data(), 2)),
            "12,n,activation,1,cuda0,float32,2,,,,,,2,0,0");
}

TEST(StatsTable, NumbersReadBackExactly) {
  TensorStatsRow row;
  row.mean = 0.1;
  row.std = 1.0 / 3.0;
  row.min = -std::numeric_limits<double>::denorm_min();
  row.max = std::numeric_limits<double>::max();
  row.l2_norm = kInf;
  row.zero_fraction = 1e-300;
  row.nan_count = 18446744073709551615ull;
  const std::string line = stats_table_line(meta("r"), row);
  size_t pos = 0;
  const std::vector<std::string> f = parse_csv_record(line, &pos);
  ASSERT_EQ(f.size(), 15u) << line;
  const double expected[] = {row.mean, row.std, row.min, row.max, row.l2_norm};
  for (int i = 0; i < 5; ++i) {
    const double back = std::strtod(f[7 + i].c_str(), nullptr);
    EXPECT_EQ(std::bit_cast<uint64_t>(back), std::bit_cast<uint64_t>(expected[i])) << f[7 + i];
  }
  EXPECT_EQ(f[7], "0.1");
  EXPECT_EQ(f[11], "inf");
  EXPECT_EQ(f[12], "18446744073709551615");
  EXPECT_EQ(std::strtod(f[14].c_str(), nullptr), 1e-300);
}

TEST(StatsTable, QuotesFieldsThatNeedIt) {
  const std::string stream = "a,b \"c\"\nd";
  StatsRowMeta m = meta(stream);
  m.device = "cuda,0";
  const std::vector<float> v = {1};
  const std::string line = stats_table_line(m, compute_stats_row(DType::kFloat32, v.data(), 1));
  const std::string prefix = "12,\"a,b \"\"c\"\"\nd\",activation,1,\"cuda,0\",float32,";
  EXPECT_EQ(line.substr(0, prefix.size()), prefix);
  size_t pos = 0;
  const std::vector<std::string> f = parse_csv_record(line + "\n", &pos);
  ASSERT_EQ(f.size(), 15u);
  EXPECT_EQ(f[1], stream);
  EXPECT_EQ(f[4], "cuda,0");
  EXPECT_EQ(f[6], "4x3x28x28");
  EXPECT_EQ(pos, line.size() + 1);
  // Plain names stay unquoted (dots, spaces, '#').
  const std::string plain = "12,model.fc 1#2,activation,";
  EXPECT_EQ(
      stats_table_line(meta("model.fc 1#2"), compute_stats_row(DType::kFloat32, v.data(), 1)).substr(0, plain.size()),
      plain);
}

TEST(StatsTable, WriterCreatesDirsWritesTheHeaderAndFlushesEachLine) {
  TempDir dir("ts-stats");
  const std::string path = dir.path() + "/a/b/c/stats.csv";
  StatusOr<StatsTableWriter> w = StatsTableWriter::open(path);
  ASSERT_TRUE(w.is_ok()) << w.message();
  EXPECT_EQ(w->path(), path);
  const std::string header = std::string(kStatsTableHeader) + "\n";
  EXPECT_EQ(header,
            "step,stream,kind,rank,device,dtype,shape,mean,std,min,max,l2_norm,nan_count,"
            "inf_count,zero_fraction\n");
  EXPECT_EQ(read_file(path), header);

  const std::vector<float> v = {1, 2, 3, 4};
  const TensorStatsRow row = compute_stats_row(DType::kFloat32, v.data(), v.size());
  ASSERT_TRUE(w->append(meta("conv1"), row).is_ok());
  // Visible in the file at once, while the writer is still open.
  EXPECT_EQ(read_file(path), header + stats_table_line(meta("conv1"), row) + "\n");
  ASSERT_TRUE(w->append(meta("we,ird\n"), row).is_ok());
  EXPECT_EQ(read_file(path),
            header + stats_table_line(meta("conv1"), row) + "\n" + stats_table_line(meta("we,ird\n"), row) + "\n");
  // A moved writer keeps writing.
  StatsTableWriter moved = std::move(*w);
  ASSERT_TRUE(moved.append(meta("conv2"), row).is_ok());
  EXPECT_FALSE(w->append(meta("conv3"), row).is_ok());  // NOLINT: moved-from: an error
  const std::string text = read_file(path);
  size_t pos = 0;
  std::vector<std::vector<std::string>> records;
  while (pos < text.size()) records.push_back(parse_csv_record(text, &pos));
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[2][1], "we,ird\n");
  EXPECT_EQ(records[3][1], "conv2");
  for (const auto& r : records) EXPECT_EQ(r.size(), 15u);
}

TEST(StatsTable, AppendingToAnExistingTableDoesNotRepeatTheHeader) {
  TempDir dir("ts-stats");
  const std::string path = dir.path() + "/stats.csv";
  const std::vector<float> v = {5};
  const TensorStatsRow row = compute_stats_row(DType::kFloat32, v.data(), 1);
  {
    StatusOr<StatsTableWriter> w = StatsTableWriter::open(path);
    ASSERT_TRUE(w.is_ok()) << w.message();
    ASSERT_TRUE(w->append(meta("first"), row).is_ok());
  }
  {
    StatusOr<StatsTableWriter> w = StatsTableWriter::open(path);
    ASSERT_TRUE(w.is_ok()) << w.message();
    ASSERT_TRUE(w->append(meta("second"), row).is_ok());
  }
  const std::string header = std::string(kStatsTableHeader) + "\n";
  EXPECT_EQ(read_file(path),
            header + stats_table_line(meta("first"), row) + "\n" + stats_table_line(meta("second"), row) + "\n");

  // An empty existing file gets the header.
  const std::string empty_path = dir.path() + "/empty.csv";
  std::ofstream(empty_path).close();
  {
    StatusOr<StatsTableWriter> w = StatsTableWriter::open(empty_path);
    ASSERT_TRUE(w.is_ok()) << w.message();
  }
  EXPECT_EQ(read_file(empty_path), header);
}

TEST(StatsTable, ALineCutByAKilledWriterDoesNotSwallowTheNextRow) {
  TempDir dir("ts-stats");
  const std::string path = dir.path() + "/stats.csv";
  const std::string header = std::string(kStatsTableHeader) + "\n";
  std::ofstream(path, std::ios::binary) << header << "7,half,activ";
  const std::vector<float> v = {5};
  const TensorStatsRow row = compute_stats_row(DType::kFloat32, v.data(), 1);
  StatusOr<StatsTableWriter> w = StatsTableWriter::open(path);
  ASSERT_TRUE(w.is_ok()) << w.message();
  ASSERT_TRUE(w->append(meta("next"), row).is_ok());
  EXPECT_EQ(read_file(path), header + "7,half,activ\n" + stats_table_line(meta("next"), row) + "\n");
}

TEST(StatsTable, RefusesFilesThatAreNotStatsTables) {
  TempDir dir("ts-stats");
  const std::string other = dir.path() + "/other.csv";
  std::ofstream(other, std::ios::binary) << "a,b,c\n1,2,3\n";
  StatusOr<StatsTableWriter> w = StatsTableWriter::open(other);
  ASSERT_FALSE(w.is_ok());
  EXPECT_THAT(w.message(), HasSubstr(other + ": exists and is not a stats table"));
  EXPECT_EQ(read_file(other), "a,b,c\n1,2,3\n");  // left alone

  const std::string cut_header = dir.path() + "/cut.csv";
  std::ofstream(cut_header, std::ios::binary) << "step,stream,ki";
  EXPECT_FALSE(StatsTableWriter::open(cut_header).is_ok());

  w = StatsTableWriter::open(dir.path());
  ASSERT_FALSE(w.is_ok());
  EXPECT_THAT(w.message(), HasSubstr(dir.path() + ": cannot open"));

  const std::string file = dir.path() + "/plain";
  std::ofstream(file).close();
  w = StatsTableWriter::open(file + "/sub/stats.csv");
  ASSERT_FALSE(w.is_ok());
  EXPECT_THAT(w.message(), HasSubstr("cannot create directory"));

  EXPECT_FALSE(StatsTableWriter::open("").is_ok());
}

}  // namespace
}  // namespace tensorscope::recording
