// track_bench — what Client::track_model / track_layer add to a CPU training step.
//
// For a small CNN, an MLP and a tiny MLP (where fixed costs show), times full training
// steps (zero_grad, forward, loss, backward, optimizer step, Client::next_step) under each
// configuration:
//   none                  no track: the baseline every ratio is taken against
//   none (control)        the baseline again: the ratio shows the run's noise floor
//   summaries             track_model and track_layer, every_n 10^6, stats_every 1: a
//                         summary of every module output and its gradient every step
//   summaries+n=100       the same with full tensors every 100 steps on top
//   observer only         track_model on an unrelated tiny module: the global op observer
//                         is installed and sees every op, but no op matches
//   track_model n=100     track_model on the model (every module with parameters), every_n 100
//   n=1 no tree log       track_model, every_n 1, TrackOptions::tree_log(false)
//   track_model n=1       the same with the module tree log (the default): every module
//                         output copied every step, and the step's module tree sent
//   model+layer n=1       track_model and track_layer, every_n 1: outputs and their gradients
//   (the configurations after "summaries+n=100" with stats_every 0: no summaries)
// Configurations run in blocks of 100 steps (so every_n 100 sends exactly once a block),
// interleaved in rounds, each round starting with a different one, so that drift of the
// machine affects every configuration alike; one untimed round warms up first. Tracks are
// created at the start of a block and destroyed at its end (neither is timed).
// An in-process sink (fake_daemon.h) registers the client exactly as the daemon does and
// drains the ring without rendering, so pushes are really copied into shared memory.
//
// glibc's malloc serves blocks above its (dynamic) mmap threshold with fresh mmaps, and
// libtorch's CPU allocator frees and reallocates the CNN's ~1 MB activations every step:
// the CNN's step time then jumps between about 5 and 15 ms in phases of seconds, which
// drowns the differences measured here. The benchmark therefore pins malloc's thresholds
// (mallopt) at start; --glibc-malloc keeps glibc's defaults.
//   track_bench [--quick] [--rounds R] [--threads T] [--verbose] [--glibc-malloc]
//     --verbose: also print each block's median, min and max
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include <tensorscope/tensorscope.h>

#include "fake_daemon.h"
#include "cnn_model.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kStepsPerBlock = 100;

// The CNN of examples/train_cnn.cc: 28x28x1 images, 10 classes.
using tensorscope_examples::Cnn;

// A three-layer MLP: in -> hidden -> hidden -> 10.
struct MlpImpl : torch::nn::Module {
  MlpImpl(int64_t in, int64_t hidden)
      : fc1(register_module("fc1", torch::nn::Linear(in, hidden))),
        fc2(register_module("fc2", torch::nn::Linear(hidden, hidden))),
        fc3(register_module("fc3", torch::nn::Linear(hidden, 10))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return fc3->forward(torch::relu(fc2->forward(torch::relu(fc1->forward(x)))));
  }
  torch::nn::Linear fc1, fc2, fc3;
};
TORCH_MODULE(Mlp);

enum class Config {
  kNone,
  kControl,
  kSummaries,
  kSummaries100,
  kObserverOnly,
  kModel100,
  kModel1NoTree,
  kModel1,
  kModelLayer1
};
const std::vector<Config> kConfigs = {Config::kNone,         Config::kControl,      Config::kSummaries,
                                      Config::kSummaries100, Config::kObserverOnly, Config::kModel100,
                                      Config::kModel1NoTree, Config::kModel1,       Config::kModelLayer1};

const char* name_of(Config c) {
  switch (c) {
    case Config::kNone: return "none";
    case Config::kControl: return "none (control)";
    case Config::kSummaries: return "summaries";
    case Config::kSummaries100: return "summaries+n=100";
    case Config::kObserverOnly: return "observer only";
    case Config::kModel100: return "track_model n=100";
    case Config::kModel1NoTree: return "n=1 no tree log";
    case Config::kModel1: return "track_model n=1";
    case Config::kModelLayer1: return "model+layer n=1";
  }
  return "?";
}

struct Samples {
  std::vector<double> step_ms;
  uint64_t steps = 0, pushed = 0, bytes = 0, dropped_full = 0, not_connected = 0, refused = 0;
};

