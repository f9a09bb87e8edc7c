// SummaryBatch (client/core/summary_batch.h) with tensors in host memory: one pass per
// stream at flush whatever the count, each ticket's values those of the tensor alone, a
// cancelled ticket left out, nothing ready before the flush; a device pass where there is
// no device fails its tickets with a reason.
#include "summary_batch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "fused_summary_host.h"
#include "tensor_summary.h"

namespace tensorscope {
namespace {

using fused::SummaryBatch;

fused::Input input_of(const std::vector<float>& x, const std::vector<float>* before = nullptr) {
  fused::Input in;
  in.data = x.data();
  in.dtype = wire::DType::kFloat32;
  in.numel = x.size();
  in.before = before != nullptr ? const_cast<float*>(before->data()) : nullptr;  // (read only: no keep)
  in.ask.ratio = before != nullptr;
  return in;
}

// The values of `in` summarized alone.
std::vector<double> alone(const fused::Input& in) {
  fused::Plan plan;
  std::string why;
  EXPECT_TRUE(fused::plan_pass({in}, &plan, &why)) << why;
  std::vector<double> values(plan.values);
  fused::run_on_host(plan, values.data());
  return values;
}

std::vector<float> values_from(float start, size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = start + 0.25f * static_cast<float>(i % 13) - (i % 7 == 0 ? 3.0f : 0.0f);
  return x;
}

TEST(SummaryBatch, OnePassPerStreamAndEachTicketHasItsTensorsValues) {
  const std::vector<float> a = values_from(1, 40000), b = values_from(-2, 5), c = values_from(0.5f, 17000);
  const std::vector<float> a_before = values_from(1.5f, 40000);
  SummaryBatch batch;
  const uint64_t ta = batch.add(input_of(a, &a_before), SummaryBatch::kHost, 0);
  const uint64_t tb = batch.add(input_of(b), SummaryBatch::kHost, 7);  // another stream
  const uint64_t tc = batch.add(input_of(c), SummaryBatch::kHost, 0);
  const uint64_t cancelled = batch.add(input_of(b), SummaryBatch::kHost, 0);
  batch.cancel(cancelled);
  EXPECT_EQ(batch.gathered(), 3u);
  std::vector<double> values;
  std::string why;
  EXPECT_EQ(batch.take(ta, &values, &why), SummaryBatch::State::kUnknown) << "nothing before the flush";
  EXPECT_EQ(batch.flush(), "");
  EXPECT_EQ(batch.passes(), 2u) << "streams 0 and 7";
  EXPECT_EQ(batch.gathered(), 0u);
  EXPECT_EQ(batch.take(cancelled, &values, &why), SummaryBatch::State::kUnknown);
  const struct {
    uint64_t ticket;
    fused::Input in;
  } cases[] = {{ta, input_of(a, &a_before)}, {tb, input_of(b)}, {tc, input_of(c)}};
  for (const auto& k : cases) {
    ASSERT_EQ(batch.take(k.ticket, &values, &why), SummaryBatch::State::kReady) << why;
    EXPECT_EQ(values, alone(k.in));
    EXPECT_EQ(batch.take(k.ticket, &values, &why), SummaryBatch::State::kUnknown) << "taken once";
  }
}

TEST(SummaryBatch, AKeptRatioCopiesTheTensorOverItsPreviousValueAsItReadsIt) {
  const std::vector<float> w0 = values_from(1, 20000), w1 = values_from(1.5f, 20000);
  std::vector<float> kept = w0;
  fused::Input in = input_of(w1, &kept);
  in.before = kept.data();
  in.ask.keep = true;
  const std::vector<double> expected = alone(input_of(w1, &w0));  // (the ratio against w0, read only)
  SummaryBatch batch;
  const uint64_t t = batch.add(in, SummaryBatch::kHost, 0);
  ASSERT_EQ(batch.flush(), "");
  std::vector<double> values;
  std::string why;
  ASSERT_EQ(batch.take(t, &values, &why), SummaryBatch::State::kReady) << why;
  EXPECT_EQ(values, expected);
  EXPECT_EQ(kept, w1) << "the next ratio's previous value";
}

TEST(SummaryBatch, TheValuesAreTheCpuSummary) {
  const std::vector<float> w = values_from(3, 9000), w_before = values_from(2.5f, 9000);
  SummaryBatch batch;
  const uint64_t t = batch.add(input_of(w, &w_before), SummaryBatch::kHost, 0);
  ASSERT_EQ(batch.flush(), "");
  std::vector<double> values;
  std::string why;
  ASSERT_EQ(batch.take(t, &values, &why), SummaryBatch::State::kReady) << why;
  TensorSummary fused, cpu;
  ASSERT_TRUE(summary_from_device_values(values.data(), values.size(), w.size(),
                                         DeviceSummaryLayout{false, true, CastFormat::kNone}, &fused, &why))
      << why;
  TensorRef now, before;
  now.data = w.data();
  before.data = w_before.data();
  for (TensorRef* r : {&now, &before}) {
    r->dtype = wire::DType::kFloat32;
    r->ndim = 1;
    r->shape[0] = static_cast<int64_t>(w.size());
    r->strides[0] = 1;
  }
  ASSERT_TRUE(summarize_cpu(now, CastFormat::kNone, &cpu, &why)) << why;
  double ratio = 0;
  ASSERT_TRUE(update_ratio_cpu(now, before, &ratio, &why)) << why;
  EXPECT_EQ(fused.numel, cpu.numel);
  EXPECT_EQ(fused.zero_count, cpu.zero_count);
  EXPECT_NEAR(fused.l2, cpu.l2, 1e-6 * cpu.l2);
  EXPECT_NEAR(fused.mean, cpu.mean, 1e-6 * std::abs(cpu.mean));
  EXPECT_NEAR(fused.std, cpu.std, 1e-6 * cpu.std);
  EXPECT_NEAR(fused.update_ratio, ratio, 1e-9 * ratio);
}

TEST(SummaryBatch, ADevicePassWithoutADeviceFailsItsTicketsWithAReason) {
  const std::vector<float> x = values_from(1, 100), none;
  SummaryBatch batch;
  const uint64_t t = batch.add(input_of(none), 0, 0);  // (empty: nothing read where there is a device)
  const uint64_t host = batch.add(input_of(x), SummaryBatch::kHost, 0);
  const std::string failed = batch.flush();
  std::vector<double> values;
  std::string why;
  const SummaryBatch::State state = batch.take(t, &values, &why);
  if (failed.empty()) GTEST_SKIP() << "a CUDA device is present: the device pass is tested on it";
  EXPECT_EQ(state, SummaryBatch::State::kFailed);
  EXPECT_EQ(why, failed);
  EXPECT_FALSE(why.empty());
  EXPECT_EQ(batch.take(host, &values, &why), SummaryBatch::State::kReady) << "the host pass is not held up";
}

}  // namespace
}  // namespace tensorscope
