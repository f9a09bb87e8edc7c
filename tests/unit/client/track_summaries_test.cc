// Per-step summaries from the C++ client (TrackOptions::stats_every): one record per step
// and track, the tensors in forward order then gradients, the values of the tensors the
// step computed, a NaN named at the step and module it appeared in, and parameters' update
// ratios. Against the fake daemon, which says it reads summaries.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <torch/torch.h>

#include <tensorscope/tensorscope.h>

#include "record_receiver.h"
#include "tensorscope/shared/summary_format.h"

namespace tensorscope {
namespace {

using testing::RecordReceiver;

// step -> the summaries of that step's records, in order.
std::map<int64_t, std::vector<TensorSummary>> summaries_of(RecordReceiver& rx) {
  std::map<int64_t, std::vector<TensorSummary>> out;
  for (const auto& r : rx.summaries()) {
    auto parsed = parse_summaries(std::string_view(reinterpret_cast<const char*>(r.payload.data()), r.payload.size()));
    EXPECT_TRUE(parsed.is_ok()) << parsed.message();
    if (!parsed) continue;
    auto& step = out[r.step];
    step.insert(step.end(), parsed->begin(), parsed->end());
  }
  return out;
}

// A Linear whose output is multiplied by `gain` (a buffer the test can set to NaN).
struct ScaledImpl : torch::nn::Module {
  ScaledImpl() : fc(register_module("fc", torch::nn::Linear(6, 6))) {
    gain = register_buffer("gain", torch::ones({1}));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc(x) * gain; }
  torch::nn::Linear fc;
  torch::Tensor gain;
};
TORCH_MODULE(Scaled);

TEST(TrackSummaries, ANanIsNamedAtItsStepAndModuleInForwardOrder) {
  torch::manual_seed(1);
  torch::nn::Sequential net(torch::nn::Linear(6, 6), torch::nn::Linear(6, 6), torch::nn::Linear(6, 6),
                            torch::nn::Linear(6, 6), Scaled(), torch::nn::Linear(6, 6));
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle h = rx.client().track_model(
      "net", net, TrackOptions().every_n(100).kinds(TrackKinds::kOutput | TrackKinds::kOutputGradient));
  for (int step = 0; step < 10; ++step) {
    if (step == 7) {
      torch::NoGradGuard no_grad;
      net[4]->named_buffers()["gain"].fill_(std::numeric_limits<float>::quiet_NaN());
    }
    net->forward(torch::randn({3, 6})).sum().backward();
    rx.client().next_step();
  }
  h.reset();
  const auto by_step = summaries_of(rx);
  ASSERT_EQ(by_step.size(), 10u) << "a summary record each step";
  int64_t first_step = -1;
  std::string first_stream;
  for (const auto& [step, entries] : by_step) {
    for (const TensorSummary& s : entries) {
      if (!s.finite()) {
        first_step = step;
        first_stream = s.name;
        break;
      }
    }
    if (first_step >= 0) break;
  }
  EXPECT_EQ(first_step, 7);
  EXPECT_EQ(first_stream, "net.4") << "the module whose output went NaN (its Linear's own output is finite)";
}

TEST(TrackSummaries, EachSummarySaysItsTensorsDtype) {
  torch::manual_seed(2);
  torch::nn::Sequential single(torch::nn::Linear(4, 4)), twice(torch::nn::Linear(4, 4));
  twice->to(torch::kFloat64);
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  const auto parameters = TrackOptions().every_n(100).kinds(TrackKinds::kParameter);
  TrackHandle a = rx.client().track_model("single", single, parameters);
  TrackHandle b = rx.client().track_model("twice", twice, parameters);
  for (int step = 0; step < 2; ++step) {
    single->forward(torch::randn({2, 4}));
    twice->forward(torch::randn({2, 4}, torch::kFloat64));
    rx.client().next_step();
  }
  a.reset();
  b.reset();
  std::map<std::string, wire::DType> dtypes;
  for (const auto& [step, entries] : summaries_of(rx)) {
    for (const TensorSummary& s : entries) dtypes[s.name] = s.dtype;
  }
  EXPECT_EQ(dtypes["single.0.weight"], wire::DType::kFloat32);
  EXPECT_EQ(dtypes["twice.0.weight"], wire::DType::kFloat64);
  EXPECT_EQ(dtypes["twice.0.bias"], wire::DType::kFloat64);
}

TEST(TrackSummaries, TheFirstNanBringsWholeTensorsOfTheStepsAroundIt) {
  torch::manual_seed(1);
  torch::nn::Sequential net(torch::nn::Linear(6, 6), torch::nn::Linear(6, 6), torch::nn::Linear(6, 6),
                            torch::nn::Linear(6, 6), Scaled(), torch::nn::Linear(6, 6));
  RecordReceiver rx(ClientOptions().anomaly_capture_steps(2));
  ASSERT_TRUE(rx.ready());
  TrackHandle h = rx.client().track_model("net", net, TrackOptions().every_n(100));
  for (int step = 0; step < 12; ++step) {
    if (step == 7) {
      torch::NoGradGuard no_grad;
      net[4]->named_buffers()["gain"].fill_(std::numeric_limits<float>::quiet_NaN());
    }
    net->forward(torch::randn({3, 6}));
    rx.client().next_step();
  }
  h.reset();
  auto steps = [&](const std::string& name) {
    std::vector<int64_t> out;
    for (const auto& r : rx.named(name)) out.push_back(r.step);
    return out;
  };
  EXPECT_EQ(steps("net.4"), (std::vector<int64_t>{0, 7, 8, 9})) << "the NaN tensor at once, then two steps whole";
  EXPECT_EQ(steps("net.0"), (std::vector<int64_t>{0, 8, 9}));
  EXPECT_EQ(steps("net.5"), (std::vector<int64_t>{0, 8, 9})) << "only the first NaN tensor is sent at once";
}

TEST(TrackSummaries, OneRecordEveryStatsEveryStepsWithTheStepsValues) {
  torch::manual_seed(2);
  torch::nn::Linear fc(4, 3);
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle h = rx.client().track_model(
      "fc", fc, TrackOptions().every_n(100).stats_every(3).kinds(TrackKinds::kOutput | TrackKinds::kParameter));
  std::map<int64_t, torch::Tensor> outputs, weights;
  torch::optim::SGD opt(fc->parameters(), 0.1);
  for (int step = 0; step < 10; ++step) {
    weights[step] = fc->weight.detach().to(torch::kDouble).clone();
    const torch::Tensor out = fc(torch::randn({5, 4}));
    outputs[step] = out.detach().clone();
    opt.zero_grad();
    out.pow(2).sum().backward();
    opt.step();
    rx.client().next_step();
  }
  h.reset();
  const auto by_step = summaries_of(rx);
  std::vector<int64_t> steps;
  for (const auto& [step, entries] : by_step) steps.push_back(step);
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 3, 6, 9}));
  for (const auto& [step, entries] : by_step) {
    ASSERT_EQ(entries.size(), 3u) << "the output, then weight and bias";
    const TensorSummary& out = entries[0];
    EXPECT_EQ(out.name, "fc");
    EXPECT_EQ(out.kind, wire::TensorKind::kActivation);
    const torch::Tensor& expected = outputs[step];
    EXPECT_EQ(out.numel, 15u);
    EXPECT_NEAR(out.l2, expected.norm().item<double>(), 1e-5);
    EXPECT_NEAR(out.max_abs, expected.abs().max().item<double>(), 1e-6);
    EXPECT_NEAR(out.mean, expected.mean().item<double>(), 1e-6);
    EXPECT_EQ(entries[1].name, "fc.weight");
    EXPECT_EQ(entries[1].has_update_ratio, step > 0) << "from the second summarized step on";
    if (step > 0) {  // against the weight at the previous summarized step, 3 steps before
      const torch::Tensor& now = weights[step];
      const torch::Tensor& before = weights[step - 3];
      EXPECT_NEAR(entries[1].update_ratio, ((now - before).norm() / before.norm()).item<double>(), 1e-9);
      EXPECT_GT(entries[1].update_ratio, 0.0);
    }
  }
  EXPECT_EQ(rx.named("fc").size(), 1u) << "full tensors only at step 0 (every_n 100)";
}

