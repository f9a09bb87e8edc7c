// fused_summary_math_test.cc — the fused summary pass (fused_summary_math.h, its plan,
// fused_summary_plan.h) run on the host over the partition the GPU kernel makes (chunks
// of tensors to blocks, strided elements to threads, partials merged as the kernel does,
// or in another order): its values, turned into a
// summary by summary_from_device_values, are the exact summary's (counts exactly, sums to
// 1e-12) and the CPU summary's (its float32 sums to 1e-6), with NaN, Inf and zeros, with the update ratio and the numerics, and for float64
// values whose squares would overflow.
#include "fused_summary_host.h"
#include "fused_summary_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tensor_ref.h"
#include "tensor_refs.h"
#include "tensor_summary.h"
#include "tensorscope/tensor/element_type.h"

namespace tensorscope {
namespace {

using fused::SummaryAsk;
using fused::SummaryPartial;
using testing::ref_of;

// The kernel's pass over `plan` (fused_summary_host.h), or with its chunks merged in
// reverse order.
std::vector<double> emulate_pass(const fused::Plan& plan, bool reverse = false) {
  std::vector<double> values(plan.values);
  fused::run_on_host(plan, values.data(), reverse);
  return values;
}

template <typename T>
wire::DType dtype_of() {
  return sizeof(T) == 8 ? wire::DType::kFloat64 : wire::DType::kFloat32;
}

// The values of one tensor's pass.
template <typename T>
std::vector<double> fused_values(const std::vector<T>& x, const std::vector<T>* before, const SummaryAsk& ask,
                                 bool reverse) {
  fused::Input in;
  in.data = x.data();
  in.before = before != nullptr ? const_cast<T*>(before->data()) : nullptr;  // (read only: no keep)
  in.dtype = dtype_of<T>();
  in.numel = x.size();
  in.ask = ask;
  fused::Plan plan;
  std::string why;
  EXPECT_TRUE(fused::plan_pass({in}, &plan, &why)) << why;
  return emulate_pass(plan, reverse);
}

template <typename T>
std::vector<double> fused_values(const std::vector<T>& x, const SummaryAsk& ask, bool reverse = false) {
  return fused_values<T>(x, nullptr, ask, reverse);
}

TensorSummary from_fused(const std::vector<double>& values, uint64_t numel, const SummaryAsk& ask, CastFormat cast) {
  DeviceSummaryLayout layout;
  layout.scaled = ask.scaled;
  layout.ratio = ask.ratio;
  layout.cast = ask.cast ? cast : CastFormat::kNone;
  TensorSummary s;
  std::string why;
  EXPECT_TRUE(summary_from_device_values(values.data(), values.size(), numel, layout, &s, &why)) << why;
  return s;
}

void expect_near_relative(double got, double want, const char* what, double tolerance = 1e-12) {
  EXPECT_NEAR(got, want, tolerance * std::max(1.0, std::fabs(want))) << what;
}

// The counts exactly, the sums to `tolerance` (relative). The CPU's float32 summary sums
// in float within its blocks (summary_kernel.h): against it, 1e-6.
void expect_same(const TensorSummary& got, const TensorSummary& want, double tolerance) {
  EXPECT_EQ(got.numel, want.numel);
  EXPECT_EQ(got.nan_count, want.nan_count);
  EXPECT_EQ(got.inf_count, want.inf_count);
  EXPECT_EQ(got.zero_count, want.zero_count);
  expect_near_relative(got.l2, want.l2, "l2", tolerance);
  expect_near_relative(got.max_abs, want.max_abs, "max_abs", tolerance);
  expect_near_relative(got.mean, want.mean, "mean", tolerance);
  expect_near_relative(got.std, want.std, "std", tolerance);
  EXPECT_EQ(got.underflow_count, want.underflow_count);
  EXPECT_EQ(got.overflow_count, want.overflow_count);
  expect_near_relative(got.min_abs_nonzero, want.min_abs_nonzero, "min_abs_nonzero", tolerance);
}

// The summary of `x` in long double, the obvious way (two passes over the finite values).
template <typename T>
TensorSummary exact_summary(const std::vector<T>& x) {
  TensorSummary s;
  s.numel = x.size();
  long double sum = 0, finite = 0;
  for (const T v : x) {
    if (std::isnan(v)) ++s.nan_count;
    if (std::isinf(v)) ++s.inf_count;
    if (v == 0) ++s.zero_count;
    if (!std::isfinite(v)) continue;
    sum += v;
    ++finite;
    s.max_abs = std::max(s.max_abs, static_cast<double>(std::fabs(v)));
  }
  const long double mean = finite > 0 ? sum / finite : 0;
  long double squares = 0, centred = 0;
  for (const T v : x) {
    if (!std::isfinite(v)) continue;
    squares += static_cast<long double>(v) * v;
    centred += (v - mean) * (v - mean);
  }
  s.mean = static_cast<double>(mean);
  s.std = finite > 0 ? static_cast<double>(std::sqrt(centred / finite)) : 0;
  s.l2 = static_cast<double>(std::sqrt(squares));
  return s;
}

std::vector<float> activations(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.5f, 2.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  for (size_t i = 0; i < n; i += 7) x[i] = 0;  // ReLU's zeros
  return x;
}

TEST(FusedSummaryMath, APlainTensorIsTheCpuSummary) {
  const std::vector<float> x = activations(100'003, 1);  // not a multiple of a chunk
  const SummaryAsk ask;
  TensorSummary cpu;
  std::string why;
  ASSERT_TRUE(summarize_cpu(ref_of(x, wire::DType::kFloat32), CastFormat::kNone, &cpu, &why)) << why;
  const TensorSummary got = from_fused(fused_values(x, ask), x.size(), ask, CastFormat::kNone);
  expect_same(got, exact_summary(x), 1e-12);
  expect_same(got, cpu, 1e-6);
}

TEST(FusedSummaryMath, NanInfAndZerosAreCountedAndLeftOutOfTheSums) {
  std::vector<float> x = activations(50'000, 2);
  x[10] = std::numeric_limits<float>::quiet_NaN();
  x[20'000] = std::numeric_limits<float>::infinity();
  x[40'000] = -std::numeric_limits<float>::infinity();
  x[49'999] = std::numeric_limits<float>::quiet_NaN();
  const SummaryAsk ask;
  TensorSummary cpu;
  std::string why;
  ASSERT_TRUE(summarize_cpu(ref_of(x, wire::DType::kFloat32), CastFormat::kNone, &cpu, &why)) << why;
  const TensorSummary got = from_fused(fused_values(x, ask), x.size(), ask, CastFormat::kNone);
  EXPECT_EQ(got.nan_count, 2u);
  EXPECT_EQ(got.inf_count, 2u);
  expect_same(got, exact_summary(x), 1e-12);
  expect_same(got, cpu, 1e-6);
}

TEST(FusedSummaryMath, TheMergeOrderDoesNotMatter) {
  const std::vector<float> x = activations(77'777, 3);
  const SummaryAsk ask;
  const std::vector<double> forward = fused_values(x, ask), backward = fused_values(x, ask, true);
  ASSERT_EQ(forward.size(), backward.size());
  for (size_t i = 0; i < forward.size(); ++i) expect_near_relative(backward[i], forward[i], "value");
}

TEST(FusedSummaryMath, TheUpdateRatioAndTheNumericsAreTheCpuOnes) {
  std::vector<float> w = activations(30'000, 4), before = activations(30'000, 5);
  w[3] = 1e-30f;  // bf16 keeps it; fp16 makes it 0
  w[4] = 1e5f;    // fp16 overflows
  const CastFormatInfo* fp16 = cast_format_info(CastFormat::kFp16);
  ASSERT_NE(fp16, nullptr);
  SummaryAsk ask;
  ask.ratio = true;
  ask.cast = true;
  ask.underflow_at_most = fp16->underflow_at_most;
  ask.overflow_from = fp16->overflow_from;
  TensorSummary cpu;
  std::string why;
  ASSERT_TRUE(summarize_cpu(ref_of(w, wire::DType::kFloat32), CastFormat::kFp16, &cpu, &why)) << why;
  double ratio = 0;
  ASSERT_TRUE(update_ratio_cpu(ref_of(w, wire::DType::kFloat32), ref_of(before, wire::DType::kFloat32), &ratio, &why))
      << why;
  const TensorSummary got = from_fused(fused_values(w, &before, ask, false), w.size(), ask, CastFormat::kFp16);
  expect_same(got, cpu, 1e-6);
  EXPECT_GE(got.underflow_count, 1u);
  EXPECT_GE(got.overflow_count, 1u);
  ASSERT_TRUE(got.has_update_ratio);
  expect_near_relative(got.update_ratio, ratio, "update ratio", 1e-6);
}

TEST(FusedSummaryMath, Float64ValuesWhoseSquaresOverflowAreScaled) {
  std::vector<double> x(20'000);
  std::mt19937 rng(6);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (double& v : x) v = u(rng) * 1e300;
  SummaryAsk ask;
  ask.scaled = true;
  TensorSummary cpu;
  std::string why;
  ASSERT_TRUE(summarize_cpu(ref_of(x, wire::DType::kFloat64), CastFormat::kNone, &cpu, &why)) << why;
  ASSERT_TRUE(std::isfinite(cpu.l2));
  const TensorSummary got = from_fused(fused_values(x, ask), x.size(), ask, CastFormat::kNone);
  ASSERT_TRUE(std::isfinite(got.l2));
  expect_same(got, cpu, 1e-12);
}

TEST(FusedSummaryMath, TinyFloat64ValuesKeepTheirPrecisionThroughEmptyPartials) {
  std::vector<double> x(9'000, 0.0);
  for (size_t i = 5'000; i < x.size(); ++i) x[i] = 1e-300 * static_cast<double>(i % 13);
  SummaryAsk ask;
  ask.scaled = true;
  TensorSummary cpu;
  std::string why;
  ASSERT_TRUE(summarize_cpu(ref_of(x, wire::DType::kFloat64), CastFormat::kNone, &cpu, &why)) << why;
  expect_same(from_fused(fused_values(x, ask), x.size(), ask, CastFormat::kNone), cpu, 1e-12);
}

TEST(FusedSummaryMath, AnEmptyTensorGivesZeros) {
  const std::vector<float> x;
  const SummaryAsk ask;
  const std::vector<double> values = fused_values(x, ask);
  ASSERT_EQ(values.size(), 6u);
  for (double v : values) EXPECT_EQ(v, 0.0);
}

TEST(FusedSummaryMath, HalvesAndBfloat16sReadAsTheTensorLibraryReadsThem) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float want = tensor::float16_to_float(h), got = fused::half_value(h);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << bits;
    } else {
      ASSERT_EQ(got, want) << bits;
    }
    const float bf = fused::bfloat16_value(h), bf_want = tensor::bfloat16_to_float(h);
    if (!std::isnan(bf_want)) {
      ASSERT_EQ(bf, bf_want) << bits;
    }
  }
}

TEST(FusedSummaryMath, EachChunkBelongsToItsTensorAndEmptyTensorsHaveNone) {
  const std::vector<uint64_t> first = {0, 0, 3, 3, 5};  // chunks: 0, 3, 0, 2
  const int count = 4;
  EXPECT_EQ(fused::chunk_owner(first.data(), count, 0), 1);
  EXPECT_EQ(fused::chunk_owner(first.data(), count, 2), 1);
  EXPECT_EQ(fused::chunk_owner(first.data(), count, 3), 3);
  EXPECT_EQ(fused::chunk_owner(first.data(), count, 4), 3);
}

TEST(FusedSummaryMath, OnePassSummarizesTensorsOfEveryDtypeAsTheCpuDoes) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const size_t n = 3 * fused::kChunkElements + 5;
  std::vector<float> f32(n);
  for (float& v : f32) v = normal(rng);
  std::vector<uint16_t> f16(n), bf16(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t bits = std::bit_cast<uint32_t>(f32[i]);
    bf16[i] = static_cast<uint16_t>(bits >> 16);
    f16[i] = static_cast<uint16_t>(0x3c00 + (i % 1000));  // 1 .. 2
  }
  std::vector<int32_t> i32(1000);
  for (size_t i = 0; i < i32.size(); ++i) i32[i] = static_cast<int32_t>(i) - 500;
  std::vector<uint8_t> flags(777);
  for (size_t i = 0; i < flags.size(); ++i) flags[i] = i % 3 == 0 ? 1 : 0;
  std::vector<double> f64(5000);
  for (size_t i = 0; i < f64.size(); ++i) f64[i] = 1e200 * std::sin(static_cast<double>(i));
  struct Case {
    const void* data;
    wire::DType dtype;
    size_t numel;
  };
  const std::vector<Case> cases = {{f32.data(), wire::DType::kFloat32, n},
                                   {f16.data(), wire::DType::kFloat16, n},
                                   {nullptr, wire::DType::kFloat32, 0},
                                   {bf16.data(), wire::DType::kBFloat16, n},
                                   {i32.data(), wire::DType::kInt32, i32.size()},
                                   {flags.data(), wire::DType::kBool, flags.size()},
                                   {f64.data(), wire::DType::kFloat64, f64.size()}};
  std::vector<fused::Input> inputs;
  for (const Case& c : cases) {
    fused::Input in;
    in.data = c.data;
    in.dtype = c.dtype;
    in.numel = c.numel;
    inputs.push_back(in);
  }
  fused::Plan plan;
  std::string why;
  ASSERT_TRUE(fused::plan_pass(inputs, &plan, &why)) << why;
  EXPECT_EQ(plan.chunks, 4u + 4u + 0u + 4u + 1u + 1u + 1u);
  EXPECT_EQ(plan.values, 6u * cases.size());
  const std::vector<double> values = emulate_pass(plan);
  for (size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE(k);
    TensorRef ref;
    ref.data = cases[k].data;
    ref.dtype = cases[k].dtype;
    ref.ndim = 1;
    ref.shape[0] = static_cast<int64_t>(cases[k].numel);
    ref.strides[0] = 1;
    TensorSummary cpu;
    ASSERT_TRUE(summarize_cpu(ref, CastFormat::kNone, &cpu, &why)) << why;
    DeviceSummaryLayout layout;
    layout.scaled = cases[k].dtype == wire::DType::kFloat64;
    TensorSummary got;
    ASSERT_TRUE(summary_from_device_values(values.data() + plan.tensors[k].value_offset, layout.count(), cases[k].numel,
                                           layout, &got, &why))
        << why;
    expect_same(got, cpu, 1e-6);
  }
}

TEST(FusedSummaryMath, APlanRefusesWhatTheKernelCannotRead) {
  fused::Input in;
  in.dtype = wire::DType::kInvalid;
  in.numel = 4;
  fused::Plan plan;
  std::string why;
  EXPECT_FALSE(fused::plan_pass({in}, &plan, &why));
  EXPECT_NE(why.find("dtype"), std::string::npos) << why;
  in.dtype = wire::DType::kFloat32;
  in.ask.ratio = true;
  EXPECT_FALSE(fused::plan_pass({in}, &plan, &why));
  EXPECT_NE(why.find("previous"), std::string::npos) << why;
}

}  // namespace
}  // namespace tensorscope
