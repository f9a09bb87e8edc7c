// tensor_compare_test.cc — TensorComparer and compare_npy_files: equal, nearly equal and
// different tensors (metrics checked against values computed here), NaN and Inf, mixed
// dtypes, shape mismatches, all-zero and empty tensors, small chunk sizes, the files
// compared from their mappings and through buffers alike, and missing, corrupt and
// truncated files.
#include "compare/tensor_compare.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tensorscope/recording/npy_file.h"
#include "temp_dir.h"

namespace tensorscope::compare {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using wire::DType;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

template <typename T>
std::string write(const TempDir& dir, const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                  const std::vector<T>& values) {
  const std::string path = dir.path() + "/" + name;
  Status written = recording::write_npy(path, dtype, shape, values.data(), values.size() * sizeof(T));
  EXPECT_TRUE(written) << written.message();
  return path;
}

std::string write_f64(const TempDir& dir, const std::string& name, const std::vector<double>& v) {
  return write(dir, name, DType::kFloat64, {static_cast<int64_t>(v.size())}, v);
}

std::string write_f32(const TempDir& dir, const std::string& name, const std::vector<float>& v) {
  return write(dir, name, DType::kFloat32, {static_cast<int64_t>(v.size())}, v);
}

bool same_or_both_nan(double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); }

// compare_npy_files both ways, which must agree: from the files' mappings, and read into
// buffers of `chunk` bytes (the cosine's sums in other orders: within rounding). Returns
// the buffered result.
TensorCompareResult compare_ok(const std::string& a, const std::string& b, CompareTolerance tolerance = {},
                               size_t chunk = kCompareChunkBytes) {
  auto mapped = compare_npy_files(a, b, tolerance, chunk, CompareReads::kMapped);
  auto buffered = compare_npy_files(a, b, tolerance, chunk, CompareReads::kBuffered);
  EXPECT_TRUE(mapped) << mapped.message();
  EXPECT_TRUE(buffered) << buffered.message();
  if (!mapped || !buffered) return TensorCompareResult{};
  EXPECT_EQ(mapped->shape_mismatch, buffered->shape_mismatch) << chunk;
  EXPECT_EQ(mapped->total, buffered->total) << chunk;
  EXPECT_EQ(mapped->mismatches, buffered->mismatches) << chunk;
  EXPECT_EQ(mapped->nonfinite_mismatches, buffered->nonfinite_mismatches) << chunk;
  EXPECT_EQ(mapped->max_abs_error, buffered->max_abs_error) << chunk;
  EXPECT_EQ(mapped->max_rel_error, buffered->max_rel_error) << chunk;
  EXPECT_EQ(mapped->first_mismatch, buffered->first_mismatch) << chunk;
  EXPECT_TRUE(same_or_both_nan(mapped->first_mismatch_a, buffered->first_mismatch_a)) << chunk;
  EXPECT_TRUE(same_or_both_nan(mapped->first_mismatch_b, buffered->first_mismatch_b)) << chunk;
  EXPECT_NEAR(mapped->cosine, buffered->cosine, 1e-12) << chunk;
  return *buffered;
}

// Metrics computed directly, element by element, for finite inputs.
struct Expected {
  uint64_t mismatches = 0;
  double max_abs = 0, max_rel = 0, cosine = 0;
  int64_t first = -1;
};
Expected reference(const std::vector<double>& a, const std::vector<double>& b, CompareTolerance t) {
  Expected e;
  long double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(a[i] - b[i]);
    e.max_abs = std::max(e.max_abs, d);
    if (b[i] != 0) e.max_rel = std::max(e.max_rel, d / std::fabs(b[i]));
    if (!(d <= t.atol + t.rtol * std::fabs(b[i]))) {
      if (e.first < 0) e.first = static_cast<int64_t>(i);
      ++e.mismatches;
    }
    dot += static_cast<long double>(a[i]) * b[i];
    na += static_cast<long double>(a[i]) * a[i];
    nb += static_cast<long double>(b[i]) * b[i];
  }
  e.cosine = static_cast<double>(dot / (std::sqrt(na) * std::sqrt(nb)));
  return e;
}

