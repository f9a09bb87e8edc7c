// worker_bench — frames per second the daemon turns into video for one training process,
// end to end, with 1 and with 2 render threads (and 2 workers).
//
// Starts tensorscoped, pushes float32 tensors through a real Client (waiting, bench-only,
// when the ring is full, so every frame is rendered; pacing off). After a warm-up (every
// stream's first frame, which opens its video), measures the time from the next push until
// the daemon's status reports every frame rendered, and the CPU time the daemon's
// processes and the producer spent meanwhile. Two loads:
//   - one stream, a vector of 1M elements (histograms): reduction on the reader thread is
//     a large part of each frame, and one stream is drawn by one thread;
//   - one producer with many streams of 64x128 floats (heatmaps, the shape of a layer's
//     activations): drawing and encoding dominate, so render threads matter.
// Each configuration runs `rounds` times, alternating, and the best round counts.
//   worker_bench [--quick]
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include <tensorscope/tensorscope.h>

#include "tensorscope/shared/message_channel.h"
#include "tensorscope/shared/runtime_paths.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Load {
  const char* what;
  int streams;
  int64_t rows, cols;
  int frames;  // in all, over the streams
};

struct Setup {
  int workers;
  int render_threads;
};

struct Status {
  uint64_t frames = 0;
  std::vector<uint64_t> per_worker;  // records each worker received
  std::vector<int> worker_pids;
  double daemon_cpu_s = 0;    // the daemon's processes, user + system, while timed
  double producer_cpu_s = 0;  // this process, while timed
};

// User + system CPU seconds of the supervisor `daemon` and its workers, all threads.
double processes_cpu_s(pid_t daemon, const std::vector<int>& workers) {
  double total = 0;
  std::vector<int> pids = workers;
  pids.push_back(static_cast<int>(daemon));
  for (int pid : pids) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(text.substr(close + 2));
    std::string field;
    double utime = 0, stime = 0;
    for (int i = 3; i <= 15 && (fields >> field); ++i) {  // fields 14 and 15: utime, stime
      if (i == 14) utime = std::stod(field);
      if (i == 15) stime = std::stod(field);
    }
    total += (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }
  return total;
}

