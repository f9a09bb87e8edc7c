// shutdown_test.cc — end-to-end: SIGTERM on a loaded machine with a backlog of frames the
// workers cannot draw before the shutdown timeout. What cannot be drawn is shed and said;
// every frame drawn is in a finalized, listed, playable video; no worker is killed with
// its videos.
#include <atomic>
#include <cstdio>
#include <regex>
#include <thread>

#include "integration_fixture.h"

namespace tensorscope::itest {
namespace {

// Threads that keep every core busy while they live (a loaded training node).
class CpuLoad {
 public:
  explicit CpuLoad(unsigned threads) {
    for (unsigned i = 0; i < threads; ++i) {
      threads_.emplace_back([this] {
        volatile uint64_t x = 0;
        while (!stop_.load(std::memory_order_relaxed)) x = x * 6364136223846793005ULL + 1;
      });
    }
  }
  ~CpuLoad() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

TEST_F(IntegrationTest, ShutdownWithABacklogFinalizesEveryFrameDrawn) {
  const std::string name = session("backlog");
  const std::string out = output_dir("backlog");
  // A second and a half to draw (half the timeout): far less than the backlog needs (about
  // 600 frames a second on a 2-core machine).
  DaemonProcess* daemon = start_ready_daemon(name, out, 2, write_config(1000, /*shutdown_timeout_ms=*/3000));
  ASSERT_NE(daemon, nullptr);
  const unsigned cores = std::max(2u, std::thread::hardware_concurrency());
  CpuLoad load(cores);
  ChildProcess* producer = start_producer(name, 0,
                                          {"--count", "2600", "--streams", "65", "--max-elements", "4096",
                                           "--no-pacing", "--ring-slots", "4096", "--budget", "268435456"});
  ASSERT_NE(producer, nullptr);
  const json line = final_line(producer);
  ASSERT_TRUE(line.is_object());
  EXPECT_GT(u64(line, "pushed"), 2000u) << line.dump();
  const double seconds = terminate_daemon(daemon, std::chrono::seconds(120));
  release_producer(producer);
  const std::string log = daemon->log();
  EXPECT_THAT(log, ::testing::Not(HasSubstr("did not finish in time")))
      << log.substr(log.size() > 4000 ? log.size() - 4000 : 0);
  EXPECT_LT(seconds, 3.0 + 30.0) << "the deadline is the shutdown timeout, with room for a loaded machine";
  const std::vector<json> files = index_or_fail(daemon->session_dir());
  verify_session_dir(daemon->session_dir(), files, /*every_video_listed=*/true);
  int64_t listed = 0;
  for (const auto& f : files) listed += f.value("frames", int64_t{0});
  EXPECT_GT(listed, 0) << "what was drawn is listed";
  // What was not drawn is said: frames queued and shed, records left unread in the ring.
  auto said = [&log](const char* pattern) {
    uint64_t n = 0;
    const std::regex re(pattern);
    for (std::sregex_iterator m(log.begin(), log.end(), re), end; m != end; ++m) n += std::stoull((*m)[1]);
    return n;
  };
  const uint64_t shed = said("shutdown: ([0-9]+) frame\\(s\\) not drawn");
  const uint64_t unread = said("([0-9]+) records left unread at shutdown");
  std::printf("pushed %llu: %lld frames listed, %llu shed, %llu unread; exit in %.1f s\n",
              static_cast<unsigned long long>(u64(line, "pushed")), static_cast<long long>(listed),
              static_cast<unsigned long long>(shed), static_cast<unsigned long long>(unread), seconds);
  EXPECT_GT(shed + unread, 0u) << "a backlog this large cannot be drawn in 1.5 s: it is cut, and said";
  // Every record drawn, shed or left unread (a render that failed would be none of them).
  EXPECT_LE(static_cast<uint64_t>(listed) + shed + unread, u64(line, "pushed"));
  EXPECT_GE(static_cast<uint64_t>(listed) + shed + unread, u64(line, "pushed") * 98 / 100);
}

}  // namespace
}  // namespace tensorscope::itest
