// pacing_test.cc — a daemon far slower than the training: the client paces every stream
// to what the daemon reads (client/core/pacer.h), so that few pushes find the ring full
// (their copies are not made at all) and every stream, the last pushed in a step as much
// as the first, gets about the same share of what the daemon takes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <torch/torch.h>

#include <tensorscope/tensorscope.h>

#include "fake_daemon.h"
#include "temp_dir.h"

namespace tensorscope {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

TEST(Pacing, ASlowDaemonGetsEveryStreamAtTheSameRateAndFewFullRings) {
  testing::TempDir dir("ts-pace");
  std::mutex mutex;
  std::map<std::string, int> received;
  testing::FakeDaemon sink(dir.path() + "/run", "pace", [&](const RecordView& v) {
    if (!wire::is_tensor_kind(v.header.kind)) return;
    {
      std::lock_guard<std::mutex> lock(mutex);
      ++received[v.header.name];
    }
    std::this_thread::sleep_for(milliseconds(2));  // at most about 500 records a second
  });
  ASSERT_TRUE(sink.start());
  Client client(ClientOptions()
                    .session("pace")
                    .runtime_dir(dir.path() + "/run")
                    .shm_budget(8 << 20)
                    .ring_slots(256)
                    .pacing(true)
                    .connect_timeout_ms(20000));
  ASSERT_TRUE(testing::wait_connected(client));

  const torch::Tensor t = torch::ones({64, 64});  // 16 KiB
  const int streams = 32;
  int64_t step = 0;
  double stride_seen = 1;
  for (const auto end = steady_clock::now() + std::chrono::seconds(4); steady_clock::now() < end;) {
    client.set_step(step++);
    for (int s = 0; s < streams; ++s) (void)client.push("s" + std::to_string(s), t);
    stride_seen = std::max(stride_seen, client.stats().pace_stride);
    std::this_thread::sleep_for(milliseconds(2));  // the rest of a training step
  }
  const ClientStats stats = client.stats();
  for (const auto deadline = steady_clock::now() + std::chrono::seconds(60);
       sink.received() < stats.pushed && steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_GE(sink.received(), stats.pushed) << "the sink did not read every pushed record";
  SCOPED_TRACE(::testing::Message() << step << " steps; pushed " << stats.pushed << ", dropped_full "
                                    << stats.dropped_full << ", paced " << stats.paced << ", stride "
                                    << stats.pace_stride << " (highest " << stride_seen << ")");
  std::printf("%lld steps: pushed %llu, dropped_full %llu, paced %llu, stride %.3g (highest %.3g)\n",
              static_cast<long long>(step), static_cast<unsigned long long>(stats.pushed),
              static_cast<unsigned long long>(stats.dropped_full), static_cast<unsigned long long>(stats.paced),
              stats.pace_stride, stride_seen);
  EXPECT_GT(stride_seen, 1.0) << "the daemon could not take every call";
  EXPECT_GT(stats.paced, 0u);
  EXPECT_GE(stats.gated, stats.paced) << "paced calls are gated calls";
  // Without pacing nearly every push finds the ring full (tens of times the pushed ones).
  EXPECT_LT(stats.dropped_full, stats.pushed / 2) << "most calls held back before a copy";
  std::lock_guard<std::mutex> lock(mutex);
  ASSERT_EQ(received.size(), static_cast<size_t>(streams));
  int least = INT32_MAX, most = 0;
  for (const auto& [name, n] : received) {
    least = std::min(least, n);
    most = std::max(most, n);
  }
  std::printf("per stream: fewest %d, most %d\n", least, most);
  EXPECT_GE(least * 2, most) << "every stream about the same share: fewest " << least << ", most " << most;
}

}  // namespace
}  // namespace tensorscope
