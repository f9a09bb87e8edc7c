// view_bench — what the live view costs and delivers, end to end, in one run.
//
// Real processes: tensorscoped (2 workers), test_producer (the training stand-in),
// `tensorscope view`, and a WebSocket client in this process that watches every tile as
// a page would (it counts frames on arrival; a browser adds its JPEG decode).
//   1. Render throughput, view off (live.max_fps 0, no viewer) vs on (live.max_fps 4, a
//      viewer and a client watching all 100 tiles): 100 streams, N frames pushed as fast
//      as the workers take them; frames/s until every frame is drawn, and the CPU seconds
//      of the daemon (supervisor + workers) and of the viewer. Off/on alternate, twice.
//   2. Delivery and lag: 100 streams (float32 vectors of 4096; two ranks of 50, so two
//      workers draw them) pushed at 2 frames/s each;
//      frames/s the client gets and the lag from push to arrival (p50, p99), and the part
//      of it that is the view's (from the frame being drawn to its arrival).
//   3. Memory: 1,000 streams; the viewer's resident memory and its frame store.
//   view_bench [frames=3000]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tensorscope/shared/status_query.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = boost::asio::ip::tcp;

std::string g_bin;  // build/bin
std::string g_runtime;

// Starts `args` with the bench's runtime dir; `stdin_fd`, when given, gets the write end
// of a pipe that is the child's stdin (test_producer --stdin-control stays connected
// until it is closed).
pid_t spawn(const std::vector<std::string>& args, const std::string& stdout_path = "/dev/null",
            int* stdin_fd = nullptr) {
  int fds[2] = {-1, -1};
  if (stdin_fd != nullptr && ::pipe(fds) != 0) return -1;
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (stdin_fd != nullptr) {
      ::dup2(fds[0], 0);
      ::close(fds[0]);
      ::close(fds[1]);
    }
    ::setenv("TENSORSCOPE_RUNTIME_DIR", g_runtime.c_str(), 1);
    std::FILE* out = std::freopen(stdout_path.c_str(), "w", stdout);
    (void)out;
    std::FILE* err = std::freopen("/dev/null", "w", stderr);
    (void)err;
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  if (stdin_fd != nullptr) {
    ::close(fds[0]);
    *stdin_fd = fds[1];
  }
  return pid;
}

void stop(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

// CPU seconds (user + system) of `pid` so far.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string f;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(f);
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return 0;
}

struct DaemonState {
  uint64_t frames = 0;
  std::vector<pid_t> pids;  // supervisor and workers
  bool ok = false;
};

DaemonState daemon_state(const std::string& session) {
  DaemonState s;
  auto reply = tensorscope::query_daemon_status(g_runtime, session, 5000);
  if (!reply) return s;
  s.ok = true;
  s.pids.push_back(reply->value("pid", 0));
  for (const auto& w : reply->value("workers", nlohmann::json::array())) {
    s.pids.push_back(w.value("pid", 0));
    for (const auto& st : w.value("stats", nlohmann::json::object()).value("streams", nlohmann::json::array())) {
      s.frames += st.value("frames", uint64_t{0});
    }
  }
  return s;
}

double cpu_of(const std::vector<pid_t>& pids) {
  double sum = 0;
  for (pid_t p : pids) sum += cpu_seconds(p);
  return sum;
}

std::string write_config(const std::string& dir, double max_fps, int video_width) {
  const std::string path =
      dir + "/config_" + std::to_string(static_cast<int>(max_fps)) + "_" + std::to_string(video_width) + ".yaml";
  std::ofstream(path) << "video:\n  max_frames: 100000\n  width: " << video_width
                      << "\n  height: " << video_width * 3 / 4 << "\nlive:\n  max_fps: " << max_fps << "\n";
  return path;
}