// `r` (n elements, read in chunks of `chunk` bytes) has the metrics of `e`: the same
// counts, maxima and first mismatch, the cosine within rounding.
void expect_reference(const TensorCompareResult& r, const Expected& e, size_t n, size_t chunk) {
  EXPECT_EQ(r.total, n) << chunk;
  EXPECT_EQ(r.mismatches, e.mismatches) << chunk;
  EXPECT_EQ(r.nonfinite_mismatches, 0u) << chunk;
  EXPECT_DOUBLE_EQ(r.max_abs_error, e.max_abs) << chunk;
  EXPECT_DOUBLE_EQ(r.max_rel_error, e.max_rel) << chunk;
  EXPECT_NEAR(r.cosine, e.cosine, 1e-12) << chunk;
  EXPECT_EQ(r.first_mismatch, e.first) << chunk;
}

TEST(TensorCompareTest, EqualFilesMatch) {
  TempDir dir;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  std::vector<float> v(10000);
  for (float& x : v) x = dist(rng);
  const auto r = compare_ok(write_f32(dir, "a.npy", v), write_f32(dir, "b.npy", v));
  EXPECT_TRUE(r.allclose());
  EXPECT_FALSE(r.shape_mismatch);
  EXPECT_EQ(r.total, 10000u);
  EXPECT_EQ(r.mismatches, 0u);
  EXPECT_EQ(r.max_abs_error, 0.0);
  EXPECT_EQ(r.max_rel_error, 0.0);
  EXPECT_NEAR(r.cosine, 1.0, 1e-12);
  EXPECT_EQ(r.first_mismatch, -1);
  EXPECT_EQ(r.dtype_a, DType::kFloat32);
  EXPECT_EQ(r.shape_a, std::vector<int64_t>{10000});
}

TEST(TensorCompareTest, NearlyEqualWithinToleranceAndOutside) {
  TempDir dir;
  std::vector<double> a(1000), b(1000);
  for (size_t i = 0; i < a.size(); ++i) {
    b[i] = 1.0 + static_cast<double>(i);
    a[i] = b[i] * (1.0 + 5e-6);  // relative error 5e-6 < rtol 1e-5
  }
  const std::string pa = write_f64(dir, "a.npy", a), pb = write_f64(dir, "b.npy", b);
  const auto loose = compare_ok(pa, pb);
  EXPECT_TRUE(loose.allclose());
  EXPECT_NEAR(loose.max_rel_error, 5e-6, 1e-12);
  EXPECT_GT(loose.max_abs_error, 0.0);

  const auto tight = compare_ok(pa, pb, CompareTolerance{1e-8, 1e-6});
  EXPECT_FALSE(tight.allclose());
  EXPECT_EQ(tight.mismatches, 1000u);
  EXPECT_EQ(tight.first_mismatch, 0);

  // atol alone can absorb the difference.
  const auto absolute = compare_ok(pa, pb, CompareTolerance{0.01, 0.0});
  EXPECT_TRUE(absolute.allclose());
}

TEST(TensorCompareTest, ToleranceIsAsymmetricInBLikeNumpy) {
  TempDir dir;
  // |a-b| = 1; atol 0, rtol 0.5: close when |b| >= 2.
  const std::string p1 = write_f64(dir, "1.npy", {1.0});
  const std::string p2 = write_f64(dir, "2.npy", {2.0});
  EXPECT_TRUE(compare_ok(p1, p2, CompareTolerance{0, 0.5}).allclose());
  EXPECT_FALSE(compare_ok(p2, p1, CompareTolerance{0, 0.5}).allclose());
}

TEST(TensorCompareTest, DifferentMetricsMatchHandComputedValues) {
  TempDir dir;
  const std::vector<double> a = {1, 2, 3, 4};
  const std::vector<double> b = {1, 2.5, 2, 0};
  const auto r = compare_ok(write_f64(dir, "a.npy", a), write_f64(dir, "b.npy", b));
  EXPECT_FALSE(r.allclose());
  EXPECT_EQ(r.total, 4u);
  EXPECT_EQ(r.mismatches, 3u);
  EXPECT_EQ(r.nonfinite_mismatches, 0u);
  EXPECT_DOUBLE_EQ(r.max_abs_error, 4.0);
  EXPECT_DOUBLE_EQ(r.max_rel_error, 0.5);  // b == 0 (|a-b| = 4) is skipped
  EXPECT_NEAR(r.cosine, 12.0 / (std::sqrt(30.0) * std::sqrt(11.25)), 1e-15);
  EXPECT_EQ(r.first_mismatch, 1);
  EXPECT_EQ(r.first_mismatch_a, 2.0);
  EXPECT_EQ(r.first_mismatch_b, 2.5);
}

