// Modules called many times a step (tensorscope/call_stacking.h), from C++: past the
// first calls, a step's calls become one calls x features matrix per stream, every call's
// values in it, in call order (gradients too); kSeparate keeps a stream per call,
// kStacked stacks them all.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include <torch/torch.h>

#include <tensorscope/tensorscope.h>

#include "record_receiver.h"

namespace tensorscope {
namespace {

using testing::RecordReceiver;

constexpr int kHidden = 6, kBatch = 3;

// `steps` steps of an RNN cell over `timesteps`; each step's outputs (timesteps x batch x
// hidden) go to `seen`.
void rnn_steps(RecordReceiver& rx, torch::nn::RNNCell& cell, int steps, int timesteps,
               std::vector<torch::Tensor>* seen) {
  torch::optim::SGD opt(cell->parameters(), 0.01);
  for (int step = 0; step < steps; ++step) {
    torch::Tensor h = torch::zeros({kBatch, kHidden});
    std::vector<torch::Tensor> outs;
    for (int t = 0; t < timesteps; ++t) {
      h = cell(torch::randn({kBatch, 2}), h);
      outs.push_back(h.detach().clone());
    }
    opt.zero_grad();
    h.pow(2).sum().backward();
    opt.step();
    seen->push_back(torch::stack(outs));
    rx.client().next_step();
  }
}

TEST(TrackCalls, AutoKeepsFourCallsAndStacksEveryCallOfAStep) {
  torch::manual_seed(1);
  torch::nn::RNNCell cell(2, kHidden);
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  std::vector<torch::Tensor> seen;
  {
    TrackHandle h = rx.client().track_model(
        "rnn", cell, TrackOptions().stats_every(0).kinds(TrackKinds::kOutput | TrackKinds::kOutputGradient));
    rnn_steps(rx, cell, 3, 30, &seen);
    std::set<std::string> listed;
    for (const auto& s : h.streams()) listed.insert(s.name);
    EXPECT_TRUE(listed.count("rnn#calls") && listed.count("rnn#calls.grad"));
  }
  const std::set<std::string> expected = {"rnn",      "rnn#1",      "rnn#2",      "rnn#3",      "rnn#calls",
                                          "rnn.grad", "rnn#1.grad", "rnn#2.grad", "rnn#3.grad", "rnn#calls.grad"};
  EXPECT_EQ(rx.names(), expected);
  const auto stacks = rx.named("rnn#calls");
  ASSERT_EQ(stacks.size(), 3u);
  // Step 0 learns the module is called often at its 5th call: rows from call 4 on. From
  // step 1 on, every call: row k is call k's output averaged over the batch.
  EXPECT_EQ(stacks[0].step, 0);
  EXPECT_TRUE(torch::allclose(stacks[0].tensor(), seen[0].slice(0, 4).mean(1), 1e-5, 1e-6));
  for (int step = 1; step < 3; ++step) {
    EXPECT_EQ(stacks[step].step, step);
    EXPECT_EQ(stacks[step].shape, (std::vector<int64_t>{30, kHidden}));
    EXPECT_TRUE(torch::allclose(stacks[step].tensor(), seen[step].mean(1), 1e-5, 1e-6)) << step;
  }
  // Gradients arrive last call first; their rows are in call order too: the last call's
  // is the loss's gradient, 2h, averaged over the batch.
  const auto grads = rx.named("rnn#calls.grad");
  ASSERT_EQ(grads.size(), 3u);
  const torch::Tensor g = grads[2].tensor();
  ASSERT_EQ(g.size(0), 30);
  EXPECT_TRUE(torch::allclose(g[29], 2 * seen[2][29].mean(0), 1e-5, 1e-6));
}

TEST(TrackCalls, SeparateKeepsAStreamPerCallAndStackedOnlyTheMatrix) {
  torch::manual_seed(2);
  torch::nn::RNNCell apart(2, kHidden), together(2, kHidden);
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  std::vector<torch::Tensor> seen;
  {
    TrackHandle a = rx.client().track_model("apart", apart, TrackOptions().calls(CallStacking::kSeparate));
    TrackHandle t = rx.client().track_model("together", together, TrackOptions().calls(CallStacking::kStacked));
    rnn_steps(rx, apart, 2, 12, &seen);
    rnn_steps(rx, together, 2, 12, &seen);
  }
  const std::set<std::string> got = rx.names();
  EXPECT_TRUE(got.count("apart#11"));
  EXPECT_FALSE(got.count("apart#calls"));
  std::set<std::string> together_names;
  for (const auto& n : got) {
    if (n.rfind("together", 0) == 0) together_names.insert(n);
  }
  EXPECT_EQ(together_names, (std::set<std::string>{"together#calls"}));
  const auto stacks = rx.named("together#calls");
  ASSERT_FALSE(stacks.empty());
  EXPECT_EQ(stacks.back().shape, (std::vector<int64_t>{12, kHidden}));  // from the first step on: all calls
}

}  // namespace
}  // namespace tensorscope