// TrackOptions::cast_format: every summary of the track measures the numerics against it
// (the output's dynamic range and what fp16 loses of it: values scaled to overflow and
// underflow); a track without one sends none.
TEST(TrackSummaries, ACastFormatAddsTheNumericsToEverySummary) {
  torch::manual_seed(4);
  Scaled net;
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle with = rx.client().track_model("net", net,
                                             TrackOptions()
                                                 .include("^fc$")
                                                 .cast_format(CastFormat::kFp16)
                                                 .kinds(TrackKinds::kOutput | TrackKinds::kParameter));
  TrackHandle without = rx.client().track_model("plain", net, TrackOptions().include("^fc$"));
  {
    torch::NoGradGuard no_grad;
    net->fc->bias.zero_();
  }
  const torch::Tensor x = torch::randn({50, 6});
  x[0][0] = 1e6;       // -> outputs beyond fp16's range
  x[1] = x[1] * 1e-9;  // -> outputs below half fp16's smallest subnormal
  const torch::Tensor out = net->fc(x).detach();
  net(x);
  rx.client().next_step();
  with.reset();
  without.reset();
  const auto by_step = summaries_of(rx);
  ASSERT_EQ(by_step.count(0), 1u);
  std::map<std::string, TensorSummary> named;
  for (const TensorSummary& s : by_step.at(0)) named[s.name] = s;
  ASSERT_EQ(named.count("net.fc"), 1u);
  ASSERT_EQ(named.count("net.fc.weight"), 1u);
  ASSERT_EQ(named.count("plain.fc"), 1u);
  const TensorSummary& s = named["net.fc"];
  EXPECT_EQ(s.cast_format, CastFormat::kFp16);
  const torch::Tensor a = out.abs();
  EXPECT_EQ(s.overflow_count, (a >= 65520).sum().item<int64_t>());
  EXPECT_EQ(s.underflow_count, ((a > 0) & (a <= std::ldexp(1.0, -25))).sum().item<int64_t>());
  EXPECT_GT(s.overflow_count, 0u);
  EXPECT_GT(s.underflow_count, 0u);
  EXPECT_EQ(s.min_abs_nonzero, a.masked_fill(a == 0, INFINITY).min().item<double>());
  EXPECT_NEAR(s.dynamic_range(), std::log2(a.max().item<double>() / s.min_abs_nonzero), 1e-9);
  EXPECT_TRUE(named["net.fc.weight"].has_numerics()) << "parameters too";
  EXPECT_FALSE(named["plain.fc"].has_numerics());
  EXPECT_EQ(named["plain.fc"].l2, s.l2);
}

