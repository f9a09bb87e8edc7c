// cuda_push_bench — what a push of a CUDA tensor costs, against a plain device-to-device
// copy of the same bytes in the same run, and what tracking costs a GPU training step.
//
// A daemon stand-in runs in its own process (ipc_sink: it reads CUDA IPC payloads with
// the daemon's DevicePayloadReader, or with --pinned tells the client to use the pinned
// host fallback). For 1 MiB to 1 GiB float tensors it prints the median time of
// push + synchronize of the tensor's stream and of copy_ + synchronize, and their
// ratio copy/push (1.0: the push costs the training stream as much as one copy). Then
// the step time of an MLP trained on cuda:0 with track_model at every_n 1 and 100, as
// a ratio to the untracked step, phases interleaved.
//   cuda_push_bench [--quick] [--pinned]
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
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

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The step-time ratio of a GPU MLP trained with track_model(every_n) over untracked.
double step_ratio(tensorscope::Client& client, int every_n, int64_t stats_every, int steps) {
  torch::manual_seed(1);
  torch::nn::Sequential net(torch::nn::Linear(1024, 2048), torch::nn::ReLU(), torch::nn::Linear(2048, 2048),
                            torch::nn::ReLU(), torch::nn::Linear(2048, 10));
  net->to(torch::kCUDA);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  const torch::Tensor x = torch::randn({256, 1024}, torch::kCUDA);
  const torch::Tensor y = torch::randint(0, 10, {256}, torch::TensorOptions().device(torch::kCUDA).dtype(torch::kLong));
  auto step = [&](int64_t i) {
    client.set_step(i);
    opt.zero_grad();
    torch::nn::functional::cross_entropy(net->forward(x), y).backward();
    opt.step();
  };
  std::vector<double> tracked, untracked;
  int64_t i = 0;
  for (int phase = 0; phase < 8; ++phase) {
    const bool on = phase % 2 == 1;
    tensorscope::TrackHandle handle;
    if (on) {
      handle = client.track_model("mlp", net, tensorscope::TrackOptions().every_n(every_n).stats_every(stats_every));
    }
    for (int s = 0; s < steps; ++s) {
      torch::cuda::synchronize();
      const auto t0 = Clock::now();
      step(i++);
      torch::cuda::synchronize();
      (on ? tracked : untracked).push_back(seconds(t0, Clock::now()));
    }
  }
  return median(tracked) / median(untracked);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, pinned = false;
  for (int i = 1; i < argc; ++i) {
    quick |= std::strcmp(argv[i], "--quick") == 0;
    pinned |= std::strcmp(argv[i], "--pinned") == 0;
  }
  if (!torch::cuda::is_available()) {
    std::printf("cuda_push_bench: no CUDA device here; nothing measured\n");
    return 0;
  }
  const std::string runtime_dir = "/tmp/ts-cuda-bench-" + std::to_string(::getpid());
  std::vector<std::string> args = {IPC_SINK_PATH, runtime_dir, "bench", "-"};
  if (pinned) args.push_back("--host-only");
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  pid_t sink = -1;
  if (posix_spawn(&sink, IPC_SINK_PATH, nullptr, nullptr, cargs.data(), environ) != 0) {
    std::fprintf(stderr, "cuda_push_bench: cannot start %s\n", IPC_SINK_PATH);
    return 1;
  }
  const uint64_t max_bytes = quick ? uint64_t{256} << 20 : uint64_t{1} << 30;
  tensorscope::Client client(tensorscope::ClientOptions()
                                 .session("bench")
                                 .runtime_dir(runtime_dir)
                                 .shm_budget(pinned ? max_bytes + (uint64_t{64} << 20) : uint64_t{64} << 20)
                                 .cuda_staging_bytes(2 * max_bytes)
                                 .reconnect_interval_ms(10));
  if (!tensorscope::testing::wait_connected(client)) {
    std::fprintf(stderr, "cuda_push_bench: client did not connect\n");
    kill(sink, SIGKILL);
    return 1;
  }
  std::printf("cuda_push_bench (%s): push + sync vs copy_ + sync of the same bytes, medians\n",
              pinned ? "pinned-host fallback" : "CUDA IPC");
  std::printf("%10s %12s %12s %10s %8s\n", "bytes", "copy ms", "push ms", "copy/push", "retries");
  for (uint64_t bytes = uint64_t{1} << 20; bytes <= max_bytes; bytes *= 4) {
    const torch::Tensor src = torch::randn({static_cast<int64_t>(bytes / 4)}, torch::kCUDA);
    torch::Tensor dst = torch::empty_like(src);
    const int reps = static_cast<int>(std::clamp<uint64_t>((uint64_t{4} << 30) / bytes, 5, quick ? 20 : 100));
    std::vector<double> copy_s, push_s;
    uint64_t retries = 0;
    tensorscope::PushResult failed = tensorscope::PushResult::kPushed;
    for (int r = -2; r < reps && failed == tensorscope::PushResult::kPushed; ++r) {  // two warm-up rounds
      torch::cuda::synchronize();
      auto t0 = Clock::now();
      dst.copy_(src);
      torch::cuda::synchronize();
      if (r >= 0) copy_s.push_back(seconds(t0, Clock::now()));
      for (;;) {
        torch::cuda::synchronize();
        t0 = Clock::now();
        const tensorscope::PushResult result = client.push("x", src);
        torch::cuda::synchronize();
        const double s = seconds(t0, Clock::now());
        if (result == tensorscope::PushResult::kPushed) {
          if (r >= 0) push_s.push_back(s);
          break;
        }
        // The sink still holds the pool (or the ring), or the client paces the stream to the
        // sink's draw (gated): wait for it, untimed, for at most 10 s. Anything else (a
        // tensor larger than the segment: refused) ends the table.
        const bool wait = result == tensorscope::PushResult::kDroppedFull || result == tensorscope::PushResult::kGated;
        if (!wait || ++retries > 10000) {
          failed = result;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    if (failed != tensorscope::PushResult::kPushed) {
      const tensorscope::ClientStats stats = client.stats();
      const std::string why = retries > 10000 ? "still " + std::string(tensorscope::to_string(failed)) +
              " after 10 s of retries; segment " + std::to_string(stats.shm_bytes >> 20) + " MiB"
                                              : stats.shm_note;
      std::printf("%7llu MiB: not measured, push %s (%s)\n", static_cast<unsigned long long>(bytes >> 20),
                  tensorscope::to_string(failed), why.c_str());
      break;
    }
    const double c = median(copy_s), p = median(push_s);
    std::printf("%7llu MiB %12.3f %12.3f %10.2f %8llu\n", static_cast<unsigned long long>(bytes >> 20), c * 1e3,
                p * 1e3, c / p, static_cast<unsigned long long>(retries));
  }
  const int steps = quick ? 20 : 100;
  std::printf("step time of a GPU MLP (1024-2048-2048-10, batch 256), tracked / untracked:\n");
  std::printf("  every_n=100:                  %.3f\n", step_ratio(client, 100, 1, steps));
  std::printf("  every_n=1:                    %.3f\n", step_ratio(client, 1, 1, steps));
  // The same without summaries (stats_every 0): the hooks and the copies alone.
  std::printf("  every_n=100, no summaries:    %.3f\n", step_ratio(client, 100, 0, steps));
  std::printf("  every_n=1, no summaries:      %.3f\n", step_ratio(client, 1, 0, steps));
  const tensorscope::ClientStats s = client.stats();
  std::printf("transport %s%s%s; pushed %llu, dropped_full %llu, refused %llu\n", s.cuda_transport.c_str(),
              s.cuda_note.empty() ? "" : ": ", s.cuda_note.c_str(), static_cast<unsigned long long>(s.pushed),
              static_cast<unsigned long long>(s.dropped_full), static_cast<unsigned long long>(s.refused));
  kill(sink, SIGTERM);
  waitpid(sink, nullptr, 0);
  return 0;
}
