// CUDA tensors to a daemon in another process (ipc_sink, which reads device payloads
// with the daemon's DevicePayloadReader): byte-for-byte arrival by CUDA IPC and by the
// pinned-host fallback, tensors changed or freed right after push, a model trained on
// cuda:0 with tracking and its per-step summaries, a tracked step that never waits for
// the GPU, and a daemon killed with SIGKILL during pushes.
// Every test skips on a machine without a CUDA device.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <torch/torch.h>

#include <tensorscope/tensorscope.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string_view>

#include "daemon_process.h"
#include "record_log.h"
#include "temp_dir.h"
#include "tensorscope/shared/summary_format.h"

namespace tensorscope::itest {
namespace {

class CudaIpcTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  }

  // Starts ipc_sink for `session`; its log is <dir>/<name>.log.
  std::unique_ptr<ChildProcess> start_sink(const std::string& session, const std::string& log, bool host_only) {
    ChildProcess::Options o;
    o.argv = {IPC_SINK_PATH, dir_.path() + "/run", session, log};
    if (host_only) o.argv.push_back("--host-only");
    o.stderr_path = dir_.path() + "/sink.err";
    o.pipe_stdout = true;
    std::string error;
    auto sink = ChildProcess::start(o, &error);
    EXPECT_TRUE(sink) << error;
    if (!sink) return nullptr;
    const auto line = sink->next_line(Millis(10000));
    EXPECT_TRUE(line && *line == "ready") << "ipc_sink did not start";
    return sink;
  }

  ClientOptions options(const std::string& session) const {
    return ClientOptions()
        .session(session)
        .runtime_dir(dir_.path() + "/run")
        .shm_budget(uint64_t{64} << 20)
        .cuda_staging_bytes(uint64_t{64} << 20)
        .reconnect_interval_ms(10);
  }

  static bool wait_connected(const Client& client) {
    return wait_until([&] { return client.connected(); }, Millis(10000));
  }

  testing::TempDir dir_{"ts-cuda"};
};

std::vector<uint8_t> bytes_of(const torch::Tensor& cpu) {
  const torch::Tensor c = cpu.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  return std::vector<uint8_t>(p, p + c.numel() * c.element_size());
}

// The summary records the sink received and the entries in them (each must parse, finite).
std::pair<int, int> summaries_in(const std::vector<LoggedRecord>& records) {
  int summary_records = 0, entries = 0;
  for (const auto& r : records) {
    if (r.kind != static_cast<uint8_t>(wire::TensorKind::kSummary)) continue;
    ++summary_records;
    const auto parsed =
        parse_summaries(std::string_view(reinterpret_cast<const char*>(r.payload.data()), r.payload.size()));
    EXPECT_TRUE(parsed.is_ok()) << parsed.message();
    if (!parsed.is_ok()) continue;
    for (const TensorSummary& s : *parsed) {
      EXPECT_TRUE(s.finite()) << s.name;
      EXPECT_GT(s.numel, 0u) << s.name;
      ++entries;
    }
  }
  return {summary_records, entries};
}

