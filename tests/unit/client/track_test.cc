// Module and tensor tracking on real libtorch models: track_model, track_layer and
// track_tensor send exactly what the same computation gives when run directly, under the
// expected names; selection, gating, removal, optimizer steps, repeated calls, recurrent
// and attention layers, TorchScript, inference modes and threads.
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>

#include <torch/script.h>
#include <torch/torch.h>

#include <tensorscope/tensorscope.h>

#include "record_receiver.h"
#include "temp_dir.h"
#include "tensorscope/shared/module_tree_format.h"

namespace tensorscope {
namespace {

using testing::ReceivedRecord;
using testing::RecordReceiver;

// Conv2d -> BatchNorm2d -> ReLU -> Linear -> Linear, as a user module.
struct NetImpl : torch::nn::Module {
  NetImpl()
      : conv(register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 3)))),
        bn(register_module("bn", torch::nn::BatchNorm2d(4))),
        fc1(register_module("fc1", torch::nn::Linear(4 * 6 * 6, 16))),
        fc2(register_module("fc2", torch::nn::Linear(16, 3))) {}

  struct Parts {
    torch::Tensor conv, bn, fc1, fc2;
  };
  Parts parts(const torch::Tensor& x) {
    Parts p;
    p.conv = conv(x);
    p.bn = bn(p.conv);
    p.fc1 = fc1(torch::relu(p.bn).flatten(1));
    p.fc2 = fc2(p.fc1);
    return p;
  }
  torch::Tensor forward(const torch::Tensor& x) { return parts(x).fc2; }

  torch::nn::Conv2d conv;
  torch::nn::BatchNorm2d bn;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Net);

// A Linear used twice in one forward, around a parameter-free op and back to back.
struct TwiceImpl : torch::nn::Module {
  TwiceImpl()
      : fc(register_module("fc", torch::nn::Linear(5, 5))), out(register_module("out", torch::nn::Linear(5, 2))) {}
  torch::Tensor forward(const torch::Tensor& x) { return out(fc(fc(torch::relu(fc(x))))); }
  torch::nn::Linear fc, out;
};
TORCH_MODULE(Twice);

torch::Tensor input() { return torch::randn({2, 1, 8, 8}); }

void expect_equal(const ReceivedRecord& r, const torch::Tensor& expected) {
  const torch::Tensor got = r.tensor();
  ASSERT_TRUE(got.defined()) << r.name;
  ASSERT_EQ(got.sizes(), expected.sizes()) << r.name;
  EXPECT_TRUE(torch::equal(got, expected.detach().contiguous()))
      << r.name << " differs by " << (got - expected).abs().max().item<float>();
}

// The module tree a kModuleTree record carries.
ModuleTree tree_of(const ReceivedRecord& r) {
  auto tree = parse_module_tree(std::string_view(reinterpret_cast<const char*>(r.payload.data()), r.payload.size()));
  EXPECT_TRUE(tree.is_ok()) << tree.message();
  return tree.is_ok() ? *tree : ModuleTree();
}

class Track : public ::testing::Test {
 protected:
  void SetUp() override { torch::manual_seed(7); }
};

TEST_F(Track, SequentialOutputsEqualTheDirectForward) {
  torch::nn::Sequential seq(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 3)), torch::nn::BatchNorm2d(4),
                            torch::nn::ReLU(), torch::nn::Flatten(), torch::nn::Linear(4 * 6 * 6, 16),
                            torch::nn::Linear(16, 3));
  const torch::Tensor x = input();
  std::vector<torch::Tensor> direct;  // each layer's output, run one by one
  torch::Tensor h = x;
  for (auto& layer : *seq) {
    h = layer.forward(h);
    direct.push_back(h);
  }
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle handle = rx.client().track_model("seq", seq);
  ASSERT_TRUE(handle.ok()) << handle.error();
  const torch::Tensor out = seq->forward(x);
  rx.client().next_step();

  const auto records = rx.records();
  std::set<std::string> names;
  for (const auto& r : records) {
    names.insert(r.name);
    EXPECT_EQ(r.kind, "activation");
    EXPECT_EQ(r.step, 0);
  }
  EXPECT_EQ(names, (std::set<std::string>{"seq.0", "seq.1", "seq.4", "seq.5"}));
  EXPECT_EQ(records.size(), 4u);
  expect_equal(rx.named("seq.0").at(0), direct[0]);
  expect_equal(rx.named("seq.1").at(0), direct[1]);
  expect_equal(rx.named("seq.4").at(0), direct[4]);
  expect_equal(rx.named("seq.5").at(0), direct[5]);
  expect_equal(rx.named("seq.5").at(0), out);
}