TEST(TensorCompareTest, RandomDifferencesAcrossTinyChunksMatchReference) {
  TempDir dir;
  std::mt19937 rng(7);
  std::normal_distribution<double> dist;
  std::vector<double> a(5003), b(5003);
  for (size_t i = 0; i < a.size(); ++i) {
    b[i] = dist(rng);
    a[i] = b[i] + (i % 3 == 0 ? dist(rng) * 1e-3 : 0.0);
  }
  const CompareTolerance tol{1e-4, 1e-3};
  const Expected e = reference(a, b, tol);
  ASSERT_GT(e.mismatches, 0u);
  const std::string pa = write_f64(dir, "a.npy", a), pb = write_f64(dir, "b.npy", b);
  for (size_t chunk : {size_t{8}, size_t{20}, size_t{4096}, kCompareChunkBytes}) {
    expect_reference(compare_ok(pa, pb, tol, chunk), e, a.size(), chunk);
  }
}

// Large enough to be compared on several threads, in parts merged in order: the same
// counts, maxima and first mismatch as element by element, also when the first mismatch
// lies in a later part and a NaN pair sits in an earlier one.
TEST(TensorCompareTest, PartsComparedOnSeveralThreadsMergeInOrder) {
  TempDir dir;
  std::mt19937 rng(11);
  std::normal_distribution<double> dist;
  const size_t n = 200003;
  std::vector<double> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    b[i] = dist(rng);
    a[i] = b[i] + (i > 150000 && i % 7 == 0 ? dist(rng) * 1e-2 : 1e-9 * dist(rng));
  }
  a[10] = b[10] = kNaN;  // close (the same position), and not in the metrics
  const CompareTolerance tol{1e-6, 1e-4};
  std::vector<double> fa = a, fb = b;
  fa.erase(fa.begin() + 10);
  fb.erase(fb.begin() + 10);
  Expected e = reference(fa, fb, tol);
  ASSERT_GT(e.first, 150000 - 1);
  e.first += 1;  // the NaN pair removed before it
  for (size_t chunk : {kCompareChunkBytes, size_t{256} << 10}) {
    const auto r = compare_ok(write_f64(dir, "a.npy", a), write_f64(dir, "b.npy", b), tol, chunk);
    expect_reference(r, e, n, chunk);
    EXPECT_EQ(r.first_mismatch_a, a[static_cast<size_t>(e.first)]) << chunk;
  }
}

// float32 files go to the kernel straight from their bytes, widened in the registers; a
// block holding a non-finite value goes through the general path. Both give the metrics
// computed here in double from the same floats, at any chunk size.
TEST(TensorCompareTest, Float32FilesMatchTheDoubleReference) {
  TempDir dir;
  std::mt19937 rng(5);
  std::normal_distribution<float> dist;
  const size_t n = 100003;
  std::vector<float> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    b[i] = dist(rng);
    a[i] = b[i] + (i % 11 == 0 ? dist(rng) * 1e-2f : 0.0f);
  }
  a[70001] = b[70001] = std::numeric_limits<float>::infinity();  // close, in a block of its own path
  const CompareTolerance tol{1e-5, 1e-3};
  std::vector<double> da(a.begin(), a.end()), db(b.begin(), b.end());
  da.erase(da.begin() + 70001);
  db.erase(db.begin() + 70001);
  const Expected e = reference(da, db, tol);
  ASSERT_GT(e.mismatches, 0u);
  for (size_t chunk : {size_t{8}, size_t{4100}, size_t{256} << 10, kCompareChunkBytes}) {
    const auto r = compare_ok(write_f32(dir, "a.npy", a), write_f32(dir, "b.npy", b), tol, chunk);
    expect_reference(r, e, n, chunk);
    EXPECT_EQ(r.first_mismatch_a, static_cast<double>(a[static_cast<size_t>(e.first)])) << chunk;
  }
}

