// connect_bench — how soon a new training process gets its first push through, and how
// many pushes it loses at start.
//
// Each producer is this program re-executed with --producer: it waits for a common start
// time, constructs a tensorscope::Client (default options), then pushes a 1 KiB tensor
// every 2 ms, 500 times, and reports when its first push was accepted and which pushes
// were lost as not connected. Scenarios, each with 1, 4 and 8 producers started together:
//   daemon-first:   tensorscoped is up and answering status before the producers start;
//                   the figure is the time from `Client` construction to the first
//                   accepted push, and the pushes lost.
//   producer-first: the producers start, the daemon 300 ms later; the figure is the time
//                   from the daemon answering its first status request to each
//                   producer's first accepted push, and the pushes lost after that.
//   autostart:      no daemon; every producer has ClientOptions::autostart, so one of
//                   them starts the daemon; the figure is as in daemon-first.
//   connect_bench [--quick]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <tensorscope/tensorscope.h>

#include "tensorscope/shared/message_channel.h"
#include "tensorscope/shared/runtime_paths.h"

namespace {

using Clock = std::chrono::steady_clock;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

constexpr int kPushes = 500;
constexpr int kIntervalUs = 2000;

int run_producer(const std::string& session, const std::string& runtime_dir, int64_t start_ns, int rank,
                 const std::string& autostart_output) {
  while (now_ns() < start_ns) std::this_thread::sleep_for(std::chrono::microseconds(200));
  const torch::Tensor t = torch::ones({256});
  const int64_t t0 = now_ns();
  auto options = tensorscope::ClientOptions().session(session).runtime_dir(runtime_dir).rank(rank);
  if (!autostart_output.empty()) {
    options.autostart(true).autostart_output(autostart_output).autostart_idle_exit_ms(1000);
  }
  tensorscope::Client client(options);
  int64_t first_pushed_ns = -1;
  nlohmann::json lost = nlohmann::json::array();
  for (int i = 0; i < kPushes; ++i) {
    const int64_t at = now_ns();
    const auto result = client.push("x", t);
    if (result == tensorscope::PushResult::kPushed && first_pushed_ns < 0) first_pushed_ns = at;
    if (result == tensorscope::PushResult::kNotConnected) lost.push_back(at);
    std::this_thread::sleep_for(std::chrono::microseconds(kIntervalUs));
  }
  nlohmann::json out = {{"constructed_ns", t0}, {"first_pushed_ns", first_pushed_ns}, {"lost_ns", lost}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

pid_t spawn(const std::vector<std::string>& args, int stdout_fd) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (stdout_fd >= 0) ::dup2(stdout_fd, 1);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

bool daemon_answers(const std::string& runtime_dir, const std::string& session) {
  auto fd = tensorscope::connect_unix(tensorscope::session_socket_path(runtime_dir, session));
  if (!fd) return false;
  tensorscope::MessageChannel channel(*fd);
  if (!channel.send({{"type", "status"}})) return false;
  auto reply = channel.receive(2000);
  return reply && reply->is_object() && reply->value("type", "") == "status";
}

// Starts the daemon and returns when it answers status (the time it first answered in *ready_ns).
pid_t start_daemon(const std::string& runtime_dir, const std::string& session, const std::string& output,
                   int64_t* ready_ns) {
  const pid_t pid = spawn({TENSORSCOPED_PATH, "--output", output, "--session", session, "--runtime-dir", runtime_dir,
                           "--log-level", "error", "--workers", "2"},
                          -1);
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < deadline) {
    if (daemon_answers(runtime_dir, session)) {
      *ready_ns = now_ns();
      return pid;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  *ready_ns = -1;
  return pid;
}

void stop(pid_t pid) {
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

struct Sample {
  double first_ms = -1;  // from the scenario's reference time to the first accepted push
  int lost = 0;          // not-connected pushes at or after the reference time
  bool never = false;    // no push accepted at all
};

enum class Scenario { kDaemonFirst, kProducerFirst, kAutostart };

const char* scenario_name(Scenario s) {
  return s == Scenario::kDaemonFirst ? "daemon-first" : s == Scenario::kProducerFirst ? "producer-first" : "autostart";
}

// Runs one round with `producers` processes; the daemon is started before them
// (daemon-first), 300 ms after (producer-first), or by one of them (autostart).
std::vector<Sample> run_round(const std::string& self, int producers, Scenario scenario, int round) {
  const bool daemon_first = scenario != Scenario::kProducerFirst;
  const std::string base = "/tmp/ts-connect-bench-" + std::to_string(::getpid()) + "-" + std::to_string(round);
  const std::string runtime_dir = base + "/run", output = base + "/out", session = "cbench";
  int64_t ready_ns = -1;
  pid_t daemon = -1;
  if (scenario == Scenario::kDaemonFirst) daemon = start_daemon(runtime_dir, session, output, &ready_ns);
  // Every producer constructs its Client at this time: late enough for all of them to have
  // loaded libtorch by then (a 2-core machine needs a while for 8).
  const int64_t start_ns = now_ns() + 300'000'000 + int64_t{150'000'000} * producers;
  std::vector<std::pair<pid_t, int>> children;
  for (int p = 0; p < producers; ++p) {
    int fds[2];
    if (::pipe(fds) != 0) std::abort();
    const pid_t pid = spawn({self, "--producer", session, runtime_dir, std::to_string(start_ns), std::to_string(p),
                             scenario == Scenario::kAutostart ? output : ""},
                            fds[1]);
    ::close(fds[1]);
    children.emplace_back(pid, fds[0]);
  }
  if (scenario == Scenario::kProducerFirst) {
    std::this_thread::sleep_until(Clock::time_point(std::chrono::nanoseconds(start_ns + 300'000'000)));
    daemon = start_daemon(runtime_dir, session, output, &ready_ns);
  }
  std::vector<Sample> samples;
  for (auto& [pid, fd] : children) {
    std::string text;
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(fd, buffer, sizeof(buffer))) > 0) text.append(buffer, static_cast<size_t>(n));
    ::close(fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
    Sample s;
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      s.never = true;
      samples.push_back(s);
      continue;
    }
    const int64_t reference = daemon_first ? j["constructed_ns"].get<int64_t>() : ready_ns;
    const int64_t first = j["first_pushed_ns"].get<int64_t>();
    s.never = first < 0;
    if (!s.never) s.first_ms = static_cast<double>(first - reference) / 1e6;
    for (const auto& at : j["lost_ns"]) s.lost += at.get<int64_t>() >= reference ? 1 : 0;
    samples.push_back(s);
  }
  if (daemon > 0) stop(daemon);
  if (scenario == Scenario::kAutostart) {  // it exits by itself, 1 s after the producers
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (daemon_answers(runtime_dir, session) && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  std::string rm = "rm -rf '" + base + "'";
  (void)!std::system(rm.c_str());
  return samples;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 7 && std::strcmp(argv[1], "--producer") == 0) {
    return run_producer(argv[2], argv[3], std::atoll(argv[4]), std::atoi(argv[5]), argv[6]);
  }
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return 1;
  self[n] = '\0';
  std::printf("connect_bench: each producer pushes %d x 1 KiB, one every %d ms, from Client construction on\n", kPushes,
              kIntervalUs / 1000);
  std::printf("%-15s %9s %7s %12s %12s %14s %10s\n", "scenario", "producers", "rounds", "first p50 ms", "first p99 ms",
              "lost per prod", "never");
  for (const Scenario scenario : {Scenario::kDaemonFirst, Scenario::kProducerFirst, Scenario::kAutostart}) {
    for (const int producers : {1, 4, 8}) {
      const int rounds = quick ? 2 : std::max(3, 24 / producers);
      std::vector<double> firsts;
      int lost = 0, never = 0, total = 0;
      for (int r = 0; r < rounds; ++r) {
        for (const Sample& s : run_round(self, producers, scenario, r)) {
          ++total;
          lost += s.lost;
          if (s.never) {
            ++never;
          } else {
            firsts.push_back(s.first_ms);
          }
        }
      }
      std::printf("%-15s %9d %7d %12.1f %12.1f %14.1f %10d\n", scenario_name(scenario), producers, rounds,
                  percentile(firsts, 0.5), percentile(firsts, 0.99),
                  total > 0 ? static_cast<double>(lost) / total : 0.0, never);
      std::fflush(stdout);
    }
  }
  return 0;
}