TEST_P(CudaIpcTest, PushedTensorsArriveByteForByte) {
  const bool ipc = GetParam();
  const std::string log = dir_.path() + "/records.log";
  auto sink = start_sink("bytes", log, /*host_only=*/!ipc);
  ASSERT_TRUE(sink);
  Client client(options("bytes"));
  ASSERT_TRUE(wait_connected(client));

  torch::manual_seed(7);
  const auto cuda = torch::TensorOptions().device(torch::kCUDA, 0);
  std::map<std::string, std::vector<uint8_t>> expected;
  // Pushed first, read back after: the push must order its copy after the kernels that
  // are still computing the tensor (nothing synchronizes before it).
  auto push = [&](const std::string& name, const torch::Tensor& t) {
    EXPECT_EQ(client.push(name, t), PushResult::kPushed) << name;
    expected[name] = bytes_of(t.cpu());
  };
  const std::vector<torch::ScalarType> types = {torch::kFloat32, torch::kFloat64, torch::kFloat16, torch::kBFloat16,
                                                torch::kInt8,    torch::kInt16,   torch::kInt32,   torch::kInt64,
                                                torch::kUInt8,   torch::kBool};
  for (const auto type : types) {
    torch::Tensor t = torch::randint(-100, 100, {37, 129}, cuda.dtype(torch::kInt64));
    t = type == torch::kBool ? t.gt(0) : type == torch::kUInt8 ? t.abs().to(type) : t.to(type);
    if (torch::isFloatingType(type)) t = t * 0.37;
    push(std::string("dtype.") + c10::toString(type), t);
  }
  {
    // A long chain of kernels still running when push is called.
    torch::Tensor m = torch::randn({2048, 2048}, cuda);
    for (int i = 0; i < 20; ++i) m = torch::tanh(m.matmul(m) * 1e-3);
    push("still_computing", m);
  }
  push("strided", torch::randn({64, 48}, cuda).t());
  push("sliced", torch::randn({100, 100}, cuda).slice(1, 3, 90, 2));
  {
    // Changed in place at once on the same stream: what arrives is the value at push.
    torch::Tensor t = torch::randn({1 << 20}, cuda);
    expected["changed_after_push"] = bytes_of(t.cpu());
    EXPECT_EQ(client.push("changed_after_push", t), PushResult::kPushed);
    t.mul_(3).add_(1);
  }
  {
    // Freed at once: the caching allocator hands the block to the next tensor.
    torch::Tensor t = torch::randn({1 << 20}, cuda);
    push("freed_after_push", t);
  }
  for (int i = 0; i < 8; ++i) (void)torch::full({1 << 20}, 42.0, cuda).sum().item<float>();
  push("large", torch::randn({8 << 20}, cuda));  // 32 MiB

  ASSERT_TRUE(wait_until([&] { return read_records(log).size() >= expected.size(); }, Millis(20000)))
      << read_records(log).size() << " of " << expected.size() << " records arrived";
  const auto records = read_records(log);
  ASSERT_EQ(records.size(), expected.size());
  for (const auto& r : records) {
    SCOPED_TRACE(r.name);
    ASSERT_EQ(expected.count(r.name), 1u);
    EXPECT_EQ(r.device, "cuda0");
    EXPECT_EQ(r.by_ipc, ipc);
    EXPECT_TRUE(r.payload == expected[r.name]) << "payload differs";
  }
  const ClientStats s = client.stats();
  EXPECT_EQ(s.cuda_transport, ipc ? "cuda-ipc" : "pinned-host") << s.cuda_note;
  EXPECT_EQ(ipc ? s.cuda_ipc_pushed : s.cuda_host_pushed, expected.size());
  EXPECT_EQ(s.cuda_failed, 0u);
  EXPECT_EQ(s.dropped_full, 0u);
}

TEST_P(CudaIpcTest, ModelTrainedOnTheGpuSendsItsTrackedTensors) {
  const bool ipc = GetParam();
  const std::string log = dir_.path() + "/records.log";
  auto sink = start_sink("train", log, !ipc);
  ASSERT_TRUE(sink);
  Client client(options("train"));
  ASSERT_TRUE(wait_connected(client));

  torch::manual_seed(3);
  torch::nn::Sequential net(torch::nn::Linear(32, 64), torch::nn::ReLU(), torch::nn::Linear(64, 10));
  net->to(torch::kCUDA);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05));
  TrackHandle outputs = client.track_model("net", net);
  TrackHandle grads = client.track_layer("net", net);
  ASSERT_TRUE(outputs.ok()) << outputs.error();
  std::vector<std::vector<uint8_t>> fc2_outputs;
  const int steps = 6;
  for (int step = 0; step < steps; ++step) {
    client.set_step(step);
    const torch::Tensor x = torch::randn({16, 32}, torch::kCUDA);
    const torch::Tensor y =
        torch::randint(0, 10, {16}, torch::TensorOptions().device(torch::kCUDA).dtype(torch::kLong));
    opt.zero_grad();
    const torch::Tensor out = net->forward(x);
    fc2_outputs.push_back(bytes_of(out.detach().cpu()));
    torch::nn::functional::cross_entropy(out, y).backward();
    opt.step();
  }
  // (reset, not flush: a GPU summary is read when the next step begins, and the last
  // step's are sent when the track ends.)
  outputs.reset();
  grads.reset();
  // net.0 and net.2 outputs and their gradients, every step.
  const size_t want = static_cast<size_t>(steps) * 4;
  ASSERT_TRUE(wait_until([&] { return read_records(log).size() >= want; }, Millis(20000)))
      << read_records(log).size() << " of " << want;
  int fc2 = 0;
  for (const auto& r : read_records(log)) {
    if (r.name == "net") continue;  // the track's module tree records (text, on the CPU)
    EXPECT_EQ(r.device, "cuda0") << r.name;
    EXPECT_EQ(r.by_ipc, ipc) << r.name;
    if (r.name == "net.2") {
      ASSERT_LT(r.step, steps);
      EXPECT_TRUE(r.payload == fc2_outputs[static_cast<size_t>(r.step)]) << "step " << r.step;
      ++fc2;
    }
  }
  EXPECT_EQ(fc2, steps);
  // One summary record a step (stats_every defaults to 1), every entry finite.
  // (Each track sends its own summary records: the entries are waited for, not the records.)
  ASSERT_TRUE(wait_until([&] { return summaries_in(read_records(log)).second >= steps * 4; }, Millis(20000)))
      << summaries_in(read_records(log)).second << " summary entries of " << steps * 4;
  EXPECT_GE(summaries_in(read_records(log)).first, steps);
}