TEST_F(Track, CustomModuleOutputsEqualTheDirectForward) {
  Net net;
  const torch::Tensor x = input();
  const NetImpl::Parts p = net->parts(x);
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle handle = rx.client().track_model("net", net);
  ASSERT_TRUE(handle.ok()) << handle.error();
  net->forward(x);
  rx.client().next_step();
  EXPECT_EQ(rx.names(), (std::set<std::string>{"net.conv", "net.bn", "net.fc1", "net.fc2"}));
  expect_equal(rx.named("net.conv").at(0), p.conv);
  expect_equal(rx.named("net.bn").at(0), p.bn);
  expect_equal(rx.named("net.fc1").at(0), p.fc1);
  expect_equal(rx.named("net.fc2").at(0), p.fc2);
  // tracked() lists them with their module paths.
  std::set<std::string> listed;
  for (const auto& s : rx.client().tracked()) listed.insert(s.name + "|" + s.kind + "|" + s.module);
  EXPECT_EQ(listed,
            (std::set<std::string>{"net.conv|activation|conv", "net.bn|activation|bn", "net.fc1|activation|fc1",
                                   "net.fc2|activation|fc2"}));
}

TEST_F(Track, GradientsAtModuleOutputsEqualAutogradGrad) {
  Net net;
  const torch::Tensor x = input();
  std::vector<torch::Tensor> expected;
  {
    const NetImpl::Parts p = net->parts(x);
    const torch::Tensor loss = p.fc2.pow(2).sum();
    expected = torch::autograd::grad({loss}, {p.conv, p.bn, p.fc1, p.fc2});
  }
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle handle = rx.client().track_layer("net", net);
  ASSERT_TRUE(handle.ok()) << handle.error();
  net->zero_grad();
  net->forward(x).pow(2).sum().backward();
  rx.client().next_step();
  for (const auto& r : rx.records()) EXPECT_EQ(r.kind, "gradient") << r.name;
  EXPECT_EQ(rx.names(), (std::set<std::string>{"net.conv.grad", "net.bn.grad", "net.fc1.grad", "net.fc2.grad"}));
  expect_equal(rx.named("net.conv.grad").at(0), expected[0]);
  expect_equal(rx.named("net.bn.grad").at(0), expected[1]);
  expect_equal(rx.named("net.fc1.grad").at(0), expected[2]);
  expect_equal(rx.named("net.fc2.grad").at(0), expected[3]);
}

TEST_F(Track, IncludeAndExcludeSelectExactlyTheMatchingModules) {
  Net net;
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle handle = rx.client().track_model("net", net, TrackOptions().include("^fc").exclude("2$"));
  ASSERT_TRUE(handle.ok()) << handle.error();
  net->forward(input());
  rx.client().next_step();
  EXPECT_EQ(rx.names(), (std::set<std::string>{"net.fc1"}));
  ASSERT_EQ(handle.streams().size(), 1u);
  EXPECT_EQ(handle.streams()[0].name, "net.fc1");
}

TEST_F(Track, BadRegexOrNoMatchGivesAnInertHandleThatSaysWhy) {
  Net net;
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle bad = rx.client().track_model("net", net, TrackOptions().include("(unclosed"));
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("regex"), std::string::npos) << bad.error();
  TrackHandle none = rx.client().track_model("net", net, TrackOptions().include("nothing_here"));
  EXPECT_FALSE(none.ok());
  TrackHandle unnamed = rx.client().track_model("", net);
  EXPECT_FALSE(unnamed.ok());
  // A track name starts its streams' names: one no stream can have is refused at the call
  // (NUL, a terminal escape, 64 KiB), and the error quotes it cut short.
  for (const std::string& bad : {std::string("net\0x", 5), std::string("\x1b[31mnet"), std::string(65536, 'n')}) {
    TrackHandle model = rx.client().track_model(bad, net);
    EXPECT_FALSE(model.ok());
    EXPECT_NE(model.error().find("stream name"), std::string::npos) << model.error();
    EXPECT_LT(model.error().size(), 300u);
    TrackHandle layer = rx.client().track_layer(bad, net);
    EXPECT_FALSE(layer.ok());
    TrackHandle grad = rx.client().track_tensor(bad, torch::zeros({2}, torch::requires_grad()));
    EXPECT_FALSE(grad.ok());
    EXPECT_NE(grad.error().find("stream name"), std::string::npos) << grad.error();
  }
  net->forward(input());
  rx.client().next_step();
  EXPECT_TRUE(rx.records().empty());
  EXPECT_TRUE(rx.client().tracked().empty());
}

