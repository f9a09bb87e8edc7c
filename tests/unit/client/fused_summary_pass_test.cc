// fused_summary_pass_test.cc — the fused summary pass on a real CUDA device: several
// tensors of several dtypes (an empty one too) summarized by one pass, its values turned
// into summaries equal to the CPU's; a pass is refused while the last one is not taken;
// the counters the kernel leaves zero serve the next pass. Skipped without a device (or
// without the kernel: a build without a CUDA compiler).
#include "fused_summary_pass.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tensor_summary.h"

namespace tensorscope {
namespace {

bool have_device() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// `bytes` of `host` in device memory (freed by the caller).
void* on_device(const void* host, size_t bytes) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, bytes > 0 ? bytes : 1), cudaSuccess);
  if (bytes > 0) {
    EXPECT_EQ(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }
  return p;
}

// Polls ready() until the values arrive (generous: a loaded machine).
bool wait_ready(fused::Pass& pass) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!pass.ready()) {
    if (!pass.busy() || std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TensorSummary cpu_summary(const void* data, wire::DType dtype, size_t numel, CastFormat cast) {
  TensorRef ref;
  ref.data = data;
  ref.dtype = dtype;
  ref.ndim = 1;
  ref.shape[0] = static_cast<int64_t>(numel);
  ref.strides[0] = 1;
  TensorSummary s;
  std::string why;
  EXPECT_TRUE(summarize_cpu(ref, cast, &s, &why)) << why;
  return s;
}

void expect_close(const TensorSummary& got, const TensorSummary& want) {
  EXPECT_EQ(got.numel, want.numel);
  EXPECT_EQ(got.nan_count, want.nan_count);
  EXPECT_EQ(got.inf_count, want.inf_count);
  EXPECT_EQ(got.zero_count, want.zero_count);
  for (const auto& [g, w, what] : {std::tuple{got.l2, want.l2, "l2"}, std::tuple{got.max_abs, want.max_abs, "max"},
                                   std::tuple{got.mean, want.mean, "mean"}, std::tuple{got.std, want.std, "std"}}) {
    EXPECT_NEAR(g, w, 1e-6 * std::max(1.0, std::fabs(w))) << what;
  }
  EXPECT_EQ(got.underflow_count, want.underflow_count);
  EXPECT_EQ(got.overflow_count, want.overflow_count);
}

TEST(FusedSummaryPass, OnePassSummarizesEveryTensorAsTheCpuDoes) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  if (!fused::kernel_available()) GTEST_SKIP() << "this build has no CUDA compiler: no fused summary kernel";
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.25f, 4.0f);
  std::vector<std::vector<float>> floats;
  for (size_t n : {size_t{1}, size_t{1000}, size_t{70'001}, size_t{1} << 20}) {
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    if (n > 10) x[7] = std::nanf("");
    floats.push_back(std::move(x));
  }
  std::vector<uint16_t> bf16(5000);
  for (size_t i = 0; i < bf16.size(); ++i) bf16[i] = static_cast<uint16_t>(0x3f80 + (i % 64));
  const CastFormatInfo* fp8 = cast_format_info(CastFormat::kFp8E4m3);
  ASSERT_NE(fp8, nullptr);
  std::vector<fused::Input> inputs;
  std::vector<void*> device;
  for (const auto& x : floats) {
    fused::Input in;
    in.data = device.emplace_back(on_device(x.data(), x.size() * sizeof(float)));
    in.dtype = wire::DType::kFloat32;
    in.numel = x.size();
    in.ask.cast = true;
    in.ask.underflow_at_most = fp8->underflow_at_most;
    in.ask.overflow_from = fp8->overflow_from;
    inputs.push_back(in);
  }
  fused::Input empty;
  empty.data = device.emplace_back(on_device(nullptr, 0));
  empty.dtype = wire::DType::kFloat32;
  inputs.push_back(empty);
  fused::Input half;
  half.data = device.emplace_back(on_device(bf16.data(), bf16.size() * 2));
  half.dtype = wire::DType::kBFloat16;
  half.numel = bf16.size();
  inputs.push_back(half);

  fused::Pass pass(0);
  for (int round = 0; round < 2; ++round) {  // the second reuses the buffers and counters
    ASSERT_EQ(pass.queue(inputs, 0), "");
    EXPECT_NE(pass.queue(inputs, 0), "") << "refused while the last pass is not taken";
    ASSERT_TRUE(wait_ready(pass)) << pass.error();
    for (size_t k = 0; k < inputs.size(); ++k) {
      SCOPED_TRACE(k);
      const fused::KernelTensor& t = pass.plan().tensors[k];
      DeviceSummaryLayout layout;
      layout.cast = t.ask.cast ? CastFormat::kFp8E4m3 : CastFormat::kNone;
      TensorSummary got;
      std::string why;
      ASSERT_TRUE(
          summary_from_device_values(pass.values() + t.value_offset, layout.count(), t.numel, layout, &got, &why))
          << why;
      const void* host = k < floats.size() ? static_cast<const void*>(floats[k].data())
          : k == floats.size()             ? nullptr
                                           : static_cast<const void*>(bf16.data());
      expect_close(got, cpu_summary(host, inputs[k].dtype, t.numel, layout.cast));
    }
    pass.release();
  }
  for (void* p : device) cudaFree(p);
}

}  // namespace
}  // namespace tensorscope
