// The steps a module track sends, in the loop shapes of real training: a model called
// several times a step (GAN, siamese), gradient accumulation over micro-batches, eval
// forwards between steps, several models, a track made late, a run resumed with set_step.
// every_n counts the client's steps: the multiples of every_n are sent.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include <tensorscope/tensorscope.h>

#include "record_receiver.h"

namespace tensorscope {
namespace {

using testing::RecordReceiver;

std::vector<int64_t> steps_of(RecordReceiver& rx, const std::string& name) {
  std::vector<int64_t> steps;
  for (const auto& r : rx.named(name)) steps.push_back(r.step);
  return steps;
}

using Steps = std::vector<int64_t>;

class TrackSteps : public ::testing::Test {
 protected:
  void SetUp() override { torch::manual_seed(3); }
};

TEST_F(TrackSteps, AGanDiscriminatorCalledThreeTimesAStep) {
  torch::nn::Linear gen(4, 4), disc(4, 1);
  torch::optim::SGD opt_g(gen->parameters(), 0.01), opt_d(disc->parameters(), 0.01);
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle g = rx.client().track_model("G", gen, TrackOptions().every_n(2));
  TrackHandle d = rx.client().track_model("D", disc, TrackOptions().every_n(2));
  for (int step = 0; step < 5; ++step) {
    const auto fake = gen(torch::randn({8, 4}));
    const auto loss_d = disc(fake.detach()).mean() - disc(torch::randn({8, 4})).mean();
    opt_d.zero_grad();
    loss_d.backward();
    opt_d.step();
    const auto loss_g = -disc(fake).mean();
    opt_g.zero_grad();
    loss_g.backward();
    opt_g.step();
    rx.client().next_step();
  }
  EXPECT_EQ(steps_of(rx, "G"), (Steps{0, 2, 4}));
  for (const char* name : {"D", "D#1", "D#2"}) EXPECT_EQ(steps_of(rx, name), (Steps{0, 2, 4})) << name;
  EXPECT_TRUE(steps_of(rx, "D#3").empty());
}

TEST_F(TrackSteps, GradientAccumulationAndAnEvalForwardBetweenSteps) {
  torch::nn::Linear net(3, 2);
  torch::optim::SGD opt(net->parameters(), 0.01);
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  // A stream per call (by default, calls past the 4th are stacked: track_calls_test.cc).
  TrackHandle h = rx.client().track_model("net", net,
                                          TrackOptions()
                                              .every_n(2)
                                              .kinds(TrackKinds::kOutput | TrackKinds::kOutputGradient)
                                              .calls(CallStacking::kSeparate));
  for (int step = 0; step < 5; ++step) {
    opt.zero_grad();
    for (int micro = 0; micro < 4; ++micro) net(torch::randn({2, 3})).sum().backward();
    opt.step();
    {
      torch::NoGradGuard eval;
      net(torch::randn({2, 3}));  // an eval forward: not a call of the step
    }
    rx.client().next_step();
  }
  for (const char* name : {"net", "net#1", "net#2", "net#3"}) {
    EXPECT_EQ(steps_of(rx, name), (Steps{0, 2, 4})) << name;
  }
  for (const char* name : {"net.grad", "net#1.grad", "net#2.grad", "net#3.grad"}) {
    EXPECT_EQ(steps_of(rx, name), (Steps{0, 2, 4})) << name;
  }
  EXPECT_TRUE(steps_of(rx, "net#4").empty());
}

// The shape of pytorch/examples' word_language_model: the evaluation runs after the
// epoch's last next_step(), before the next step's training forward. That forward keeps
// the step's first call (its output, its gradient); the evaluation's values are nowhere.
TEST_F(TrackSteps, AnEvaluationAfterTheLastStepOfAnEpochTakesNoTrainingCall) {
  torch::nn::Linear net(3, 2);
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle h = rx.client().track_model(
      "net", net,
      TrackOptions().kinds(TrackKinds::kOutput | TrackKinds::kOutputGradient).calls(CallStacking::kSeparate));
  const torch::Tensor evaluation_batch = torch::full({2, 3}, 1e4);  // outputs far from training's
  for (int step = 0; step < 4; ++step) {
    if (step % 2 == 0) {
      torch::NoGradGuard eval;
      net(evaluation_batch);
    } else {
      c10::InferenceMode inference;
      net(evaluation_batch);
    }
    net(torch::randn({2, 3})).sum().backward();
    rx.client().next_step();
  }
  h.reset();
  EXPECT_EQ(steps_of(rx, "net"), (Steps{0, 1, 2, 3}));
  EXPECT_EQ(steps_of(rx, "net.grad"), (Steps{0, 1, 2, 3}));
  EXPECT_TRUE(steps_of(rx, "net#1").empty());
  for (const auto& r : rx.named("net")) EXPECT_LT(r.tensor().abs().max().item<float>(), 100.f) << r.step;
  // Asked for, evaluation forwards are calls of the step again (an inference program).
  RecordReceiver rx2;
  ASSERT_TRUE(rx2.ready());
  TrackHandle h2 = rx2.client().track_model(
      "net", net, TrackOptions().kinds(TrackKinds::kOutput).evaluation(EvaluationCalls::kTrack));
  {
    torch::NoGradGuard eval;
    net(evaluation_batch);
  }
  net(torch::randn({2, 3}));
  rx2.client().next_step();
  h2.reset();
  EXPECT_EQ(steps_of(rx2, "net"), (Steps{0}));
  EXPECT_EQ(steps_of(rx2, "net#1"), (Steps{0}));
}

TEST_F(TrackSteps, SeveralModelsAndATrackMadeLateSendTheSameSteps) {
  torch::nn::Linear small(2, 2), large(64, 64);
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle a = rx.client().track_model("small", small, TrackOptions().every_n(3));
  std::optional<TrackHandle> b;
  for (int step = 0; step < 10; ++step) {
    if (step == 4) b.emplace(rx.client().track_model("large", large, TrackOptions().every_n(3)));
    small(torch::randn({1, 2}));
    large(torch::randn({1, 64}));
    rx.client().next_step();
  }
  EXPECT_EQ(steps_of(rx, "small"), (Steps{0, 3, 6, 9}));
  EXPECT_EQ(steps_of(rx, "large"), (Steps{6, 9}));  // made at step 4: the same steps from then on
}

TEST_F(TrackSteps, ARunResumedWithSetStepSendsTheStepsItWouldHaveSent) {
  torch::nn::Linear net(2, 2);
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle h = rx.client().track_model("net", net, TrackOptions().every_n(10));
  rx.client().set_step(95);  // resumed from a checkpoint taken at step 95
  for (int step = 95; step < 125; ++step) {
    net(torch::randn({1, 2}));
    rx.client().next_step();
  }
  EXPECT_EQ(steps_of(rx, "net"), (Steps{100, 110, 120}));
}

}  // namespace
}  // namespace tensorscope