TEST_F(Track, DestroyingTheHandleRemovesEveryCallback) {
  Net net;
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  {
    TrackHandle outputs =
        rx.client().track_model("net", net, TrackOptions().kinds(TrackKinds::kOutput | TrackKinds::kParameterGradient));
    TrackHandle grads = rx.client().track_layer("net", net);
    ASSERT_TRUE(outputs.ok() && grads.ok());
    net->forward(input()).sum().backward();
    rx.client().next_step();
    // 4 outputs, 4 output gradients, 8 parameter gradients.
    EXPECT_EQ(rx.records().size(), 16u);
  }
  EXPECT_TRUE(rx.client().tracked().empty());
  const uint64_t before = rx.client().stats().pushed;
  const uint64_t gated_before = rx.client().stats().gated;
  net->forward(input()).sum().backward();
  rx.client().next_step();
  EXPECT_EQ(rx.client().stats().pushed, before);
  EXPECT_EQ(rx.client().stats().gated, gated_before);
}

TEST_F(Track, EveryNGatesEachStreamExactly) {
  Net net;
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle handle = rx.client().track_model("net", net, TrackOptions().every_n(3));
  for (int step = 0; step < 7; ++step) {
    net->forward(input());
    rx.client().next_step();
  }
  for (const char* name : {"net.conv", "net.bn", "net.fc1", "net.fc2"}) {
    const auto got = rx.named(name);
    ASSERT_EQ(got.size(), 3u) << name;
    EXPECT_EQ(got[0].step, 0);
    EXPECT_EQ(got[1].step, 3);
    EXPECT_EQ(got[2].step, 6);
  }
  // 4 outputs and the module tree on each of steps 0, 3 and 6.
  const auto trees = rx.trees();
  ASSERT_EQ(trees.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(trees[i].name, "net");
    EXPECT_EQ(trees[i].step, static_cast<int64_t>(3 * i));
  }
  EXPECT_EQ(rx.client().stats().pushed, 4u * 3u + 3u + 7u);  // and a summary record each step
}

TEST_F(Track, EveryNCountsStepsNotCalls) {
  Twice model;  // three calls of "fc" per forward
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle handle = rx.client().track_model("m", model, TrackOptions().every_n(2).include("^fc$"));
  for (int step = 0; step < 4; ++step) {
    model->forward(torch::randn({3, 5}));
    rx.client().set_step(step + 1);
    rx.client().set_step(step + 1);  // unchanged: not a new step
  }
  for (const char* name : {"m.fc", "m.fc#1", "m.fc#2"}) {
    const auto got = rx.named(name);
    ASSERT_EQ(got.size(), 2u) << name;
    EXPECT_EQ(got[0].step, 0);
    EXPECT_EQ(got[1].step, 2);
  }
}

TEST_F(Track, ASecondForwardInTheSameStepIsTheNextCall) {
  Net net;
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle handle = rx.client().track_model("net", net, TrackOptions().include("fc2"));
  net->forward(input()).sum().backward();
  const torch::Tensor x = input();
  const torch::Tensor eval = net->forward(x);  // e.g. an evaluation batch, same step
  rx.client().next_step();
  EXPECT_EQ(rx.names(), (std::set<std::string>{"net.fc2", "net.fc2#1"}));
  expect_equal(rx.named("net.fc2#1").at(0), eval);
}

TEST_F(Track, OptimizerStepsAndZeroGradCaptureNothing) {
  Net net;
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle handle = rx.client().track_model("net", net);
  net->forward(input()).sum().backward();
  rx.client().next_step();
  const size_t after_forward = rx.records().size();
  EXPECT_EQ(after_forward, 4u);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-3));
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(1e-3).weight_decay(1e-3));
  torch::optim::AdamW adamw(net->parameters(), torch::optim::AdamWOptions(1e-3));
  for (int i = 0; i < 2; ++i) {
    sgd.step();
    adam.step();
    adamw.step();
  }
  sgd.zero_grad();
  rx.client().next_step();
  EXPECT_EQ(rx.records().size(), after_forward);
}

TEST_F(Track, AModuleCalledSeveralTimesGetsCallIndices) {
  Twice model;
  const torch::Tensor x = torch::randn({3, 5});
  const torch::Tensor a = model->fc(x);
  const torch::Tensor b = model->fc(torch::relu(a));
  const torch::Tensor c = model->fc(b);
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle handle = rx.client().track_model("m", model);
  for (int step = 0; step < 2; ++step) {
    model->forward(x);
    rx.client().next_step();
  }
  EXPECT_EQ(rx.names(), (std::set<std::string>{"m.fc", "m.fc#1", "m.fc#2", "m.out"}));
  for (const char* name : {"m.fc", "m.fc#1", "m.fc#2", "m.out"}) EXPECT_EQ(rx.named(name).size(), 2u) << name;
  expect_equal(rx.named("m.fc").at(1), a);
  expect_equal(rx.named("m.fc#1").at(1), b);
  expect_equal(rx.named("m.fc#2").at(1), c);
  EXPECT_EQ(rx.named("m.fc#2").at(1).step, 1);
}