// A tracked step (full tensors every step, summaries every step) never waits for the GPU:
// with about a second of matrix products queued ahead of it, forward, backward and the
// optimizer step return to the host long before the GPU has run them. A synchronization
// anywhere in the hooks (a pageable copy, .item(), an event or stream wait on the host)
// would hold the host until the queued products are done.
TEST_P(CudaIpcTest, TrackedStepNeverWaitsForTheGpu) {
  const bool ipc = GetParam();
  const std::string log = dir_.path() + "/records.log";
  auto sink = start_sink("nowait", log, !ipc);
  ASSERT_TRUE(sink);
  Client client(options("nowait"));
  ASSERT_TRUE(wait_connected(client));

  torch::manual_seed(5);
  const auto cuda = torch::TensorOptions().device(torch::kCUDA, 0);
  torch::nn::Sequential net(torch::nn::Linear(256, 512), torch::nn::ReLU(), torch::nn::Linear(512, 10));
  net->to(torch::kCUDA);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  TrackHandle outputs = client.track_model("net", net, TrackOptions().stats_every(1));
  TrackHandle grads = client.track_layer("net", net, TrackOptions().stats_every(1));
  ASSERT_TRUE(outputs.ok()) << outputs.error();
  const torch::Tensor x = torch::randn({64, 256}, cuda);
  const torch::Tensor y = torch::randint(0, 10, {64}, cuda.dtype(torch::kLong));
  auto step = [&](int64_t s) {
    client.set_step(s);
    opt.zero_grad();
    torch::nn::functional::cross_entropy(net->forward(x), y).backward();
    opt.step();
  };
  for (int s = 0; s < 4; ++s) step(s);  // warm-up: staging pools, pinned blocks, kernels
  torch::cuda::synchronize();

  // About a second of GPU work: 8192x8192 products, one kernel each (few enough that the
  // launch queue never fills and blocks the host by itself).
  const torch::Tensor m = torch::randn({8192, 8192}, cuda) / 90.5;
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  torch::Tensor a = m;
  auto t = Clock::now();
  for (int i = 0; i < 4; ++i) a = torch::mm(a, m);
  torch::cuda::synchronize();
  const double per_product = seconds_since(t) / 4;
  const int products = std::clamp(static_cast<int>(1.0 / per_product), 8, 400);

  t = Clock::now();
  for (int i = 0; i < products; ++i) a = torch::mm(a, m);
  const double queued = seconds_since(t);
  step(4);
  const double host = seconds_since(t);
  torch::cuda::synchronize();
  const double gpu = seconds_since(t);
  std::printf("queued %d products in %.1f ms; the tracked step returned at %.1f ms; the GPU finished at %.1f ms\n",
              products, queued * 1e3, host * 1e3, gpu * 1e3);
  ASSERT_GT(gpu, 0.3) << "the queued work was too short to tell";
  EXPECT_LT(host, gpu / 2) << "the tracked step waited for the GPU";

  outputs.flush();
  grads.flush();
  ASSERT_TRUE(wait_until([&] { return summaries_in(read_records(log)).first >= 5; }, Millis(20000)))
      << summaries_in(read_records(log)).first << " summary records of 5 steps";
  const ClientStats stats = client.stats();
  EXPECT_EQ(stats.cuda_failed, 0u);
  EXPECT_EQ(stats.dropped_full, 0u);
  int full = 0;
  for (const auto& r : read_records(log)) {
    if (r.kind == static_cast<uint8_t>(wire::TensorKind::kSummary) || r.name == "net") continue;
    EXPECT_EQ(r.by_ipc, ipc) << r.name;
    ++full;
  }
  EXPECT_GE(full, 5 * 4) << "outputs of net.0 and net.2 and their gradients, 5 steps";
}