TEST(TensorCompareTest, NaNEqualsNaNOnlyAtTheSamePosition) {
  TempDir dir;
  const auto same = compare_ok(write_f64(dir, "a.npy", {kNaN, 1.0, kNaN}), write_f64(dir, "b.npy", {kNaN, 1.0, kNaN}));
  EXPECT_TRUE(same.allclose());
  EXPECT_EQ(same.max_abs_error, 0.0);
  EXPECT_NEAR(same.cosine, 1.0, 1e-15);

  const auto moved = compare_ok(write_f64(dir, "c.npy", {kNaN, 1.0, 2.0}), write_f64(dir, "d.npy", {1.0, 1.0, kNaN}));
  EXPECT_FALSE(moved.allclose());
  EXPECT_EQ(moved.mismatches, 2u);
  EXPECT_EQ(moved.nonfinite_mismatches, 2u);
  EXPECT_EQ(moved.first_mismatch, 0);
  EXPECT_EQ(moved.max_abs_error, 0.0);  // metrics only over finite pairs
}

TEST(TensorCompareTest, InfinitiesMatchOnlyTheSameInfinity) {
  TempDir dir;
  EXPECT_TRUE(compare_ok(write_f64(dir, "a.npy", {kInf, -kInf}), write_f64(dir, "b.npy", {kInf, -kInf})).allclose());
  const auto r = compare_ok(write_f64(dir, "c.npy", {kInf, 1.0, 5.0}), write_f64(dir, "d.npy", {-kInf, kInf, 5.0}));
  EXPECT_EQ(r.mismatches, 2u);
  EXPECT_EQ(r.nonfinite_mismatches, 2u);
}

TEST(TensorCompareTest, MixedDTypesCompareAsValues) {
  TempDir dir;
  // float16 bits of 0.5, 1.25, -2, 65504; bfloat16 bits of 1, -0.5, 3.
  const std::vector<uint16_t> half = {0x3800, 0x3D00, 0xC000, 0x7BFF};
  const std::vector<uint16_t> bf16 = {0x3F80, 0xBF00, 0x4040};
  const std::string ph = write(dir, "h.npy", DType::kFloat16, {4}, half);
  const std::string pf = write_f32(dir, "f.npy", {0.5f, 1.25f, -2.0f, 65504.0f});
  const auto r = compare_ok(ph, pf);
  EXPECT_TRUE(r.allclose());
  EXPECT_EQ(r.dtype_a, DType::kFloat16);
  EXPECT_EQ(r.dtype_b, DType::kFloat32);
  EXPECT_EQ(r.max_abs_error, 0.0);

  const auto off = compare_ok(ph, write_f32(dir, "g.npy", {0.5f, 1.25f, -2.0f, 65500.0f}));
  EXPECT_FALSE(off.allclose());
  EXPECT_DOUBLE_EQ(off.max_abs_error, 4.0);
  EXPECT_EQ(off.first_mismatch, 3);

  const std::string pb = write(dir, "b.npy", DType::kBFloat16, {3}, bf16);
  EXPECT_TRUE(compare_ok(pb, write_f64(dir, "d.npy", {1.0, -0.5, 3.0})).allclose());
  const std::string pi = write(dir, "i.npy", DType::kInt32, {3}, std::vector<int32_t>{1, 0, 3});
  const auto ri = compare_ok(pb, pi);
  EXPECT_EQ(ri.mismatches, 1u);
  EXPECT_DOUBLE_EQ(ri.max_abs_error, 0.5);

  const std::string pbool = write(dir, "bool.npy", DType::kBool, {3}, std::vector<uint8_t>{1, 0, 7});
  const std::string pu8 = write(dir, "u8.npy", DType::kUInt8, {3}, std::vector<uint8_t>{1, 0, 1});
  EXPECT_TRUE(compare_ok(pbool, pu8).allclose());  // any non-zero bool byte is 1
  const std::string pi64 = write(dir, "i64.npy", DType::kInt64, {3}, std::vector<int64_t>{-5, 0, 1});
  const std::string pi8 = write(dir, "i8.npy", DType::kInt8, {3}, std::vector<int8_t>{-5, 0, 1});
  EXPECT_TRUE(compare_ok(pi64, pi8).allclose());
}

