// live_publisher_test.cc — a worker's live frames: no board until a page watches, board
// size within the free shared memory, at most live.max_fps per stream, readable JPEGs on the board; the daemon's own
// view gets the session's directory and the live.* keys.
#include "worker/live_publisher.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <thread>

#include "live_view.h"
#include "temp_dir.h"
#include "worker/stream_video.h"

namespace tensorscope::daemon {
namespace {

TEST(LivePublisherTest, TheBoardYieldsToTheTrainingsSharedMemory) {
  EXPECT_EQ(live_board_capacity(8, uint64_t{64} << 30), uint64_t{8} << 20);  // plenty: as configured
  EXPECT_EQ(live_board_capacity(8, uint64_t{64} << 20), uint64_t{4} << 20);  // a 64 MiB /dev/shm
  EXPECT_EQ(live_board_capacity(8, 1 << 20), 64u << 10);                     // the smallest board
  EXPECT_EQ(live_board_capacity(8, (1 << 20) - 1024), 0u);                   // too little: none
  EXPECT_EQ(live_board_capacity(8, 0), 0u);
  EXPECT_EQ(live_board_capacity(1, uint64_t{1} << 40), uint64_t{1} << 20);
}

TEST(LivePublisherTest, FramesReachTheBoardAtMostMaxFpsPerStream) {
  testing::TempDir dir("live");
  DaemonConfig config;
  config.runtime_dir = dir.path();
  config.session = "pub";
  config.live.max_fps = 2;  // one frame per 500 ms per stream
  config.live.width = 0;    // whole frames
  ::chmod(dir.path().c_str(), 0700);
  ASSERT_TRUE(view::touch_watch_file(dir.path() + "/pub.live.watched"));  // a page watches
  auto publisher = LivePublisher::create(config, 3);
  ASSERT_NE(publisher, nullptr);
  EXPECT_FALSE(publisher->has_board());  // made with the first frame to write
  const cv::Mat frame(120, 160, CV_8UC3, cv::Scalar(10, 200, 30));
  StreamKey a{1, 77, "model.fc1", "cpu", 2, "histogram"};
  StreamKey b{1, 77, "model.fc1.grad", "cpu", 2, "histogram"};
  int64_t last_a = 0, last_b = 0;
  for (int step = 0; step < 10; ++step) {  // well within 500 ms: one frame each
    publisher->offer(a, "output", step, 1000 + step, step + 1, frame, "", &last_a);
    publisher->offer(b, "grad", step, 1000 + step, step + 1, frame, "", &last_b);
  }
  publisher->flush();
  EXPECT_TRUE(publisher->has_board());
  auto reader = view::LiveBoardReader::open(dir.path() + "/pub.live.3");
  ASSERT_TRUE(reader.is_ok()) << reader.message();
  std::vector<view::LiveFrame> frames;
  (*reader)->poll(&frames);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].stream, "model.fc1");
  EXPECT_EQ(frames[0].kind, "output");
  EXPECT_EQ(frames[0].step, 0);
  EXPECT_EQ(frames[0].rank, 2);
  EXPECT_EQ(frames[0].producer_pid, 77);
  EXPECT_EQ(frames[0].push_unix_ns, 1000u);
  EXPECT_EQ(frames[1].stream, "model.fc1.grad");
  const cv::Mat decoded =
      cv::imdecode(std::vector<uchar>(frames[0].jpeg.begin(), frames[0].jpeg.end()), cv::IMREAD_COLOR);
  ASSERT_FALSE(decoded.empty());
  EXPECT_EQ(decoded.cols, 160);
  EXPECT_EQ(decoded.rows, 120);
  EXPECT_NEAR(decoded.at<cv::Vec3b>(60, 80)[1], 200, 8);
  std::this_thread::sleep_for(std::chrono::milliseconds(550));
  publisher->offer(a, "output", 42, 2000, 11, frame, "", &last_a);
  publisher->flush();
  frames.clear();
  (*reader)->poll(&frames);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].step, 42);
  EXPECT_EQ(publisher->published(), 3u);
  EXPECT_EQ(publisher->skipped(), 0u);
  publisher.reset();  // a worker that exits removes its board
  struct stat st {};
  EXPECT_NE(::stat((dir.path() + "/pub.live.3").c_str(), &st), 0);
}

