// push_bench — the cost of Client::push, measured against plain memcpy in the same run.
//
// An in-process sink (fake_daemon.h) registers the client exactly as the daemon does and
// drains the ring without rendering. Prints, for 4 KiB, 1 MiB and 64 MiB float tensors,
// push throughput as a ratio to memcpy of the same bytes into
// a pre-faulted buffer as large as the ring (successive places, as push writes the ring);
// the cost of a gated-out push; and the median / p99 of a small push.
//   push_bench [--quick]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include <tensorscope/tensorscope.h>

#include "fake_daemon.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  const std::string runtime_dir = "/tmp/ts-bench-" + std::to_string(::getpid());
  constexpr uint64_t kRingBytes = uint64_t{512} << 20;
  tensorscope::testing::FakeDaemon sink(runtime_dir, "bench");
  if (auto st = sink.start(); !st) {
    std::fprintf(stderr, "push_bench: %s\n", st.message().c_str());
    return 1;
  }
  tensorscope::Client client(tensorscope::ClientOptions()
                                 .session("bench")
                                 .runtime_dir(runtime_dir)
                                 .shm_budget(kRingBytes)
                                 .reconnect_interval_ms(10));
  if (!tensorscope::testing::wait_connected(client)) {
    std::fprintf(stderr, "push_bench: client did not connect\n");
    return 1;
  }

  std::printf("push_bench: throughput of push vs memcpy of the same bytes (same run)\n");
  struct Case {
    const char* name;
    int64_t bytes;
    int iterations;
  };
  const std::vector<Case> cases = {{"4 KiB", 4 << 10, quick ? 2000 : 20000},
                                   {"1 MiB", 1 << 20, quick ? 100 : 1000},
                                   {"64 MiB", 64 << 20, quick ? 5 : 30}};
  for (const Case& c : cases) {
    torch::Tensor t = torch::randn({c.bytes / 4});
    // Baseline: memcpy of the same bytes into successive places of a pre-faulted buffer
    // as large as the ring, as push writes successive places of the ring.
    const size_t footprint = std::max<size_t>(kRingBytes / 2, static_cast<size_t>(c.bytes));
    std::vector<char> dst(footprint);
    std::memset(dst.data(), 1, dst.size());
    const size_t slots = footprint / static_cast<size_t>(c.bytes);
    for (int i = 0; i < std::min(c.iterations, 8); ++i) client.push("warm", t);
    auto start = Clock::now();
    for (int i = 0; i < c.iterations; ++i) {
      char* to = dst.data() + (static_cast<size_t>(i) % slots) * static_cast<size_t>(c.bytes);
      std::memcpy(to, t.data_ptr(), static_cast<size_t>(c.bytes));
      asm volatile("" : : "r"(to) : "memory");
    }
    const double memcpy_s = seconds_since(start);

    const auto before = client.stats();
    double push_s = 0;
    int pushed = 0;
    for (int i = 0; i < c.iterations; ++i) {
      const auto t0 = Clock::now();
      const auto r = client.push("bench", t);
      const double dt = seconds_since(t0);
      if (r == tensorscope::PushResult::kPushed) {
        push_s += dt;
        ++pushed;
      } else {
        // The ring is full: let the sink catch up (not timed).
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    const auto after = client.stats();
    const double memcpy_gbs = static_cast<double>(c.bytes) * c.iterations / memcpy_s / 1e9;
    const double push_gbs = pushed > 0 ? static_cast<double>(c.bytes) * pushed / push_s / 1e9 : 0;
    std::printf("  %-7s push %7.2f GB/s  memcpy %7.2f GB/s  ratio %.2f  (%d pushed, %llu dropped_full)\n", c.name,
                push_gbs, memcpy_gbs, push_gbs / memcpy_gbs, pushed,
                static_cast<unsigned long long>(after.dropped_full - before.dropped_full));
  }

  {
    tensorscope::Client gated(tensorscope::ClientOptions()
                                  .session("bench")
                                  .runtime_dir(runtime_dir)
                                  .every_n(int64_t{1} << 60)
                                  .shm_budget(8 << 20)
                                  .reconnect_interval_ms(10));
    tensorscope::testing::wait_connected(gated);
    torch::Tensor small = torch::randn({16});
    gated.push("gated", small);  // the 1st call passes
    const int n = quick ? 200000 : 2000000;
    const std::string name = "gated";
    auto start = Clock::now();
    for (int i = 0; i < n; ++i) gated.push(name, small);
    const double ns = seconds_since(start) / n * 1e9;
    std::printf("push_bench: gated-out push %.1f ns/call (goal < 100 ns); gated=%llu\n", ns,
                static_cast<unsigned long long>(gated.stats().gated));
  }

  {
    torch::Tensor small = torch::randn({16});
    const int n = quick ? 5000 : 50000;
    std::vector<double> ns;
    ns.reserve(static_cast<size_t>(n));
    const std::string name = "small";
    for (int i = 0; i < n; ++i) {
      const auto t0 = Clock::now();
      const auto r = client.push(name, small);
      const double dt = seconds_since(t0) * 1e9;
      if (r == tensorscope::PushResult::kPushed) ns.push_back(dt);
      if (i % 512 == 511) std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    std::sort(ns.begin(), ns.end());
    const double median = ns.empty() ? 0 : ns[ns.size() / 2];
    const double p99 = ns.empty() ? 0 : ns[ns.size() * 99 / 100];
    std::printf(
        "push_bench: small push (16 floats) median %.0f ns, p99 %.0f ns over %zu pushes (goal median < 2000 ns)\n",
        median, p99, ns.size());
  }
  {
    // Row labels (a projection's classes): a batch of 64 feature rows pushed with and
    // without its labels, interleaved; the labels add a 24-byte header and 64 int64s to the
    // record, and their check.
    const torch::Tensor rows = torch::randn({64, 128});
    const torch::Tensor labels = torch::randint(0, 10, {64}, torch::kLong);
    const int n = quick ? 4000 : 40000;
    std::vector<double> plain_ns, labelled_ns;
    const std::string name = "rows";
    for (int i = 0; i < n; ++i) {
      const bool with = i % 2 == 1;
      const auto t0 = Clock::now();
      const auto r = with ? client.push(name, rows, labels) : client.push(name, rows);
      const double dt = seconds_since(t0) * 1e9;
      if (r == tensorscope::PushResult::kPushed) (with ? labelled_ns : plain_ns).push_back(dt);
      if (i % 256 == 255) std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    const auto median = [](std::vector<double>& v) {
      std::sort(v.begin(), v.end());
      return v.empty() ? 0.0 : v[v.size() / 2];
    };
    const double plain = median(plain_ns), labelled = median(labelled_ns);
    std::printf(
        "push_bench: 64x128 float32 rows median %.0f ns, with 64 labels %.0f ns (ratio %.2f; %zu and %zu pushes)\n",
        plain, labelled, plain > 0 ? labelled / plain : 0.0, plain_ns.size(), labelled_ns.size());
  }
  sink.stop();
  std::error_code ec;
  ::rmdir(runtime_dir.c_str());
  return 0;
}