TEST_F(Track, ThreeDimensionalLinearIncludesItsBiasAndInPlaceOpsAfterDoNotLeak) {
  torch::nn::Linear fc(4, 6);
  const torch::Tensor x = torch::randn({2, 3, 4});
  const torch::Tensor expected = fc(x);
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle handle = rx.client().track_model("lin", fc);
  torch::Tensor y = fc(x);
  torch::relu_(y);  // in place on the module's output, outside the module
  rx.client().next_step();
  ASSERT_EQ(rx.named("lin").size(), 1u);
  expect_equal(rx.named("lin").at(0), expected);
}

// Embedding -> LSTM -> GRU, and attention.
struct SeqNetImpl : torch::nn::Module {
  SeqNetImpl()
      : emb(register_module("emb", torch::nn::Embedding(20, 6))),
        lstm(register_module("lstm", torch::nn::LSTM(torch::nn::LSTMOptions(6, 5)))),
        gru(register_module("gru", torch::nn::GRU(torch::nn::GRUOptions(5, 4)))),
        attn(register_module("attn", torch::nn::MultiheadAttention(torch::nn::MultiheadAttentionOptions(4, 2)))),
        norm(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({4})))),
        group(register_module("group", torch::nn::GroupNorm(torch::nn::GroupNormOptions(2, 4)))) {}
  struct Parts {
    torch::Tensor emb, lstm, gru, attn, norm, group;
  };
  Parts parts(const torch::Tensor& tokens) {
    Parts p;
    p.emb = emb(tokens);                              // [T, B, 6]
    p.lstm = std::get<0>(lstm(p.emb));                // [T, B, 5]
    p.gru = std::get<0>(gru(p.lstm));                 // [T, B, 4]
    p.attn = std::get<0>(attn(p.gru, p.gru, p.gru));  // [T, B, 4]
    p.norm = norm(p.attn);
    p.group = group(p.norm.reshape({-1, 4}));
    return p;
  }
  torch::nn::Embedding emb;
  torch::nn::LSTM lstm;
  torch::nn::GRU gru;
  torch::nn::MultiheadAttention attn;
  torch::nn::LayerNorm norm;
  torch::nn::GroupNorm group;
};
TORCH_MODULE(SeqNet);

TEST_F(Track, RecurrentEmbeddingAttentionAndNormOutputsAreCaptured) {
  SeqNet net;
  const torch::Tensor tokens = torch::randint(0, 20, {7, 2}, torch::kLong);
  const SeqNetImpl::Parts p = net->parts(tokens);
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle handle = rx.client().track_model("s", net);
  ASSERT_TRUE(handle.ok()) << handle.error();
  net->parts(tokens);
  rx.client().next_step();
  EXPECT_EQ(rx.names(),
            (std::set<std::string>{"s.emb", "s.lstm", "s.gru", "s.attn", "s.attn.out_proj", "s.norm", "s.group"}));
  for (const auto& name : rx.names()) EXPECT_EQ(rx.named(name).size(), 1u) << name;
  expect_equal(rx.named("s.emb").at(0), p.emb);
  expect_equal(rx.named("s.lstm").at(0), p.lstm);
  expect_equal(rx.named("s.gru").at(0), p.gru);
  expect_equal(rx.named("s.attn").at(0), p.attn);
  expect_equal(rx.named("s.attn.out_proj").at(0), p.attn);
  expect_equal(rx.named("s.norm").at(0), p.norm);
  expect_equal(rx.named("s.group").at(0), p.group);
}

// An inference program: its forwards run without gradients, tracked when asked for.
TEST_F(Track, WorksUnderNoGradInferenceModeAndEval) {
  Net net;
  const torch::Tensor x = input();
  net->eval();
  const NetImpl::Parts p = net->parts(x);
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle handle = rx.client().track_model("net", net, TrackOptions().evaluation(EvaluationCalls::kTrack));
  {
    torch::NoGradGuard no_grad;
    net->forward(x);
  }
  rx.client().next_step();
  {
    c10::InferenceMode inference;
    net->forward(x);
  }
  rx.client().next_step();
  for (const char* name : {"net.conv", "net.bn", "net.fc1", "net.fc2"}) {
    const auto got = rx.named(name);
    ASSERT_EQ(got.size(), 2u) << name;
    EXPECT_EQ(got[0].step, 0);
    EXPECT_EQ(got[1].step, 1);
  }
  expect_equal(rx.named("net.bn").at(0), p.bn);
  expect_equal(rx.named("net.fc2").at(1), p.fc2);
}