TEST(TrackSummaries, StatsEveryZeroSendsNone) {
  torch::nn::Linear fc(2, 2);
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle h = rx.client().track_model("fc", fc, TrackOptions().stats_every(0));
  for (int step = 0; step < 3; ++step) {
    fc(torch::randn({1, 2}));
    rx.client().next_step();
  }
  h.reset();
  EXPECT_TRUE(summaries_of(rx).empty());
  EXPECT_EQ(rx.named("fc").size(), 3u);
}

// The client's own cost (client/core/cost_meter.h): a tracked model's hooks are spans of
// the process's meter, so stats().own_time has a share once a window of 5 s has ended,
// above 0 and well under the whole step (a busy machine slows the model as much).
TEST(TrackSummaries, TheClientMeasuresItsOwnCost) {
  torch::manual_seed(5);
  torch::nn::Sequential net(torch::nn::Linear(256, 256), torch::nn::Tanh(), torch::nn::Linear(256, 256));
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle h = rx.client().track_model("net", net, TrackOptions().every_n(1000).stats_every(1));
  torch::optim::SGD opt(net->parameters(), 0.01);
  const auto start = std::chrono::steady_clock::now();
  // 11 s: the last window is this test's alone (the meter is the process's).
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(11) ||
         (rx.client().stats().own_time < 0 && std::chrono::steady_clock::now() - start < std::chrono::minutes(2))) {
    opt.zero_grad();
    net->forward(torch::randn({64, 256})).pow(2).mean().backward();
    opt.step();
    rx.client().next_step();
  }
  const double share = rx.client().stats().own_time;
  EXPECT_GT(share, 0.0);
  EXPECT_LT(share, 0.9);
}

}  // namespace
}  // namespace tensorscope