// Runs one block of `steps` training steps under `config`; appends to `samples` when
// `record` (the warm-up round does not record).
void run_block(tensorscope::Client& client, torch::nn::Module& model, const torch::nn::Module& unrelated,
               const std::function<void()>& train_step, Config config, int steps, bool record, Samples* samples,
               bool verbose) {
  std::vector<tensorscope::TrackHandle> handles;
  const std::string name = "m";
  switch (config) {
    case Config::kNone:
    case Config::kControl: break;
    case Config::kSummaries:
    case Config::kSummaries100: {
      // A summary of every module output and its gradient every step; full tensors every
      // 100 steps on top, or (almost) never.
      const int64_t n = config == Config::kSummaries100 ? 100 : 1000000;
      handles.push_back(client.track_model(name, model, tensorscope::TrackOptions().every_n(n).stats_every(1)));
      handles.push_back(client.track_layer(name, model, tensorscope::TrackOptions().every_n(n).stats_every(1)));
      break;
    }
    case Config::kObserverOnly:
      handles.push_back(
          client.track_model("unrelated", unrelated, tensorscope::TrackOptions().every_n(1).stats_every(0)));
      break;
    case Config::kModel100:
      handles.push_back(client.track_model(name, model, tensorscope::TrackOptions().every_n(100).stats_every(0)));
      break;
    case Config::kModel1NoTree:
      handles.push_back(
          client.track_model(name, model, tensorscope::TrackOptions().every_n(1).tree_log(false).stats_every(0)));
      break;
    case Config::kModel1:
      handles.push_back(client.track_model(name, model, tensorscope::TrackOptions().every_n(1).stats_every(0)));
      break;
    case Config::kModelLayer1:
      handles.push_back(client.track_model(name, model, tensorscope::TrackOptions().every_n(1).stats_every(0)));
      handles.push_back(client.track_layer(name, model, tensorscope::TrackOptions().every_n(1).stats_every(0)));
      break;
  }
  for (const auto& h : handles) {
    if (!h.ok()) {
      std::fprintf(stderr, "track_bench: %s: track not set up: %s\n", name_of(config), h.error().c_str());
      std::exit(1);
    }
  }
  const tensorscope::ClientStats before = client.stats();
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(steps));
  for (int i = 0; i < steps; ++i) {
    const auto t0 = Clock::now();
    train_step();
    client.next_step();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  const tensorscope::ClientStats after = client.stats();
  handles.clear();  // untimed: removes the observer and hooks
  if (!record) return;
  if (verbose) {
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    std::printf("  block %-18s median %.3f ms  min %.3f  max %.3f\n", name_of(config), sorted[sorted.size() / 2],
                sorted.front(), sorted.back());
  }
  samples->step_ms.insert(samples->step_ms.end(), ms.begin(), ms.end());
  samples->steps += static_cast<uint64_t>(steps);
  samples->pushed += after.pushed - before.pushed;
  samples->bytes += after.bytes - before.bytes;
  samples->dropped_full += after.dropped_full - before.dropped_full;
  samples->not_connected += after.not_connected - before.not_connected;
  samples->refused += after.refused - before.refused;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// Times every configuration on one model and prints its rows of the table.
void bench_model(const char* label, tensorscope::Client& client, torch::nn::Module& model,
                 const std::function<void()>& train_step, int rounds, bool verbose) {
  torch::nn::Linear unrelated(4, 4);  // never called: only installs the op observer
  std::vector<Samples> samples(kConfigs.size());
  for (int round = -1; round < rounds; ++round) {  // round -1: untimed warm-up
    for (size_t k = 0; k < kConfigs.size(); ++k) {
      const size_t c = (k + static_cast<size_t>(std::max(round, 0))) % kConfigs.size();
      run_block(client, model, *unrelated, train_step, kConfigs[c], kStepsPerBlock, round >= 0, &samples[c], verbose);
    }
  }
  const double base_median = median(samples[0].step_ms);
  const double base_mean = mean(samples[0].step_ms);
  for (size_t c = 0; c < kConfigs.size(); ++c) {
    const Samples& s = samples[c];
    const double med = median(s.step_ms), avg = mean(s.step_ms);
    const double per_step = 1.0 / static_cast<double>(std::max<uint64_t>(s.steps, 1));
    std::printf("%-4s %-18s %9.3f %7.3f %9.1f %9.3f %7.3f %11.2f %12.0f %8llu %8llu\n", label, name_of(kConfigs[c]),
                med, med / base_median, (med - base_median) * 1e3, avg, avg / base_mean,
                static_cast<double>(s.pushed) * per_step, static_cast<double>(s.bytes) * per_step,
                static_cast<unsigned long long>(s.dropped_full),
                static_cast<unsigned long long>(s.not_connected + s.refused));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 8;
  bool verbose = false, glibc_malloc = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick")
      rounds = 2;
    else if (arg == "--verbose")
      verbose = true;
    else if (arg == "--glibc-malloc")
      glibc_malloc = true;
    else if (arg == "--rounds" && i + 1 < argc)
      rounds = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--threads" && i + 1 < argc)
      torch::set_num_threads(std::max(1, std::atoi(argv[++i])));
    else {
      std::fprintf(stderr, "usage: %s [--quick] [--rounds R] [--threads T] [--verbose] [--glibc-malloc]\n", argv[0]);
      return 2;
    }
  }

  // Fixed thresholds (this also turns off glibc's dynamic mmap threshold): blocks up to
  // 32 MiB come from the heap, which is neither trimmed nor grown by less than 64 MiB.
  const bool pinned = !glibc_malloc && mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 &&
      mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1 && mallopt(M_TOP_PAD, 64 << 20) == 1;

  const std::string runtime_dir = "/tmp/ts-track-bench-" + std::to_string(::getpid());
  tensorscope::testing::FakeDaemon sink(runtime_dir, "bench");
  if (auto st = sink.start(); !st) {
    std::fprintf(stderr, "track_bench: %s\n", st.message().c_str());
    return 1;
  }
  // A ring large enough that every_n 1 never finds it full (the sink drains it at once).
  auto owned_client = std::make_unique<tensorscope::Client>(tensorscope::ClientOptions()
                                                                .session("bench")
                                                                .runtime_dir(runtime_dir)
                                                                .shm_budget(uint64_t{256} << 20)
                                                                .reconnect_interval_ms(10));
  tensorscope::Client& client = *owned_client;
  if (!tensorscope::testing::wait_connected(client)) {
    std::fprintf(stderr, "track_bench: client did not connect\n");
    return 1;
  }

  torch::manual_seed(0);
  std::printf(
      "track_bench: CPU training step time with tracking vs without (same run), %d torch threads,\n"
      "  malloc %s, %d rounds x %d steps per configuration, interleaved; ratios to \"none\" of the same model\n",
      torch::get_num_threads(), pinned ? "thresholds pinned" : "glibc defaults", rounds, kStepsPerBlock);
  std::printf("%-4s %-18s %9s %7s %9s %9s %7s %11s %12s %8s %8s\n", "", "configuration", "median ms", "ratio", "+us",
              "mean ms", "ratio", "pushes/step", "bytes/step", "dropped", "other");

  {
    Cnn cnn;
    torch::optim::SGD optimizer(cnn->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    const torch::Tensor x = torch::randn({32, 1, 28, 28});
    const torch::Tensor y = torch::randint(0, 10, {32}, torch::kLong);
    bench_model(
        "cnn", client, *cnn,
        [&] {
          optimizer.zero_grad();
          torch::nn::functional::cross_entropy(cnn->forward(x), y).backward();
          optimizer.step();
        },
        rounds, verbose);
  }
  struct MlpCase {
    const char* label;
    int64_t batch, in, hidden;
  };
  for (const MlpCase& m : {MlpCase{"mlp", 64, 784, 256}, MlpCase{"tiny", 16, 32, 64}}) {
    Mlp mlp(m.in, m.hidden);
    torch::optim::SGD optimizer(mlp->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    const torch::Tensor x = torch::randn({m.batch, m.in});
    const torch::Tensor y = torch::randint(0, 10, {m.batch}, torch::kLong);
    bench_model(
        m.label, client, *mlp,
        [&] {
          optimizer.zero_grad();
          torch::nn::functional::cross_entropy(mlp->forward(x), y).backward();
          optimizer.step();
        },
        rounds, verbose);
  }
  std::printf(
      "cnn: batch 32 of 1x28x28, conv-bn-relu-pool x2, fc 784-64-10 (6 tracked modules);\n"
      "mlp: batch 64, fc 784-256-256-10; tiny: batch 16, fc 32-64-64-10 (3 tracked modules each).\n"
      "+us: median minus the median of none. other: not_connected + refused.\n");
  const auto s = client.stats();
  owned_client.reset();  // removes its segment, so that the runtime directory is empty
  sink.stop();
  std::printf("client: pushed %llu (%.1f MB), sink received %llu\n", static_cast<unsigned long long>(s.pushed),
              s.bytes / 1e6, static_cast<unsigned long long>(sink.received()));
  ::rmdir(runtime_dir.c_str());
  return 0;
}
