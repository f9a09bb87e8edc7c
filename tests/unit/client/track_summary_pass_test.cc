// The fused summary pass in the libtorch client's tracks (client/src/track_summaries.h),
// run on the CPU (TENSORSCOPE_SUMMARY_PASS=host: CPU tensors gathered into passes run on
// the host with the GPU kernel's arithmetic): a gathered track's summaries — outputs,
// gradients, parameters with their update ratios, parameter gradients — are those of an
// identical model summarized at once; an output written in place before its flush is
// refused once, then summarized at once from the module's own values.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include <tensorscope/tensorscope.h>

#include "record_receiver.h"
#include "tensorscope/shared/summary_format.h"

namespace tensorscope {
namespace {

using testing::RecordReceiver;

// (stream without the track's name, step) -> its summary, of the track named `track`.
std::map<std::pair<std::string, int64_t>, TensorSummary> summaries_of(RecordReceiver& rx, const std::string& track) {
  std::map<std::pair<std::string, int64_t>, TensorSummary> out;
  for (const auto& r : rx.summaries()) {
    auto parsed = parse_summaries(std::string_view(reinterpret_cast<const char*>(r.payload.data()), r.payload.size()));
    EXPECT_TRUE(parsed.is_ok()) << parsed.message();
    if (!parsed) continue;
    for (const TensorSummary& s : *parsed) {
      if (s.name.rfind(track + ".", 0) == 0) out[{s.name.substr(track.size()), r.step}] = s;
    }
  }
  return out;
}

// TrackSummaries reads TENSORSCOPE_SUMMARY_PASS when a track is made.
TrackHandle track_with_pass(Client& client, const std::string& name, torch::nn::Module& model, const char* pass,
                            TrackKinds kinds) {
  if (pass != nullptr) {
    setenv("TENSORSCOPE_SUMMARY_PASS", pass, 1);
  } else {
    unsetenv("TENSORSCOPE_SUMMARY_PASS");
  }
  TrackHandle h = client.track_model(name, model, TrackOptions().every_n(1000).stats_every(1).kinds(kinds));
  unsetenv("TENSORSCOPE_SUMMARY_PASS");
  return h;
}

TEST(TrackSummaryPass, GatheredSummariesAreTheSummariesTakenAtOnce) {
  torch::manual_seed(7);
  torch::nn::Sequential at_once(torch::nn::Linear(10, 12), torch::nn::Tanh(), torch::nn::Linear(12, 3));
  torch::nn::Sequential gathered(torch::nn::Linear(10, 12), torch::nn::Tanh(), torch::nn::Linear(12, 3));
  {
    torch::NoGradGuard no_grad;
    const auto from = at_once->parameters(), to = gathered->parameters();
    for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
  }
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  const TrackKinds all =
      TrackKinds::kOutput | TrackKinds::kOutputGradient | TrackKinds::kParameter | TrackKinds::kParameterGradient;
  TrackHandle a = track_with_pass(rx.client(), "at_once", *at_once, nullptr, all);
  TrackHandle b = track_with_pass(rx.client(), "gathered", *gathered, "host", all);
  torch::optim::SGD opt_a(at_once->parameters(), 0.05), opt_b(gathered->parameters(), 0.05);
  for (int step = 0; step < 5; ++step) {
    const torch::Tensor x = torch::randn({4, 10});
    for (auto [model, opt] : {std::pair{&at_once, &opt_a}, std::pair{&gathered, &opt_b}}) {
      opt->zero_grad();
      (*model)->forward(x).pow(2).mean().backward();
      opt->step();
    }
    rx.client().next_step();
  }
  a.reset();
  b.reset();
  EXPECT_EQ(rx.client().stats().refused, 0u);
  const auto eager = summaries_of(rx, "at_once"), fused = summaries_of(rx, "gathered");
  ASSERT_EQ(eager.size(), 5u * 2 * 6) << "2 Linear: output, gradient, 2 parameters, their gradients";
  ASSERT_EQ(fused.size(), eager.size());
  for (const auto& [key, e] : eager) {
    const auto it = fused.find(key);
    ASSERT_NE(it, fused.end()) << key.first << " " << key.second;
    const TensorSummary& f = it->second;
    const std::string what = key.first + " step " + std::to_string(key.second);
    EXPECT_EQ(f.numel, e.numel) << what;
    EXPECT_EQ(f.zero_count, e.zero_count) << what;
    EXPECT_EQ(f.nan_count + f.inf_count, e.nan_count + e.inf_count) << what;
    // (the CPU's sums are float32 within blocks: a mean near 0 is known to 1e-6 of the values)
    const double tolerance = 1e-6 * e.max_abs;
    EXPECT_NEAR(f.l2, e.l2, 1e-6 * e.l2 + tolerance) << what;
    EXPECT_NEAR(f.max_abs, e.max_abs, tolerance) << what;
    EXPECT_NEAR(f.mean, e.mean, tolerance) << what;
    EXPECT_NEAR(f.std, e.std, 1e-6 * e.std + tolerance) << what;
    EXPECT_EQ(f.has_update_ratio, e.has_update_ratio) << what;
    if (e.has_update_ratio) {
      EXPECT_NEAR(f.update_ratio, e.update_ratio, 1e-6 * e.update_ratio) << what;
    }
  }
}

// A tracked Linear whose output the forward then writes in place.
struct InPlaceAfterImpl : torch::nn::Module {
  InPlaceAfterImpl()
      : fc(register_module("fc", torch::nn::Linear(6, 6))), out(register_module("out", torch::nn::Linear(6, 2))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor h = fc(x);
    outputs.push_back(h.detach().clone());  // (before the ReLU writes it)
    return out(h.relu_());
  }
  torch::nn::Linear fc, out;
  std::vector<torch::Tensor> outputs;
};
TORCH_MODULE(InPlaceAfter);

TEST(TrackSummaryPass, AnOutputWrittenInPlaceBeforeItsFlushIsRefusedOnceThenSummarizedAtOnce) {
  torch::manual_seed(8);
  InPlaceAfter model;
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle h = track_with_pass(rx.client(), "net", *model, "host", TrackKinds::kOutput);
  for (int step = 0; step < 4; ++step) {
    model->forward(torch::randn({3, 6}));  // (a training forward: one without gradients is left out)
    rx.client().next_step();
  }
  h.reset();
  EXPECT_EQ(rx.client().stats().refused, 1u);
  const auto summaries = summaries_of(rx, "net");
  std::vector<int64_t> fc_steps, out_steps;
  for (const auto& [key, s] : summaries) {
    if (key.first == ".fc") {
      fc_steps.push_back(key.second);
      const torch::Tensor& before_relu = model->outputs[static_cast<size_t>(key.second)];
      EXPECT_NEAR(s.l2, before_relu.norm().item<double>(), 1e-5) << "the output as the module gave it";
    }
    if (key.first == ".out") out_steps.push_back(key.second);
  }
  EXPECT_EQ(fc_steps, (std::vector<int64_t>{1, 2, 3})) << "step 0's was written before its flush";
  EXPECT_EQ(out_steps, (std::vector<int64_t>{0, 1, 2, 3})) << "gathered all along";
}

}  // namespace
}  // namespace tensorscope
