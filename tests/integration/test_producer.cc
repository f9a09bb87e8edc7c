// test_producer — a training-process stand-in for the integration tests.
//
// Pushes --count tensors of varied shapes and all supported dtypes through a
// tensorscope::Client and prints its counters as one JSON line on stdout:
//   {"calls":N,"pushed":..,"gated":..,"dropped_full":..,"not_connected":..,"refused":..,
//    "bytes":..,"connections":..,"per_stream":{"name":pushed,...}}
// Options: --session S --runtime-dir D --rank R --count N --seed X --sleep-us U
//          --wait-connect-ms T (wait for the daemon before pushing; 0 = don't)
//          --streams K (distinct stream names) --max-elements E --budget BYTES
//          --ring-slots N (records the ring holds; default the client's)
//          --no-pacing (send every admitted call even while the daemon is behind)
//          --bad-inputs (also push a complex and an oversized tensor: must be refused)
//          --stdin-control: stop pushing when anything arrives on stdin (a line or EOF),
//                           print the final line, then keep the client connected until
//                           stdin reaches EOF (so the test can inspect the daemon's view
//                           of this producer before it goes away). With it, --count 0
//                           means "push until told to stop".
//          --report-ms T: while pushing, also print a progress line every T ms (same
//                         keys, "final":false); the last line printed has "final":true.
//          --track-model: instead of pushing random tensors, train a small CNN for
//                         --count steps with track_model and track_layer on it (every_n
//                         from --every-n) and push("loss") each step; "calls" then counts
//                         the loss pushes and "tracked" lists the tracked stream names.
//          --guard-sigbus: survive a truncation of our own segment (a test of the
//                          daemon's side; a real training process has no such guard)
//          --pattern: instead of random tensors, push per step one [3,5] tensor of each
//                     dtype, "p.<dtype>", with element k = (7 * step + k) % 100 (bool:
//                     k % 2), and "p.const" (float32, the same value every step);
//                     the tests recompute these values.
//          --reconnect-ms T (ClientOptions::reconnect_interval_ms, default 20)
//          --connect-timeout-ms T (ClientOptions::connect_timeout_ms; default: the option's)
//          --autostart [--autostart-output DIR] [--idle-exit-ms T] [--daemon PATH]
//                     (ClientOptions::autostart and its companions)
// The JSON line also carries the client's notes: shm_bytes, shm_note, connection_note,
// autostart.
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <tensorscope/tensorscope.h>

#include "tensorscope/shared/sigbus_guard.h"

namespace {

const std::vector<torch::Dtype> kDtypes = {torch::kFloat32, torch::kFloat64, torch::kFloat16, torch::kBFloat16,
                                           torch::kInt8,    torch::kInt16,   torch::kInt32,   torch::kInt64,
                                           torch::kUInt8,   torch::kBool};

torch::Tensor make_tensor(std::mt19937& rng, int64_t max_elements, torch::Dtype dtype) {
  const int ndim = static_cast<int>(rng() % 4);  // 0-d to 3-d
  std::vector<int64_t> shape;
  int64_t numel = 1;
  for (int d = 0; d < ndim; ++d) {
    const int64_t limit = std::max<int64_t>(1, max_elements / numel);
    const int64_t size = static_cast<int64_t>(rng() % std::min<int64_t>(limit, 64) + 1);
    shape.push_back(size);
    numel *= size;
  }
  torch::Tensor t = torch::randn(shape) * 10;
  if (dtype == torch::kBool) return t > 0;
  if (dtype == torch::kUInt8) return t.abs().to(dtype);
  torch::Tensor out = t.to(dtype);
  // Sometimes a non-contiguous view, to exercise the strided copy.
  if (ndim >= 2 && rng() % 3 == 0) out = out.transpose(0, 1);
  return out;
}

// The --pattern tensor of `step` and `dtype`: [3,5], element k = (7 * step + k) % 100
// (bool: k % 2), exact in every dtype.
torch::Tensor pattern_tensor(int64_t step, torch::Dtype dtype) {
  if (dtype == torch::kBool) return (torch::arange(15) % 2).reshape({3, 5}).to(torch::kBool);
  return ((torch::arange(15) + 7 * step) % 100).reshape({3, 5}).to(dtype);
}

// Conv2d -> BatchNorm2d -> ReLU -> Flatten -> Linear, trained on random data.
torch::nn::Sequential make_model() {
  return torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 3)), torch::nn::BatchNorm2d(4),
                               torch::nn::ReLU(), torch::nn::Flatten(), torch::nn::Linear(4 * 6 * 6, 3));
}