TEST_P(CudaIpcTest, KilledDaemonLeavesTrainingRunningWithFlatGpuMemory) {
  const bool ipc = GetParam();
  const std::string log1 = dir_.path() + "/first.log", log2 = dir_.path() + "/second.log";
  auto sink = start_sink("kill", log1, !ipc);
  ASSERT_TRUE(sink);
  Client client(options("kill"));
  ASSERT_TRUE(wait_connected(client));
  const auto cuda = torch::TensorOptions().device(torch::kCUDA, 0);
  torch::Tensor t = torch::zeros({1 << 20}, cuda);  // 4 MiB

  // Free device memory is measured for the whole GPU, sinks included: the first mark is
  // taken once the first sink has read a record (its CUDA context exists), the last
  // one once the second sink has (the first one's context is gone by then).
  size_t free_after_warmup = 0, free_at_end = 0, total = 0;
  // Results before the kill, while no daemon runs, and after the restart. How many pushes
  // are taken depends on how fast the stand-in reads against this loop: the rest is paced
  // (gated) or dropped, never refused.
  std::map<PushResult, int> before, between, after;
  for (int i = 0; i < 600; ++i) {
    t.fill_(static_cast<float>(i));
    (i < 200 ? before : i < 300 ? between : after)[client.push("x", t)]++;
    if (i == 20) {
      ASSERT_TRUE(wait_until([&] { return !read_records(log1).empty(); }, Millis(10000)));
      torch::cuda::synchronize();
      ASSERT_EQ(cudaMemGetInfo(&free_after_warmup, &total), cudaSuccess);
    }
    if (i == 200) sink->kill_group();  // SIGKILL in the middle of pushes
    if (i == 300) {
      sink = start_sink("kill", log2, !ipc);
      ASSERT_TRUE(sink);
      ASSERT_TRUE(wait_until([&] { return client.stats().connections == 2; }, Millis(10000)));
    }
  }
  ASSERT_TRUE(wait_until([&] { return !read_records(log2).empty(); }, Millis(10000)));
  torch::cuda::synchronize();
  ASSERT_EQ(cudaMemGetInfo(&free_at_end, &total), cudaSuccess);
  const auto show = [](const std::map<PushResult, int>& m) {
    std::string text;
    for (const auto& [result, n] : m) text += std::string(to_string(result)) + " " + std::to_string(n) + "; ";
    return text;
  };
  EXPECT_GT(before[PushResult::kPushed], 0) << show(before);
  EXPECT_GT(after[PushResult::kPushed], 0) << show(after);
  for (const auto* m : {&before, &between, &after}) {
    EXPECT_EQ(m->count(PushResult::kRefused), 0u) << show(*m);
  }
  // The staging pools were allocated before the warm-up mark and never grew.
  EXPECT_LT(static_cast<int64_t>(free_after_warmup) - static_cast<int64_t>(free_at_end), int64_t{64} << 20)
      << "GPU memory grew across the daemon's death and restart";
  EXPECT_EQ(client.stats().connections, 2u);
  // The second daemon received values pushed after the restart, intact.
  ASSERT_TRUE(wait_until([&] { return !read_records(log2).empty(); }, Millis(10000)));
  for (const auto& r : read_records(log2)) {
    ASSERT_EQ(r.payload.size(), size_t{4} << 20);
    float first = 0, last = 0;
    std::memcpy(&first, r.payload.data(), 4);
    std::memcpy(&last, r.payload.data() + r.payload.size() - 4, 4);
    EXPECT_EQ(first, last);
    EXPECT_GE(first, 300.0f);
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, CudaIpcTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "CudaIpc" : "PinnedHost"; });

}  // namespace
}  // namespace tensorscope::itest