TEST_F(Track, SetEnabledIsCheckedByEveryHook) {
  Net net;
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle outputs = rx.client().track_model("net", net);
  TrackHandle grads = rx.client().track_layer("net", net);
  rx.client().set_enabled(false);
  net->forward(input()).sum().backward();
  rx.client().next_step();
  EXPECT_EQ(rx.client().stats().pushed, 0u);
  EXPECT_EQ(rx.client().stats().gated, 8u);  // 4 outputs and 4 output gradients would have gone
  rx.client().set_enabled(true);
  net->forward(input()).sum().backward();
  rx.client().next_step();
  EXPECT_EQ(rx.records().size(), 8u);
}

TEST_F(Track, ParametersAndParameterGradientsOnRequest) {
  Net net;
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle handle = rx.client().track_model(
      "net", net, TrackOptions().include("fc2").kinds(TrackKinds::kParameter | TrackKinds::kParameterGradient));
  ASSERT_TRUE(handle.ok()) << handle.error();
  net->zero_grad();
  net->forward(input()).sum().backward();
  rx.client().next_step();
  EXPECT_EQ(rx.names(),
            (std::set<std::string>{"net.fc2.weight", "net.fc2.bias", "net.fc2.weight.grad", "net.fc2.bias.grad"}));
  EXPECT_EQ(rx.named("net.fc2.weight").at(0).kind, "parameter");
  EXPECT_EQ(rx.named("net.fc2.weight.grad").at(0).kind, "parameter_gradient");
  expect_equal(rx.named("net.fc2.weight").at(0), net->fc2->weight);
  expect_equal(rx.named("net.fc2.weight.grad").at(0), net->fc2->weight.grad());
  expect_equal(rx.named("net.fc2.bias.grad").at(0), net->fc2->bias.grad());
}

TEST_F(Track, TransformAndRenderModeApplyToTheTrack) {
  Net net;
  const torch::Tensor x = input();
  const NetImpl::Parts p = net->parts(x);
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle handle = rx.client().track_model(
      "net", net, TrackOptions().include("conv").transform([](const std::string&, const at::Tensor& t) {
        return t.transpose(0, 1).flatten(1).std(1);  // per-channel std
      }));
  net->forward(x);
  rx.client().next_step();
  ASSERT_EQ(rx.named("net.conv").size(), 1u);
  expect_equal(rx.named("net.conv").at(0), p.conv.transpose(0, 1).flatten(1).std(1));
}

TEST_F(Track, TrackTensorSendsTheGradientNotTheValue) {
  torch::nn::Linear fc(4, 3);
  const torch::Tensor x = torch::randn({5, 4});
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  // The expected gradient from a graph of its own: on PyTorch 2.x a tensor's hooks also
  // run for torch::autograd::grad, which would push it once more.
  const torch::Tensor twin = fc(x);
  const torch::Tensor expected = torch::autograd::grad({torch::tanh(twin).pow(2).sum()}, {twin})[0];
  torch::Tensor hidden = fc(x);
  TrackHandle handle = rx.client().track_tensor("hidden", hidden);
  ASSERT_TRUE(handle.ok()) << handle.error();
  torch::tanh(hidden).pow(2).sum().backward();
  ASSERT_EQ(rx.named("hidden").size(), 1u);
  EXPECT_EQ(rx.named("hidden").at(0).kind, "gradient");
  expect_equal(rx.named("hidden").at(0), expected);

  TrackHandle no_grad = rx.client().track_tensor("plain", torch::ones({3}));
  EXPECT_FALSE(no_grad.ok());
  handle.reset();
  torch::tanh(fc(x)).sum().backward();
  EXPECT_EQ(rx.named("hidden").size(), 1u);
}

TEST_F(Track, ThreadsAreTrackedSeparately) {
  Net net;
  net->eval();
  const torch::Tensor x0 = input(), x1 = input();
  const torch::Tensor y0 = net->forward(x0), y1 = net->forward(x1);
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  // A stream per call (by default, calls past the 4th are stacked: track_calls_test.cc).
  TrackHandle handle = rx.client().track_model(
      "net", net, TrackOptions().include("fc2").calls(CallStacking::kSeparate).evaluation(EvaluationCalls::kTrack));
  constexpr int kCalls = 20;
  auto run = [&](const torch::Tensor& x) {
    torch::NoGradGuard no_grad;
    for (int i = 0; i < kCalls; ++i) net->forward(x);
  };
  std::thread a(run, x0), b(run, x1);
  a.join();
  b.join();
  handle.flush();
  // Each thread's calls are its own (call index restarts per thread within the step).
  const auto records = rx.records();
  ASSERT_EQ(records.size(), 2u * kCalls);
  int matches0 = 0, matches1 = 0;
  for (const auto& r : records) {
    const torch::Tensor t = r.tensor();
    matches0 += torch::equal(t, y0) ? 1 : 0;
    matches1 += torch::equal(t, y1) ? 1 : 0;
  }
  EXPECT_EQ(matches0, kCalls);
  EXPECT_EQ(matches1, kCalls);
}

