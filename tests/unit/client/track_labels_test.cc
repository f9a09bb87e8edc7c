// track_labels_test.cc — row labels from the C++ client: Client::push(name, tensor,
// labels) sends them with the record (any integer dtype, as int64), a wrong count, dtype
// or shape refuses the push (counted) and a gated push never reads them; a module track's
// TrackOptions::labels goes with every output and output gradient whose rows are the
// batch's, and not with the others or when the function throws.
#include <gtest/gtest.h>

#include <stdexcept>

#include "record_receiver.h"

namespace tensorscope {
namespace {

using testing::RecordReceiver;

std::vector<int64_t> values_of(const testing::ReceivedRecord& r) {
  return r.row_labels ? r.row_labels->values : std::vector<int64_t>{};
}

TEST(TrackLabels, PushSendsTheLabelsWithTheRecord) {
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  Client& scope = rx.client();
  const torch::Tensor h = torch::randn({4, 3});
  EXPECT_EQ(scope.push("a", h, torch::tensor({2, 0, 1, 2}, torch::kLong)), PushResult::kPushed);
  EXPECT_EQ(scope.push("b", h, torch::tensor({7, 7, 8, 8}, torch::kInt8)), PushResult::kPushed);
  EXPECT_EQ(scope.push("c", h), PushResult::kPushed);
  const auto records = rx.records();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(values_of(records[0]), (std::vector<int64_t>{2, 0, 1, 2}));
  EXPECT_TRUE(records[0].row_labels->names.empty());
  EXPECT_TRUE(torch::equal(records[0].tensor(), h));
  EXPECT_EQ(values_of(records[1]), (std::vector<int64_t>{7, 7, 8, 8}));
  EXPECT_FALSE(records[2].row_labels);
}

TEST(TrackLabels, WrongLabelsAreRefusedAndAGatedPushNeverReadsThem) {
  RecordReceiver rx(ClientOptions().every_n(2));
  ASSERT_TRUE(rx.ready());
  Client& scope = rx.client();
  const torch::Tensor h = torch::randn({4, 3});
  EXPECT_EQ(scope.push("count", h, torch::tensor({0, 1, 2}, torch::kLong)), PushResult::kRefused);
  EXPECT_EQ(scope.push("float", h, torch::rand({4})), PushResult::kRefused);
  EXPECT_EQ(scope.push("matrix", h, torch::zeros({4, 1}, torch::kLong)), PushResult::kRefused);
  EXPECT_EQ(scope.push("undefined", h, torch::Tensor()), PushResult::kRefused);
  EXPECT_EQ(scope.push("scalar", torch::tensor(1.0f), torch::tensor({0}, torch::kLong)), PushResult::kRefused);
  EXPECT_EQ(scope.stats().refused, 5u);
  // every_n 2: the first push of a stream goes, the second is gated before any check.
  EXPECT_EQ(scope.push("gated", h, torch::tensor({0, 1, 2, 3}, torch::kLong)), PushResult::kPushed);
  EXPECT_EQ(scope.push("gated", h, torch::rand({4})), PushResult::kGated);
  EXPECT_EQ(scope.stats().refused, 5u);
  EXPECT_EQ(rx.records().size(), 1u);
}

TEST(TrackLabels, ModuleTracksSendTheBatchLabelsWithBatchShapedTensors) {
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  Client& scope = rx.client();
  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(8, 16), torch::nn::ReLU(), torch::nn::Linear(16, 3));
  const torch::Tensor x = torch::randn({5, 8});
  const torch::Tensor y = torch::tensor({0, 2, 1, 2, 0}, torch::kLong);
  {
    TrackHandle outputs = scope.track_model("m", model, TrackOptions().labels([&] { return y; }));
    TrackHandle grads = scope.track_layer("m", model, TrackOptions().labels([&] { return y; }));
    ASSERT_TRUE(outputs.ok() && grads.ok());
    torch::nn::functional::cross_entropy(model->forward(x), y).backward();
    scope.next_step();
  }
  {
    TrackHandle thrower =
        scope.track_model("t", model, TrackOptions().labels([]() -> torch::Tensor { throw std::runtime_error("no"); }));
    TrackHandle shorter = scope.track_model("s", model, TrackOptions().labels([&] { return y.slice(0, 0, 4); }));
    model->forward(x);
    scope.next_step();
  }
  const std::vector<int64_t> batch = {0, 2, 1, 2, 0};
  for (const char* stream : {"m.0", "m.2", "m.0.grad", "m.2.grad"}) {
    const auto got = rx.named(stream);
    ASSERT_EQ(got.size(), 1u) << stream;
    EXPECT_EQ(values_of(got[0]), batch) << stream;
  }
  for (const char* stream : {"t.0", "s.2"}) {
    const auto got = rx.named(stream);
    ASSERT_EQ(got.size(), 1u) << stream;
    EXPECT_FALSE(got[0].row_labels) << stream;
  }
  EXPECT_EQ(scope.stats().refused, 0u);
}

// A siamese step: the model runs on two batches of the same size, the labels function
// following the batch, then one backward. Each call's output and gradient keep their own
// batch's labels (read when the call began: the last module's call of the first batch
// ends only when the second batch's first op runs, and backward comes after both).
TEST(TrackLabels, TwoCallsOfTheModelInAStepKeepTheirOwnLabels) {
  RecordReceiver rx;
  ASSERT_TRUE(rx.ready());
  Client& scope = rx.client();
  torch::manual_seed(1);
  torch::nn::Sequential model(torch::nn::Linear(8, 16), torch::nn::ReLU(), torch::nn::Linear(16, 3));
  const torch::Tensor xa = torch::randn({4, 8}), xb = torch::randn({4, 8});
  const torch::Tensor ya = torch::tensor({0, 1, 2, 0}, torch::kLong), yb = torch::tensor({2, 2, 1, 1}, torch::kLong);
  torch::Tensor current = ya;
  {
    TrackHandle outputs = scope.track_model("m", model, TrackOptions().labels([&] { return current; }));
    TrackHandle grads = scope.track_layer("m", model, TrackOptions().labels([&] { return current; }));
    ASSERT_TRUE(outputs.ok() && grads.ok());
    const torch::Tensor a = model->forward(xa);
    current = yb;
    const torch::Tensor b = model->forward(xb);
    (torch::nn::functional::cross_entropy(a, ya) + torch::nn::functional::cross_entropy(b, yb)).backward();
    scope.next_step();
  }
  const std::vector<int64_t> first = {0, 1, 2, 0}, second = {2, 2, 1, 1};
  for (const auto& [stream, want] :
       {std::pair{"m.0", first}, std::pair{"m.2", first}, std::pair{"m.0.grad", first}, std::pair{"m.2.grad", first},
        std::pair{"m.0#1", second}, std::pair{"m.2#1", second}, std::pair{"m.0#1.grad", second},
        std::pair{"m.2#1.grad", second}}) {
    const auto got = rx.named(stream);
    ASSERT_EQ(got.size(), 1u) << stream;
    EXPECT_EQ(values_of(got[0]), want) << stream;
  }
}

}  // namespace
}  // namespace tensorscope