TEST(LivePublisherTest, ABusyEncoderKeepsOnlyTheNewestFrameOfAStream) {
  testing::TempDir dir("live");
  ::chmod(dir.path().c_str(), 0700);
  DaemonConfig config;
  config.runtime_dir = dir.path();
  config.session = "busy";
  config.live.max_fps = 60;
  ASSERT_TRUE(view::touch_watch_file(dir.path() + "/busy.live.watched"));
  auto publisher = LivePublisher::create(config, 0);
  ASSERT_NE(publisher, nullptr);
  const cv::Mat frame(480, 640, CV_8UC3, cv::Scalar(1, 2, 3));
  int64_t last[40] = {};
  uint64_t offered = 0;
  for (int round = 0; round < 3; ++round) {
    for (int s = 0; s < 40; ++s) {  // more streams than the pending cap, faster than encoding
      StreamKey key{1, 5, "s" + std::to_string(s), "cpu", 0, "line"};
      last[s] = 0;  // as if each offer came after the stream's interval
      publisher->offer(key, "output", round, 0, 1, frame, "", &last[s]);
      ++offered;
    }
  }
  publisher->flush();
  const uint64_t published = publisher->published();
  EXPECT_GT(published, 0u);
  EXPECT_EQ(published + publisher->skipped(), offered);  // each frame encoded or counted
  auto reader = view::LiveBoardReader::open(dir.path() + "/busy.live.0");
  ASSERT_TRUE(reader.is_ok());
  std::vector<view::LiveFrame> frames;
  (*reader)->poll(&frames);
  EXPECT_EQ(frames.size(), published);
}

TEST(LivePublisherTest, NothingIsTakenWhileNoPageWatchesAndFramesAreScaled) {
  testing::TempDir dir("live");
  ::chmod(dir.path().c_str(), 0700);
  DaemonConfig config;
  config.runtime_dir = dir.path();
  config.session = "quiet";
  config.live.max_fps = 60;
  config.live.width = 320;
  auto publisher = LivePublisher::create(config, 0);
  ASSERT_NE(publisher, nullptr);
  const cv::Mat frame(480, 640, CV_8UC3, cv::Scalar(1, 2, 3));
  StreamKey key{1, 5, "s", "cpu", 0, "line"};
  int64_t last = 0;
  publisher->offer(key, "output", 0, 0, 1, frame, "", &last);
  publisher->flush();
  EXPECT_EQ(publisher->published(), 0u);  // no watch file: nothing taken
  EXPECT_EQ(last, 0);
  // Nor any shared memory: the board is made once a frame is to be written.
  struct stat st {};
  EXPECT_NE(::stat((dir.path() + "/quiet.live.0").c_str(), &st), 0);
  EXPECT_FALSE(publisher->has_board());
  // A page opens; the worker looks again at most a second later.
  ASSERT_TRUE(view::touch_watch_file(dir.path() + "/quiet.live.watched"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1050));
  publisher->offer(key, "output", 1, 0, 2, frame, "", &last);
  publisher->flush();
  ASSERT_EQ(publisher->published(), 1u);
  auto reader = view::LiveBoardReader::open(dir.path() + "/quiet.live.0");
  ASSERT_TRUE(reader.is_ok());
  std::vector<view::LiveFrame> frames;
  (*reader)->poll(&frames);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].width, 320);
  EXPECT_EQ(frames[0].height, 240);
  EXPECT_EQ(frames[0].step, 1);
}

TEST(LivePublisherTest, NoBoardWhenLiveFramesAreOff) {
  testing::TempDir dir("live");
  DaemonConfig config;
  config.runtime_dir = dir.path();
  config.live.max_fps = 0;
  EXPECT_EQ(LivePublisher::create(config, 0), nullptr);
}

TEST(LivePublisherTest, TheDaemonsViewShowsItsSession) {
  DaemonConfig config;
  config.output_dir = "/data/out";
  config.session = "exp1";
  config.runtime_dir = "/run/x";
  config.live.address = "0.0.0.0";
  config.live.allow_remote = true;
  config.live.port = 8123;
  config.live.history_mb = 5;
  const view::ViewServerOptions o = live_view_options(config);
  ASSERT_EQ(o.sources.size(), 1u);
  EXPECT_EQ(o.sources[0].session_dir, "/data/out/exp1");
  EXPECT_EQ(o.sources[0].session, "exp1");
  EXPECT_EQ(o.sources[0].runtime_dir, "/run/x");
  EXPECT_EQ(o.bind_address, "0.0.0.0");
  EXPECT_TRUE(o.allow_remote);
  EXPECT_EQ(o.port, 8123);
  EXPECT_EQ(o.history_bytes, uint64_t{5} << 20);
  config.live.serve = false;
  auto none = start_live_view(config);
  ASSERT_TRUE(none.is_ok());
  EXPECT_EQ(*none, nullptr);
}

}  // namespace
}  // namespace tensorscope::daemon