TEST_F(Track, TorchScriptModuleLoadedFromFileIsTracked) {
  testing::TempDir dir("ts-jit");
  const std::string path = dir.path() + "/model.pt";
  {
    torch::jit::Module fc1("Fc1"), fc2("Fc2"), root("Root");
    fc1.register_parameter("weight", torch::randn({6, 4}), false);
    fc1.register_parameter("bias", torch::randn({6}), false);
    fc1.define("def forward(self, x):\n  return torch.linear(x, self.weight, self.bias)\n");
    fc2.register_parameter("weight", torch::randn({2, 6}), false);
    fc2.define("def forward(self, x):\n  return torch.linear(x, self.weight)\n");
    root.register_module("fc1", fc1);
    root.register_module("fc2", fc2);
    root.define("def forward(self, x):\n  return self.fc2.forward(torch.relu(self.fc1.forward(x)))\n");
    root.save(path);
  }
  torch::jit::Module loaded = torch::jit::load(path);
  const torch::Tensor x = torch::randn({3, 4});
  torch::Tensor w1, b1, w2;
  for (const auto& p : loaded.named_parameters()) {
    if (p.name == "fc1.weight") w1 = p.value;
    if (p.name == "fc1.bias") b1 = p.value;
    if (p.name == "fc2.weight") w2 = p.value;
  }
  ASSERT_TRUE(w1.defined() && b1.defined() && w2.defined());
  const torch::Tensor h = torch::linear(x, w1, b1);
  const torch::Tensor y = torch::linear(torch::relu(h), w2);
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle handle = rx.client().track_model("jit", loaded);
  ASSERT_TRUE(handle.ok()) << handle.error();
  for (int step = 0; step < 3; ++step) {  // the profiling executor optimizes after a few runs
    loaded.forward({x});
    rx.client().next_step();
  }
  EXPECT_EQ(rx.names(), (std::set<std::string>{"jit.fc1", "jit.fc2"}));
  // The module tree names TorchScript modules by their class.
  const auto trees = rx.trees();
  ASSERT_EQ(trees.size(), 3u);
  const ModuleTree tree = tree_of(trees[2]);
  ASSERT_EQ(tree.calls.size(), 2u);
  EXPECT_EQ(tree.calls[0].path, "fc1");
  EXPECT_EQ(tree.calls[0].type, "Fc1");
  EXPECT_EQ(tree.calls[1].type, "Fc2");
  EXPECT_EQ(tree.calls[1].output, "float32[3,2]@cpu");
  ASSERT_EQ(rx.named("jit.fc1").size(), 3u);
  ASSERT_EQ(rx.named("jit.fc2").size(), 3u);
  for (int step = 0; step < 3; ++step) {
    EXPECT_TRUE(torch::allclose(rx.named("jit.fc1").at(step).tensor(), h, 1e-6, 1e-6));
    EXPECT_TRUE(torch::allclose(rx.named("jit.fc2").at(step).tensor(), y, 1e-6, 1e-6));
  }
}

TEST_F(Track, AnEmaOrCopyOfTheWeightsIsNotAForwardCall) {
  Net net;
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle handle = rx.client().track_model("net", net);
  const std::vector<torch::Tensor> params = net->parameters();
  std::vector<torch::Tensor> ema;
  for (const auto& p : params) ema.push_back(p.detach().clone());
  net->forward(input());
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
      ema[i].mul_(0.9).add_(params[i], 0.1);
      ema[i].copy_(params[i]);
    }
  }
  rx.client().next_step();
  EXPECT_EQ(rx.names(), (std::set<std::string>{"net.conv", "net.bn", "net.fc1", "net.fc2"}));
  EXPECT_EQ(rx.records().size(), 4u);
}

// (A client's every_n of 0 is out of its bounds: such a client refuses every push,
// client_test.cc's AnOptionOutOfBoundsRefusesEveryPushAndSaysWhy.)
TEST_F(Track, AModuleOnTheStackWorks) {
  torch::nn::LinearImpl lin(torch::nn::LinearOptions(4, 3));  // not held by a shared_ptr
  const torch::Tensor x = torch::randn({2, 4});
  const torch::Tensor expected = lin.forward(x);
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle handle = rx.client().track_model("lin", lin);
  ASSERT_TRUE(handle.ok()) << handle.error();
  for (int step = 0; step < 2; ++step) {
    lin.forward(x);
    rx.client().next_step();
  }
  ASSERT_EQ(rx.named("lin").size(), 2u);
  expect_equal(rx.named("lin").at(1), expected);
}