double cpu_seconds(int who) {
  rusage u{};
  ::getrusage(who, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

Status daemon_status(const std::string& runtime_dir, const std::string& session) {
  Status out;
  auto fd = tensorscope::connect_unix(tensorscope::session_socket_path(runtime_dir, session));
  if (!fd) return out;
  tensorscope::MessageChannel channel(*fd);
  if (!channel.send({{"type", "status"}})) return out;
  auto reply = channel.receive(5000);
  if (!reply || !reply->is_object()) return out;
  for (const auto& w : reply->value("workers", nlohmann::json::array())) {
    const auto stats = w.value("stats", nlohmann::json::object());
    out.per_worker.push_back(stats.value("records", uint64_t{0}));
    out.worker_pids.push_back(w.value("pid", 0));
    for (const auto& s : stats.value("streams", nlohmann::json::array())) out.frames += s.value("frames", uint64_t{0});
  }
  return out;
}

// Frames per second for `load` under `setup`; 0 when it did not complete.
double run(const Load& load, const Setup& setup, const std::vector<torch::Tensor>& inputs, Status* final_status) {
  static int runs = 0;
  const std::string base = "/tmp/ts-worker-bench-" + std::to_string(::getpid()) + "-" + std::to_string(runs++);
  const std::string runtime_dir = base + "/run", output = base + "/out", session = "wbench";
  const std::string config = base + ".yaml";
  std::ofstream(config) << "workers: " << setup.workers << "\nrender_threads: " << setup.render_threads
                        << "\nlog_level: warn\nlimits:\n  max_open_videos_per_worker: 256\n";
  const pid_t daemon = ::fork();
  if (daemon == 0) {
    ::execl(TENSORSCOPED_PATH, TENSORSCOPED_PATH, "--config", config.c_str(), "--output", output.c_str(), "--session",
            session.c_str(), "--runtime-dir", runtime_dir.c_str(), nullptr);
    ::_exit(127);
  }
  double fps = 0;
  {
    tensorscope::Client client(tensorscope::ClientOptions()
                                   .session(session)
                                   .runtime_dir(runtime_dir)
                                   .shm_budget(uint64_t{256} << 20)
                                   .pacing(false)
                                   .reconnect_interval_ms(10));
    const auto connect_deadline = Clock::now() + std::chrono::seconds(20);
    while (!client.connected() && Clock::now() < connect_deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (client.connected()) {
      std::vector<std::string> names;
      for (int s = 0; s < load.streams; ++s) names.push_back("layer" + std::to_string(s) + ".out");
      auto push_frames = [&](int first, int last) {
        for (int i = first; i < last; ++i) {
          const size_t s = static_cast<size_t>(i % load.streams);
          client.set_step(i / load.streams);
          while (client.push(names[s], inputs[static_cast<size_t>(i) % inputs.size()]) ==
                 tensorscope::PushResult::kDroppedFull) {
            std::this_thread::sleep_for(std::chrono::microseconds(200));
          }
        }
      };
      auto wait_frames = [&](uint64_t frames) {
        const auto deadline = Clock::now() + std::chrono::seconds(600);
        while ((*final_status = daemon_status(runtime_dir, session)).frames < frames && Clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        return final_status->frames >= frames;
      };
      // Warm-up, not timed: every stream's first frame (its video and encoder opened).
      push_frames(0, load.streams);
      if (wait_frames(static_cast<uint64_t>(load.streams))) {
        const Status warm = *final_status;
        const double daemon_before = processes_cpu_s(daemon, warm.worker_pids);
        const double self_before = cpu_seconds(RUSAGE_SELF);
        const auto start = Clock::now();
        push_frames(load.streams, load.streams + load.frames);
        const bool done = wait_frames(static_cast<uint64_t>(load.streams + load.frames));
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        final_status->producer_cpu_s = cpu_seconds(RUSAGE_SELF) - self_before;
        final_status->daemon_cpu_s = processes_cpu_s(daemon, warm.worker_pids) - daemon_before;
        if (done) fps = load.frames / seconds;
      }
    }
  }
  ::kill(daemon, SIGTERM);
  int status = 0;
  ::waitpid(daemon, &status, 0);
  std::string cleanup = "rm -rf " + base + " " + config;
  (void)std::system(cleanup.c_str());
  return fps;
}

std::string per_worker_text(const Status& s) {
  std::string out;
  for (uint64_t r : s.per_worker) out += (out.empty() ? "" : "/") + std::to_string(r);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int rounds = quick ? 1 : 3;
  torch::manual_seed(0);
  const std::vector<Load> loads = {
      {"1 stream, 1M float32 vector, histogram", 1, 1, 1000000, quick ? 100 : 300},
      {"48 streams, 64x128 float32, heatmap", 48, 64, 128, quick ? 480 : 1920},
  };
  const std::vector<Setup> setups = {{1, 1}, {1, 2}, {2, 0}};
  std::printf("worker_bench: one producer, 640x480 frames (H.264 when available), %u CPUs, best of %d\n",
              std::thread::hardware_concurrency(), rounds);
  std::printf(
      "| load | workers x render threads | frames/s | records per worker | CPU s daemon / producer | vs 1x1 |\n"
      "|---|---|---|---|---|---|\n");
  bool ok = true;
  for (const Load& load : loads) {
    std::vector<torch::Tensor> inputs;
    for (int i = 0; i < 8; ++i) {
      const torch::Tensor t = load.rows == 1 ? torch::randn({load.cols}) : torch::randn({load.rows, load.cols});
      inputs.push_back(t * (1 + i * 0.1));
    }
    std::vector<double> best(setups.size(), 0);
    std::vector<Status> status(setups.size());
    for (int r = 0; r < rounds; ++r) {
      for (size_t k = 0; k < setups.size(); ++k) {
        Status s;
        const double fps = run(load, setups[k], inputs, &s);
        if (fps == 0) ok = false;
        if (fps > best[k]) {
          best[k] = fps;
          status[k] = s;
        }
      }
    }
    for (size_t k = 0; k < setups.size(); ++k) {
      const std::string threads = setups[k].render_threads == 0 ? "auto" : std::to_string(setups[k].render_threads);
      std::printf("| %s | %d x %s | %.1f | %s | %.2f / %.2f | %.2f |\n", load.what, setups[k].workers, threads.c_str(),
                  best[k], per_worker_text(status[k]).c_str(), status[k].daemon_cpu_s, status[k].producer_cpu_s,
                  best[0] > 0 ? best[k] / best[0] : 0.0);
    }
  }
  return ok ? 0 : 1;
}
