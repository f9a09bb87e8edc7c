// worker_bench — frames per second one daemon worker turns into video, end to end.
//
// Starts tensorscoped with one worker, pushes N float32 tensors of 1M elements through a
// real Client (waiting, bench-only, when the ring is full, so every frame is rendered),
// and measures the time from the first push until the worker has rendered all N frames
// (from the daemon's status). render_bench gives the plotting-only rate to compare with.
//   worker_bench [frames]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <torch/torch.h>

#include <tensorscope/tensorscope.h>

#include "tensorscope/shared/message_channel.h"
#include "tensorscope/shared/runtime_paths.h"

namespace {

using Clock = std::chrono::steady_clock;

uint64_t frames_rendered(const std::string& runtime_dir, const std::string& session) {
  auto fd = tensorscope::connect_unix(tensorscope::session_socket_path(runtime_dir, session));
  if (!fd) return 0;
  tensorscope::MessageChannel channel(*fd);
  if (!channel.send({{"type", "status"}})) return 0;
  auto reply = channel.receive(5000);
  if (!reply || !reply->is_object()) return 0;
  uint64_t frames = 0;
  for (const auto& w : reply->value("workers", nlohmann::json::array())) {
    for (const auto& s : w.value("stats", nlohmann::json::object()).value("streams", nlohmann::json::array())) {
      frames += s.value("frames", uint64_t{0});
    }
  }
  return frames;
}

}  // namespace

int main(int argc, char** argv) {
  const int frames = argc > 1 ? std::atoi(argv[1]) : 300;
  const std::string base = "/tmp/ts-worker-bench-" + std::to_string(::getpid());
  const std::string runtime_dir = base + "/run", output = base + "/out", session = "wbench";
  const pid_t daemon = ::fork();
  if (daemon == 0) {
    ::execl(TENSORSCOPED_PATH, TENSORSCOPED_PATH, "--output", output.c_str(), "--session",
            session.c_str(), "--workers", "1", "--runtime-dir", runtime_dir.c_str(), "--log-level",
            "warn", nullptr);
    ::_exit(127);
  }
  tensorscope::Client client(tensorscope::ClientOptions()
                                 .session(session)
                                 .runtime_dir(runtime_dir)
                                 .shm_budget(uint64_t{256} << 20)
                                 .reconnect_interval_ms(10));
  const auto connect_deadline = Clock::now() + std::chrono::seconds(20);
  while (!client.connected() && Clock::now() < connect_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!client.connected()) {
    std::fprintf(stderr, "worker_bench: no daemon\n");
    ::kill(daemon, SIGKILL);
    return 1;
  }
  torch::manual_seed(0);
  std::vector<torch::Tensor> inputs;
  for (int i = 0; i < 8; ++i) inputs.push_back(torch::randn({1000, 1000}) * (1 + i * 0.1));

  const auto start = Clock::now();
  for (int i = 0; i < frames; ++i) {
    client.set_step(i);
    while (client.push("hist1m", inputs[static_cast<size_t>(i) % inputs.size()]) ==
           tensorscope::PushResult::kDroppedFull) {
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  }
  const double push_s = std::chrono::duration<double>(Clock::now() - start).count();
  uint64_t rendered = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(600);
  while ((rendered = frames_rendered(runtime_dir, session)) < static_cast<uint64_t>(frames) &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double total_s = std::chrono::duration<double>(Clock::now() - start).count();
  ::kill(daemon, SIGTERM);
  int status = 0;
  ::waitpid(daemon, &status, 0);
  std::printf("worker_bench: 1 worker, %d histogram frames of 1M float32 at 640x480 (H.264 when available)\n", frames);
  std::printf("  rendered %llu frames in %.2f s: %.1f frames/s end to end (pushing took %.2f s)\n",
              static_cast<unsigned long long>(rendered), total_s, rendered / total_s, push_s);
  std::printf("  daemon exit status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  std::string cleanup = "rm -rf " + base;
  return std::system(cleanup.c_str()) == 0 && rendered == static_cast<uint64_t>(frames) ? 0 : 1;
}