TEST_F(Track, AResetHandleKeepsNoParameterAlive) {
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  using WeakImpl = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
  std::optional<WeakImpl> weight;
  {
    Net net;
    weight.emplace(net->fc1->weight.getIntrusivePtr());
    TrackHandle handle =
        rx.client().track_model("net", net, TrackOptions().kinds(TrackKinds::kOutput | TrackKinds::kParameterGradient));
    net->forward(input()).sum().backward();  // this thread now caches the observer's listener list
    rx.client().next_step();
    EXPECT_FALSE(weight->expired());
  }  // the handle is reset, then the model goes
  EXPECT_TRUE(weight->expired()) << "a stopped track still holds the model's parameters";
}

TEST_F(Track, TheClientGoingAwayFirstLeavesHandlesHarmless) {
  Net net;
  TrackHandle handle;
  {
    RecordReceiver rx;
    ASSERT_TRUE(rx.ready());
    handle = rx.client().track_model("net", net);
    ASSERT_TRUE(handle.ok());
  }
  net->forward(input()).sum().backward();  // nothing to send to, nothing breaks
  handle.reset();
}

// A composite module (its own parameter and a child Linear), the root of the track.
struct ScaledImpl : torch::nn::Module {
  ScaledImpl() : fc(register_module("fc", torch::nn::Linear(5, 4))) {
    scale = register_parameter("scale", torch::ones({2, 1, 1}));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc(x).unsqueeze(0) * scale; }
  torch::nn::Linear fc{nullptr};
  torch::Tensor scale;
};
TORCH_MODULE(Scaled);

TEST_F(Track, TheModuleTreeListsEachCallInOrderWithShapesDtypesAndDevices) {
  Net net;
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle handle = rx.client().track_model("net", net);
  rx.client().set_step(5);
  net->forward(input());
  rx.client().next_step();
  const auto trees = rx.trees();
  ASSERT_EQ(trees.size(), 1u);
  EXPECT_EQ(trees[0].name, "net");
  EXPECT_EQ(trees[0].kind, "module_tree");
  EXPECT_EQ(trees[0].step, 5);
  const ModuleTree tree = tree_of(trees[0]);
  auto call = [](const char* path, const char* type, const char* in, const char* out) {
    ModuleTreeCall c;
    c.path = path;
    c.type = type;
    c.inputs = {in};
    c.output = out;
    return c;
  };
  const std::vector<ModuleTreeCall> expected = {
      call("conv", "Conv2d", "float32[2,1,8,8]@cpu", "float32[2,4,6,6]@cpu"),
      call("bn", "BatchNorm2d", "float32[2,4,6,6]@cpu", "float32[2,4,6,6]@cpu"),
      call("fc1", "Linear", "float32[2,144]@cpu", "float32[2,16]@cpu"),
      call("fc2", "Linear", "float32[2,16]@cpu", "float32[2,3]@cpu")};
  EXPECT_EQ(tree.calls, expected);
  EXPECT_EQ(tree.omitted, 0u);
}

TEST_F(Track, TheModuleTreeNumbersRepeatedCallsAndListsAParentBeforeItsChild) {
  Twice twice;
  Scaled scaled;
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle a = rx.client().track_model("m", twice);
  TrackHandle b = rx.client().track_model("s", scaled);
  twice->forward(torch::randn({3, 5}));
  scaled->forward(torch::randn({3, 5}));
  rx.client().next_step();
  ModuleTree m, s;
  for (const auto& r : rx.trees()) (r.name == "m" ? m : s) = tree_of(r);
  ASSERT_EQ(m.calls.size(), 4u);
  const std::vector<std::pair<std::string, uint32_t>> order = {{"fc", 0}, {"fc", 1}, {"fc", 2}, {"out", 0}};
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(m.calls[i].path, order[i].first) << i;
    EXPECT_EQ(m.calls[i].call, order[i].second) << i;
    EXPECT_EQ(m.calls[i].thread, 0u);
  }
  // The root spans both ops: its output is the scaled, unsqueezed result.
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[0].path, "");
  EXPECT_EQ(s.calls[0].type, "Scaled");
  EXPECT_EQ(s.calls[0].inputs, std::vector<std::string>{"float32[3,5]@cpu"});
  EXPECT_EQ(s.calls[0].output, "float32[2,3,4]@cpu");
  EXPECT_EQ(s.calls[1].path, "fc");
  EXPECT_EQ(s.calls[1].output, "float32[3,4]@cpu");
}