// One training step; returns the loss.
torch::Tensor train_step(torch::nn::Sequential& model, torch::optim::SGD& optimizer) {
  const torch::Tensor x = torch::randn({8, 1, 8, 8});
  const torch::Tensor target = torch::randint(0, 3, {8}, torch::kLong);
  optimizer.zero_grad();
  torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), target);
  loss.backward();
  optimizer.step();
  return loss;
}

}  // namespace

int main(int argc, char** argv) {
  std::string session = "default", runtime_dir;
  int rank = 0, streams = 4;
  int64_t count = 100, max_elements = 4096, sleep_us = 0, wait_connect_ms = 10000, seed = 1;
  int64_t elements = 0;  // > 0: every push a float32 vector of this many elements (one mode per stream)
  uint64_t budget = 32u << 20;
  uint32_t ring_slots = 0;  // 0: the client's default
  bool bad_inputs = false, stdin_control = false, track_model = false, pattern = false, pacing = true;
  int64_t every_n = 1;
  int64_t report_ms = 0;
  int reconnect_ms = 20, connect_timeout_ms = -1, idle_exit_ms = -1;
  bool autostart = false;
  std::string autostart_output, daemon_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--session")
      session = next();
    else if (a == "--runtime-dir")
      runtime_dir = next();
    else if (a == "--rank")
      rank = std::atoi(next().c_str());
    else if (a == "--count")
      count = std::atoll(next().c_str());
    else if (a == "--seed")
      seed = std::atoll(next().c_str());
    else if (a == "--sleep-us")
      sleep_us = std::atoll(next().c_str());
    else if (a == "--wait-connect-ms")
      wait_connect_ms = std::atoll(next().c_str());
    else if (a == "--streams")
      streams = std::atoi(next().c_str());
    else if (a == "--max-elements")
      max_elements = std::atoll(next().c_str());
    else if (a == "--elements")
      elements = std::atoll(next().c_str());
    else if (a == "--budget")
      budget = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--ring-slots")
      ring_slots = static_cast<uint32_t>(std::strtoul(next().c_str(), nullptr, 10));
    else if (a == "--no-pacing")
      pacing = false;
    else if (a == "--bad-inputs")
      bad_inputs = true;
    else if (a == "--stdin-control")
      stdin_control = true;
    else if (a == "--report-ms")
      report_ms = std::atoll(next().c_str());
    else if (a == "--track-model")
      track_model = true;
    else if (a == "--pattern")
      pattern = true;
    else if (a == "--guard-sigbus")
      tensorscope::install_sigbus_guard();
    else if (a == "--every-n")
      every_n = std::atoll(next().c_str());
    else if (a == "--reconnect-ms")
      reconnect_ms = std::atoi(next().c_str());
    else if (a == "--connect-timeout-ms")
      connect_timeout_ms = std::atoi(next().c_str());
    else if (a == "--autostart")
      autostart = true;
    else if (a == "--autostart-output")
      autostart_output = next();
    else if (a == "--idle-exit-ms")
      idle_exit_ms = std::atoi(next().c_str());
    else if (a == "--daemon")
      daemon_path = next();
    else {
      std::fprintf(stderr, "test_producer: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (count <= 0 && !stdin_control) {
    std::fprintf(stderr, "test_producer: --count must be > 0 without --stdin-control\n");
    return 2;
  }
  torch::manual_seed(static_cast<uint64_t>(seed));
  std::mt19937 rng(static_cast<uint32_t>(seed));
  auto options = tensorscope::ClientOptions()
                     .session(session)
                     .runtime_dir(runtime_dir)
                     .rank(rank)
                     .shm_budget(budget)
                     .reconnect_interval_ms(reconnect_ms)
                     .autostart(autostart)
                     .daemon_executable(daemon_path);
  if (connect_timeout_ms >= 0) options.connect_timeout_ms(connect_timeout_ms);
  if (ring_slots > 0) options.ring_slots(ring_slots);
  options.pacing(pacing);
  if (!autostart_output.empty()) options.autostart_output(autostart_output);
  if (idle_exit_ms >= 0) options.autostart_idle_exit_ms(idle_exit_ms);
  tensorscope::Client client(options);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_connect_ms);
  while (wait_connect_ms > 0 && !client.connected() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  client.set_label("rank " + std::to_string(rank) + " test run");
  std::map<std::string, int64_t> per_stream;
  std::string tracked = "[]";
  int64_t calls = 0;
  int64_t expected_refusals = 0;
  auto print_line = [&](bool final) {
    const auto s = client.stats();
    nlohmann::json line = {{"calls", calls},
                           {"pushed", s.pushed},
                           {"gated", s.gated},
                           {"dropped_full", s.dropped_full},
                           {"not_connected", s.not_connected},
                           {"refused", s.refused},
                           {"expected_refusals", expected_refusals},
                           {"bytes", s.bytes},
                           {"connections", s.connections},
                           {"dropped_by_daemon", s.dropped_by_daemon},
                           {"connected", s.connected},
                           {"final", final},
                           {"per_stream", per_stream},
                           {"tracked", nlohmann::json::parse(tracked)},
                           {"shm_bytes", s.shm_bytes},
                           {"shm_note", s.shm_note},
                           {"connection_note", s.connection_note},
                           {"autostart", s.autostart}};
    std::printf("%s\n", line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    std::fflush(stdout);
  };
  // True once stdin has data or reached EOF (the test's "stop pushing").
  auto stop_requested = [&]() {
    if (!stdin_control) return false;
    pollfd p{0, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
  };
  if (track_model) {
    torch::nn::Sequential model = make_model();
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    const auto options = tensorscope::TrackOptions().every_n(every_n);
    tensorscope::TrackHandle outputs = client.track_model("model", model, options);
    tensorscope::TrackHandle grads = client.track_layer("model", model, options);
    tracked = "[";
    for (const auto& s : client.tracked()) tracked += (tracked.size() > 1 ? ",\"" : "\"") + s.name + "\"";
    tracked += "]";
    for (int64_t step = 0; step < count; ++step) {
      const torch::Tensor loss = train_step(model, optimizer);
      ++calls;
      if (client.push("loss", loss.detach()) == tensorscope::PushResult::kPushed) ++per_stream["loss"];
      client.next_step();
    }
    print_line(true);
    count = 0;
  }
  auto next_report = std::chrono::steady_clock::now();
  for (int64_t i = 0; !track_model && (count <= 0 || i < count); ++i) {
    if (stop_requested()) break;
    client.set_step(i);
    const auto dtype = kDtypes[static_cast<size_t>(i) % kDtypes.size()];
    if (pattern) {
      for (const auto type : kDtypes) {
        const std::string name = std::string("p.") + c10::toString(type);
        ++calls;
        if (client.push(name, pattern_tensor(i, type)) == tensorscope::PushResult::kPushed) ++per_stream[name];
      }
      ++calls;
      if (client.push("p.const", torch::full({4}, 2.5f)) == tensorscope::PushResult::kPushed) ++per_stream["p.const"];
      if (sleep_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
      continue;
    }
    const std::string name = "r" + std::to_string(rank) + ".s" + std::to_string(i % streams);
    torch::Tensor t = elements > 0 ? torch::randn({elements}) : make_tensor(rng, max_elements, dtype);
    ++calls;
    if (client.push(name, t) == tensorscope::PushResult::kPushed) ++per_stream[name];
    if (report_ms > 0 && std::chrono::steady_clock::now() >= next_report) {
      print_line(false);
      next_report = std::chrono::steady_clock::now() + std::chrono::milliseconds(report_ms);
    }
    if (sleep_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
  }
  if (bad_inputs) {
    ++calls;
    ++expected_refusals;
    client.push("bad.complex", torch::randn({4, 4}, torch::kComplexFloat));
    ++calls;
    ++expected_refusals;
    client.push("bad.too_large", torch::zeros({static_cast<int64_t>(budget)}, torch::kUInt8));
  }
  if (!track_model) print_line(true);
  if (stdin_control) {
    // Stay connected until the test closes our stdin.
    char buffer[256];
    for (;;) {
      const ssize_t n = ::read(0, buffer, sizeof(buffer));
      if (n == 0 || (n < 0 && errno != EINTR)) break;
    }
  }
  return 0;
}