TEST(TensorCompareTest, ShapeMismatchIsADifferenceNotAnError) {
  TempDir dir;
  const std::vector<float> six(6, 1.0f);
  const std::string p23 = write(dir, "23.npy", DType::kFloat32, {2, 3}, six);
  const std::string p32 = write(dir, "32.npy", DType::kFloat32, {3, 2}, six);
  const std::string p6 = write(dir, "6.npy", DType::kFloat32, {6}, six);
  const std::string p5 = write(dir, "5.npy", DType::kFloat32, {5}, std::vector<float>(5, 1.0f));
  for (const auto& [a, b] : {std::pair{p23, p32}, std::pair{p23, p6}, std::pair{p6, p5}}) {
    const auto r = compare_ok(a, b);
    EXPECT_TRUE(r.shape_mismatch) << a << " " << b;
    EXPECT_FALSE(r.allclose());
    EXPECT_EQ(r.total, 0u);
  }
  const auto r = compare_ok(p23, p32);
  EXPECT_EQ(r.shape_a, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(r.shape_b, (std::vector<int64_t>{3, 2}));
  // 0-d vs 1-element 1-d.
  const std::string p0 = write(dir, "0.npy", DType::kFloat32, {}, std::vector<float>{1.0f});
  const std::string p1 = write(dir, "1.npy", DType::kFloat32, {1}, std::vector<float>{1.0f});
  EXPECT_TRUE(compare_ok(p0, p1).shape_mismatch);
  EXPECT_TRUE(compare_ok(p0, p0).allclose());
}

TEST(TensorCompareTest, AllZeroVectorsCosine) {
  TempDir dir;
  const std::string z1 = write_f32(dir, "z1.npy", std::vector<float>(100, 0.0f));
  const std::string z2 = write_f32(dir, "z2.npy", std::vector<float>(100, 0.0f));
  std::vector<float> one(100, 0.0f);
  one[50] = 1e-3f;
  const std::string nz = write_f32(dir, "nz.npy", one);
  const auto zz = compare_ok(z1, z2);
  EXPECT_TRUE(zz.allclose());
  EXPECT_EQ(zz.cosine, 1.0);
  const auto zn = compare_ok(z1, nz);
  EXPECT_EQ(zn.cosine, 0.0);
  EXPECT_EQ(zn.mismatches, 1u);
  EXPECT_EQ(zn.max_rel_error, 1.0);                  // |0 - 1e-3| / 1e-3
  EXPECT_EQ(compare_ok(nz, z1).max_rel_error, 0.0);  // b == 0 everywhere: skipped
}

TEST(TensorCompareTest, EmptyTensors) {
  TempDir dir;
  const std::string e1 = write(dir, "e1.npy", DType::kFloat32, {0}, std::vector<float>{});
  const std::string e2 = write(dir, "e2.npy", DType::kFloat16, {0}, std::vector<uint16_t>{});
  const std::string e03 = write(dir, "e03.npy", DType::kFloat32, {0, 3}, std::vector<float>{});
  const auto r = compare_ok(e1, e2);
  EXPECT_TRUE(r.allclose());
  EXPECT_EQ(r.total, 0u);
  EXPECT_EQ(r.cosine, 1.0);
  EXPECT_TRUE(compare_ok(e1, e03).shape_mismatch);
}

TEST(TensorCompareTest, MissingCorruptAndTruncatedFilesAreErrorsNamingTheFile) {
  TempDir dir;
  const std::string good = write_f32(dir, "good.npy", std::vector<float>(1000, 1.0f));
  const std::string missing = dir.path() + "/missing.npy";
  auto r = compare_npy_files(good, missing, {});
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("missing.npy"));

  const std::string corrupt = dir.path() + "/corrupt.npy";
  std::ofstream(corrupt) << "this is not an npy file at all";
  r = compare_npy_files(corrupt, good, {});
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("corrupt.npy"));

  const std::string truncated = write_f32(dir, "truncated.npy", std::vector<float>(1000, 1.0f));
  ASSERT_EQ(::truncate(truncated.c_str(), 1000), 0);
  r = compare_npy_files(good, truncated, {});
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("truncated.npy"));

  EXPECT_FALSE(compare_npy_files(good, good, {}, 4));  // chunk too small
}

TEST(TensorCompareTest, DescribeTensor) {
  EXPECT_EQ(describe_tensor(DType::kFloat32, {4, 8}), "float32[4,8]");
  EXPECT_EQ(describe_tensor(DType::kBFloat16, {}), "bfloat16[]");
}

}  // namespace
}  // namespace tensorscope::compare