TEST_F(Track, TheModuleTreeCanBeTurnedOffAndFollowsEveryN) {
  Net net;
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle off = rx.client().track_model("off", net, TrackOptions().tree_log(false));
  TrackHandle grads = rx.client().track_layer("grads", net);
  TrackHandle sparse = rx.client().track_model("sparse", net, TrackOptions().every_n(2).include("fc"));
  for (int step = 0; step < 4; ++step) {
    net->forward(input()).sum().backward();
    rx.client().next_step();
  }
  std::vector<int64_t> steps;
  for (const auto& r : rx.trees()) {
    EXPECT_EQ(r.name, "sparse");
    steps.push_back(r.step);
    const ModuleTree tree = tree_of(r);
    ASSERT_EQ(tree.calls.size(), 2u);  // only the selected modules
    EXPECT_EQ(tree.calls[0].path, "fc1");
    EXPECT_EQ(tree.calls[1].path, "fc2");
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 2}));
}

// Stopping a track (its handle reset) sends the list of the step in progress; more calls
// than a list holds are counted, not listed.
TEST_F(Track, TheModuleTreeIsSentOnStopAndCountsCallsItCannotList) {
  torch::nn::Sequential seq;
  for (int i = 0; i < 20; ++i) seq->push_back(torch::nn::Linear(2, 2));
  RecordReceiver rx(ClientOptions().ring_slots(16384));  // every call's output fits
  ASSERT_TRUE(rx.ready());
  TrackHandle handle = rx.client().track_model("t", seq);
  rx.client().set_step(3);
  const torch::Tensor x = torch::randn({1, 2});
  for (int call = 0; call < 210; ++call) seq->forward(x);  // 4200 calls
  handle.reset();
  const auto trees = rx.trees();
  ASSERT_EQ(trees.size(), 1u);
  EXPECT_EQ(trees[0].step, 3);
  const ModuleTree tree = tree_of(trees[0]);
  ASSERT_EQ(tree.calls.size(), ModuleTree::kMaxCalls);
  EXPECT_EQ(tree.omitted, 4200u - ModuleTree::kMaxCalls);
  EXPECT_EQ(tree.calls.back().path, std::to_string((ModuleTree::kMaxCalls - 1) % 20));
  EXPECT_EQ(tree.calls.back().call, (ModuleTree::kMaxCalls - 1) / 20);
}

// Every one of many tracks on one model lists its calls' inputs.
TEST_F(Track, ManyTracksOnOneModelEachListTheInputs) {
  torch::nn::Sequential seq(torch::nn::Linear(2, 3), torch::nn::Linear(3, 2));
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  std::vector<TrackHandle> handles;
  for (int k = 0; k < 40; ++k) handles.push_back(rx.client().track_model("t" + std::to_string(k), seq));
  seq->forward(torch::randn({1, 2}));
  rx.client().next_step();
  const auto trees = rx.trees();
  ASSERT_EQ(trees.size(), 40u);
  for (const auto& r : trees) {
    const ModuleTree tree = tree_of(r);
    ASSERT_EQ(tree.calls.size(), 2u) << r.name;
    EXPECT_EQ(tree.calls[0].inputs, std::vector<std::string>{"float32[1,2]@cpu"}) << r.name;
    EXPECT_EQ(tree.calls[1].inputs, std::vector<std::string>{"float32[1,3]@cpu"}) << r.name;
  }
}

// A forward running on another thread while the training thread changes steps: each step
// gets one list at most, with its own step number.
TEST_F(Track, OneModuleTreePerStepWhileAnotherThreadRunsForward) {
  Net net;
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  TrackHandle handle = rx.client().track_model("net", net, TrackOptions().evaluation(EvaluationCalls::kTrack));
  std::atomic<bool> done{false};
  std::atomic<int> forwards{0};
  std::thread other([&] {
    torch::NoGradGuard no_grad;
    while (!done.load()) {
      net->forward(input());
      forwards.fetch_add(1);
    }
  });
  // Steps change as fast as they can while forwards run (once the first one ran).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (forwards.load() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  const int first = forwards.load();
  while (forwards.load() < first + 50 && std::chrono::steady_clock::now() < deadline) rx.client().next_step();
  done = true;
  other.join();
  handle.reset();
  std::set<int64_t> steps;
  for (const auto& r : rx.trees()) {
    EXPECT_TRUE(steps.insert(r.step).second) << "two lists for step " << r.step;
    const ModuleTree tree = tree_of(r);
    for (const auto& c : tree.calls) EXPECT_FALSE(c.output.empty()) << c.path;
  }
  EXPECT_GE(forwards.load(), 50);
  EXPECT_FALSE(steps.empty());  // lists were sent while steps changed
}

}  // namespace
}  // namespace tensorscope