// A page: watches every tile, counts frames and their lag from push to arrival.
class WatchingClient {
 public:
  explicit WatchingClient(const std::string& url) {
    const size_t colon = url.rfind(':');
    port_ = url.substr(colon + 1, url.find('/', colon) - colon - 1);
    token_ = url.substr(url.find("#t=") + 3);
    thread_ = std::thread([this] { run(); });
  }
  ~WatchingClient() {
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
  }
  void reset_counts() {
    std::lock_guard<std::mutex> lock(mu_);
    frames_ = 0;
    lags_ms_.clear();
    view_lags_ms_.clear();
  }
  uint64_t frames() {
    std::lock_guard<std::mutex> lock(mu_);
    return frames_;
  }
  std::vector<double> lags() {
    std::lock_guard<std::mutex> lock(mu_);
    return lags_ms_;
  }
  std::vector<double> view_lags() {
    std::lock_guard<std::mutex> lock(mu_);
    return view_lags_ms_;
  }
  size_t tiles() const { return tiles_.load(); }

 private:
  void run() {
    try {
      boost::asio::io_context ioc;
      websocket::stream<tcp::socket> ws(ioc);
      tcp::resolver resolver(ioc);
      boost::asio::connect(ws.next_layer(), resolver.resolve("127.0.0.1", port_));
      ws.handshake("127.0.0.1:" + port_, "/ws?t=" + token_);
      timeval tv{0, 200000};
      ::setsockopt(ws.next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      while (!stopping_) {
        beast::flat_buffer buffer;
        beast::error_code ec;
        ws.read(buffer, ec);
        if (ec) {
          if (ec == beast::error::timeout || ec == boost::asio::error::would_block ||
              ec == boost::asio::error::try_again) {
            continue;
          }
          return;
        }
        const std::string bytes = beast::buffers_to_string(buffer.data());
        const auto now_ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();
        if (ws.got_binary()) {
          const uint32_t n = static_cast<uint8_t>(bytes[0]) | static_cast<uint8_t>(bytes[1]) << 8 |
              static_cast<uint8_t>(bytes[2]) << 16 | static_cast<uint32_t>(static_cast<uint8_t>(bytes[3])) << 24;
          const auto header = nlohmann::json::parse(bytes.substr(4, n));
          std::lock_guard<std::mutex> lock(mu_);
          ++frames_;
          const double push = header.value("push_ns", 0.0);
          if (push > 0) lags_ms_.push_back((static_cast<double>(now_ns) - push) / 1e6);
          const double drawn = header.value("render_ns", 0.0);
          if (drawn > 0) view_lags_ms_.push_back((static_cast<double>(now_ns) - drawn) / 1e6);
          continue;
        }
        const auto m = nlohmann::json::parse(bytes);
        if (m.value("type", "") != "tiles" || m["tiles"].size() == tiles_.load()) continue;
        nlohmann::json ids = nlohmann::json::array();
        for (const auto& t : m["tiles"]) ids.push_back(t["id"]);
        tiles_ = ids.size();
        ws.text(true);
        ws.write(boost::asio::buffer(nlohmann::json{{"type", "watch"}, {"tiles", ids}, {"cursor", nullptr}}.dump()));
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "view_bench: client: %s\n", e.what());
    }
  }

  std::string port_, token_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> tiles_{0};
  std::mutex mu_;
  uint64_t frames_ = 0;
  std::vector<double> lags_ms_;
  std::vector<double> view_lags_ms_;
};

std::string first_line(const std::string& path, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (Clock::now() < deadline) {
    std::ifstream in(path);
    std::string line;
    if (std::getline(in, line) && !line.empty() && in) return line;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return "";
}

bool wait_daemon(const std::string& session) {
  for (int i = 0; i < 200; ++i) {
    if (daemon_state(session).ok) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

struct Run {
  pid_t daemon = -1, viewer = -1;
  std::unique_ptr<WatchingClient> client;
  std::string session;
};

Run start_run(const std::string& dir, const std::string& session, double max_fps, bool view, int video_width = 640) {
  Run r;
  r.session = session;
  r.daemon = spawn({g_bin + "/tensorscoped", "--config", write_config(dir, max_fps, video_width), "--session", session,
                    "--output", dir + "/out", "--workers", "2"});
  if (!wait_daemon(session)) {
    std::fprintf(stderr, "view_bench: the daemon did not start\n");
    std::exit(1);
  }
  if (view) {
    const std::string url_file = dir + "/" + session + ".url";
    r.viewer = spawn({g_bin + "/tensorscope", "view", "--session", session}, url_file);
    const std::string url = first_line(url_file, 10000);
    if (url.empty()) {
      std::fprintf(stderr, "view_bench: the viewer printed no address\n");
      std::exit(1);
    }
    r.client = std::make_unique<WatchingClient>(url);
  }
  return r;
}

void end_run(Run& r) {
  r.client.reset();
  stop(r.viewer);
  stop(r.daemon);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

struct Throughput {
  double fps = 0, daemon_cpu = 0, viewer_cpu = 0;
  uint64_t delivered = 0;
};

Throughput throughput(const std::string& dir, int frames, bool view, int round) {
  Run r = start_run(dir, std::string(view ? "on" : "off") + std::to_string(round), view ? 4 : 0, view);
  const DaemonState before = daemon_state(r.session);
  const double cpu0 = cpu_of(before.pids), viewer0 = view ? cpu_seconds(r.viewer) : 0;
  const auto start = Clock::now();
  // The producer stays connected until every frame is drawn (its streams stay listed).
  int hold = -1;
  const pid_t producer = spawn({g_bin + "/test_producer", "--session", r.session, "--streams", "100", "--count",
                                std::to_string(frames), "--max-elements", "4096", "--ring-slots", "8192", "--budget",
                                "268435456", "--wait-connect-ms", "10000", "--stdin-control"},
                               "/dev/null", &hold);
  DaemonState now;
  double seconds = 0;
  uint64_t last_frames = 0;
  auto last_change = Clock::now();
  for (;;) {
    now = daemon_state(r.session);
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (now.frames >= static_cast<uint64_t>(frames)) break;
    if (now.frames != last_frames) {
      last_frames = now.frames;
      last_change = Clock::now();
    } else if (Clock::now() - last_change > std::chrono::seconds(10)) {
      std::fprintf(stderr, "view_bench: %llu of %d frames drawn, no progress for 10 s\n",
                   static_cast<unsigned long long>(now.frames), frames);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Throughput t;
  t.fps = static_cast<double>(now.frames) / seconds;
  t.daemon_cpu = cpu_of(now.pids) - cpu0;
  t.viewer_cpu = view ? cpu_seconds(r.viewer) - viewer0 : 0;
  t.delivered = r.client ? r.client->frames() : 0;
  ::close(hold);
  int status = 0;
  ::waitpid(producer, &status, 0);
  end_run(r);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const int frames = argc > 1 ? std::atoi(argv[1]) : 3000;
  g_bin = std::filesystem::canonical("/proc/self/exe").parent_path().string();
  const std::string dir = "/tmp/ts-view-bench-" + std::to_string(::getpid());
  g_runtime = dir + "/rt";
  std::filesystem::create_directories(g_runtime);
  std::filesystem::permissions(g_runtime, std::filesystem::perms::owner_all);
  std::signal(SIGPIPE, SIG_IGN);

  // 1. Render throughput, off and on, alternating.
  std::printf("1. render throughput, 100 streams, %d frames pushed as fast as taken (2 workers)\n", frames);
  std::vector<Throughput> off, on;
  for (int round = 0; round < 2; ++round) {
    off.push_back(throughput(dir, frames, false, round));
    on.push_back(throughput(dir, frames, true, round));
    std::printf(
        "   round %d: off %.0f frames/s (daemon %.2f CPU s) | on %.0f frames/s (daemon %.2f CPU s, viewer %.2f CPU s, %llu frames to the page)\n",
        round, off.back().fps, off.back().daemon_cpu, on.back().fps, on.back().daemon_cpu, on.back().viewer_cpu,
        static_cast<unsigned long long>(on.back().delivered));
  }
  auto mean = [](const std::vector<Throughput>& v, double Throughput::*field) {
    double s = 0;
    for (const auto& t : v) s += t.*field;
    return s / static_cast<double>(v.size());
  };
  std::printf("   view on / off: throughput %.3f, daemon CPU %.3f (+ viewer %.2f CPU s per %d frames)\n",
              mean(on, &Throughput::fps) / mean(off, &Throughput::fps),
              mean(on, &Throughput::daemon_cpu) / mean(off, &Throughput::daemon_cpu), mean(on, &Throughput::viewer_cpu),
              frames);

  // 2. Delivery and lag at 100 streams x 2 frames/s, with 640x480 videos and with 320x240
  // ones (drawing and encoding them costs about a quarter).
  for (const int video_width : {640, 320}) {
    Run r = start_run(dir, "lag" + std::to_string(video_width), 4, true, video_width);
    // Two ranks of 50 streams (a worker each: one producer's streams are drawn by one
    // worker's render thread).
    std::vector<pid_t> producers;
    for (int rank = 0; rank < 2; ++rank) {
      producers.push_back(
          spawn({g_bin + "/test_producer", "--session", r.session, "--rank", std::to_string(rank), "--streams", "50",
                 "--count", "1500", "--elements", "4096", "--sleep-us", "10000", "--wait-connect-ms", "10000"}));
    }
    std::this_thread::sleep_for(std::chrono::seconds(3));  // every tile known and watched
    r.client->reset_counts();
    const auto start = Clock::now();
    for (pid_t p : producers) {
      int status = 0;
      ::waitpid(p, &status, 0);
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const auto lags = r.client->lags();
    const auto view_lags = r.client->view_lags();
    std::printf(
        "2. %dx%d videos, 100 streams x 2 frames/s for %.1f s: %llu frames to the page (%.1f/s, %zu tiles)\n"
        "   lag from push to the page: p50 %.0f ms, p99 %.0f ms, max %.0f ms\n"
        "   of which the view (drawn frame to the page): p50 %.0f ms, p99 %.0f ms, max %.0f ms\n",
        video_width, video_width * 3 / 4, seconds, static_cast<unsigned long long>(r.client->frames()),
        static_cast<double>(r.client->frames()) / seconds, r.client->tiles(), percentile(lags, 0.5),
        percentile(lags, 0.99), percentile(lags, 1.0), percentile(view_lags, 0.5), percentile(view_lags, 0.99),
        percentile(view_lags, 1.0));
    end_run(r);
  }

  // 3. Memory with 1,000 streams.
  {
    Run r = start_run(dir, "mem", 4, true);
    const long rss0 = rss_kib(r.viewer);
    int hold = -1;
    const pid_t producer = spawn(
        {g_bin + "/test_producer", "--session", r.session, "--streams", "1000", "--count", "6000", "--max-elements",
         "1024", "--ring-slots", "8192", "--budget", "268435456", "--wait-connect-ms", "10000", "--stdin-control"},
        "/dev/null", &hold);
    for (int i = 0; i < 1200 && daemon_state(r.session).frames < 6000; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::this_thread::sleep_for(std::chrono::seconds(2));  // the viewer polls and the page catches up
    std::printf(
        "3. 1,000 streams, 6,000 frames: viewer resident memory %.1f MiB (%.1f MiB before), %zu tiles watched\n",
        static_cast<double>(rss_kib(r.viewer)) / 1024.0, static_cast<double>(rss0) / 1024.0, r.client->tiles());
    ::close(hold);
    int status = 0;
    ::waitpid(producer, &status, 0);
    end_run(r);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
