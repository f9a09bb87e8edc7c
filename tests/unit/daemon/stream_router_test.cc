// StreamRouter and StreamVideo without processes: records in, video files and index
// entries out; the cap on open videos finalizes the least recently written ones.
#include <algorithm>
#include <gtest/gtest.h>

#include <opencv2/videoio.hpp>

#include <cstring>
#include <mutex>
#include <vector>

#include "worker/stream_router.h"
#include "temp_dir.h"

namespace tensorscope::daemon {
namespace {

struct FakeRecord {
  std::vector<float> values;
  RecordView view;
};

// Fills `r` in place (RecordHeader holds an atomic and cannot be copied or moved).
void fill_record(FakeRecord& r, const std::string& name, int64_t step, size_t n) {
  r.values.resize(n);
  for (size_t i = 0; i < n; ++i) r.values[i] = static_cast<float>(i % 17) * 0.5f + step;
  std::memset(static_cast<void*>(&r.view.header), 0, sizeof(r.view.header));
  r.view.header.step = step;
  r.view.header.dtype = static_cast<uint8_t>(wire::DType::kFloat32);
  r.view.header.kind = static_cast<uint8_t>(wire::TensorKind::kActivation);
  r.view.header.ndim = 1;
  r.view.header.shape[0] = static_cast<int64_t>(n);
  r.view.header.payload_bytes = n * sizeof(float);
  std::snprintf(r.view.header.name, wire::kNameBytes, "%s", name.c_str());
  std::snprintf(r.view.header.device, wire::kDeviceBytes, "cpu");
  r.view.payload = reinterpret_cast<const uint8_t*>(r.values.data());
}

DaemonConfig small_config() {
  DaemonConfig config;
  config.video.width = 160;
  config.video.height = 120;
  config.video.codec = VideoCodec::kMp4v;
  config.video.max_frames = 5;
  return config;
}

void run_all(const std::vector<RenderJob>& jobs) {
  for (const RenderJob& job : jobs) job();
}

int64_t count_frames(const std::string& path) {
  cv::VideoCapture capture(path);
  cv::Mat frame;
  int64_t n = 0;
  while (capture.read(frame)) ++n;
  return n;
}

// One file per stream, each holding steps 0..steps-1, every one a decodable frame.
void expect_whole_files(const std::string& dir, const std::vector<IndexEntry>& finished, int streams, int steps) {
  ASSERT_EQ(finished.size(), static_cast<size_t>(streams));
  for (const IndexEntry& e : finished) {
    EXPECT_EQ(e.frames, steps) << e.path;
    EXPECT_EQ(e.first_step, 0);
    EXPECT_EQ(e.last_step, steps - 1);
    EXPECT_EQ(count_frames(dir + "/" + e.path), steps) << e.path;
  }
}

TEST(StreamRouter, RotatesFilesEveryMaxFramesAndReportsThem) {
  testing::TempDir dir("ts-router");
  const DaemonConfig config = small_config();
  std::vector<IndexEntry> finished;
  StreamRouter router(config, dir.path(), [&](const IndexEntry& e) { finished.push_back(e); });
  for (int step = 0; step < 12; ++step) {
    FakeRecord r;
    fill_record(r, "layer.out", step, 100);
    auto job = router.route(7, 1007, r.view).job;
    ASSERT_TRUE(job);
    job();
  }
  run_all(router.finish_producer(7));
  ASSERT_EQ(finished.size(), 3u);  // 5 + 5 + 2 frames
  EXPECT_EQ(finished[0].frames, 5);
  EXPECT_EQ(finished[0].first_step, 0);
  EXPECT_EQ(finished[0].last_step, 4);
  EXPECT_EQ(finished[2].frames, 2);
  EXPECT_EQ(finished[2].last_step, 11);
  EXPECT_EQ(finished[0].kind, "activation");
  for (const auto& e : finished) EXPECT_EQ(count_frames(dir.path() + "/" + e.path), e.frames) << e.path;
}

// More streams than open videos: the least recently written videos are suspended, not
// finished, so every stream still ends with one file holding all its frames.
TEST(StreamRouter, MoreStreamsThanOpenVideosKeepOneWholeFilePerStream) {
  testing::TempDir dir("ts-router");
  const DaemonConfig config = [] {
    DaemonConfig c = small_config();
    c.video.max_frames = 1000;
    c.limits.max_open_videos_per_worker = 4;
    return c;
  }();
  std::vector<IndexEntry> finished;
  StreamRouter router(config, dir.path(), [&](const IndexEntry& e) { finished.push_back(e); });
  constexpr int kStreams = 11, kSteps = 3;
  for (int step = 0; step < kSteps; ++step) {
    for (int s = 0; s < kStreams; ++s) {  // round robin: every frame reopens a video
      FakeRecord r;
      fill_record(r, "s" + std::to_string(s), step, 10);
      router.route(1, 1001, r.view).job();
    }
  }
  EXPECT_TRUE(finished.empty()) << "suspended videos are not finished";
  run_all(router.finish_producer(1));
  expect_whole_files(dir.path(), finished, kStreams, kSteps);
}

// Two training processes of the same rank (no RANK set) push the same stream name to
// one worker, interleaved: each gets its own files, named after its pid, every frame in
// them; a process that registers again (same pid, new producer id) continues its
// segment numbers.
TEST(StreamRouter, ProducersOfTheSameRankNeverShareAFile) {
  testing::TempDir dir("ts-router");
  const DaemonConfig config = small_config();  // 5 frames per file
  std::vector<IndexEntry> finished;
  StreamRouter router(config, dir.path(), [&](const IndexEntry& e) { finished.push_back(e); });
  for (int step = 0; step < 7; ++step) {
    for (uint64_t producer : {1, 2}) {
      FakeRecord r;
      fill_record(r, "layer.out", step, 50);
      router.route(producer, 4000 + static_cast<int64_t>(producer), r.view).job();
    }
  }
  run_all(router.finish_producer(1));
  run_all(router.finish_producer(2));
  FakeRecord later;  // pid 4001 again, registered anew
  fill_record(later, "layer.out", 7, 50);
  router.route(3, 4001, later.view).job();
  run_all(router.finish_producer(3));
  std::vector<std::string> paths;
  for (const IndexEntry& e : finished) {
    paths.push_back(e.path);
    EXPECT_EQ(count_frames(dir.path() + "/" + e.path), e.frames) << e.path;
  }
  std::sort(paths.begin(), paths.end());
  EXPECT_EQ(paths,
            (std::vector<std::string>{
                "layer.out__cpu__rank0__pid4001__line__0000.mp4",
                "layer.out__cpu__rank0__pid4001__line__0001.mp4",
                "layer.out__cpu__rank0__pid4001__line__0002.mp4",
                "layer.out__cpu__rank0__pid4002__line__0000.mp4",
                "layer.out__cpu__rank0__pid4002__line__0001.mp4",
            }));
  int64_t frames = 0;
  for (const IndexEntry& e : finished) frames += e.frames;
  EXPECT_EQ(frames, 15);
}

// Past limits.max_streams_per_worker a new stream's record is dropped and said to be
// (the worker counts it for the producer); an existing stream's records are still drawn.
TEST(StreamRouter, ARecordOverTheStreamLimitIsSaidToBeDropped) {
  testing::TempDir dir("ts-router");
  DaemonConfig config = small_config();
  config.limits.max_streams_per_worker = 1;
  StreamRouter router(config, dir.path(), [](const IndexEntry&) {});
  FakeRecord first, other, again;
  fill_record(first, "kept", 0, 10);
  fill_record(other, "over", 0, 10);
  fill_record(again, "kept", 1, 10);
  StreamRouter::Routed routed = router.route(1, 1001, first.view);
  EXPECT_TRUE(routed.job);
  EXPECT_FALSE(routed.over_limit);
  routed = router.route(1, 1001, other.view);
  EXPECT_FALSE(routed.job);
  EXPECT_TRUE(routed.over_limit);
  EXPECT_EQ(router.dropped_over_limit(), 1u);
  routed = router.route(1, 1001, again.view);
  EXPECT_TRUE(routed.job);
  EXPECT_FALSE(routed.over_limit);
}

TEST(StreamRouter, EmptyTensorGetsAMessageFrame) {
  testing::TempDir dir("ts-router");
  const DaemonConfig config = small_config();
  std::vector<IndexEntry> finished;
  StreamRouter router(config, dir.path(), [&](const IndexEntry& e) { finished.push_back(e); });
  FakeRecord r;
  fill_record(r, "empty", 3, 0);
  router.route(2, 1002, r.view).job();
  run_all(router.finish_all());
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(count_frames(dir.path() + "/" + finished[0].path), 1);
}

}  // namespace
}  // namespace tensorscope::daemon

namespace tensorscope::daemon {
namespace {

// One producer's streams are shared out evenly among the render lanes, and drawn on
// them at once (a RenderQueue of 3 threads), each stream in order into its one file; the
// finishing jobs are one per lane.
TEST(StreamRouter, OneProducersStreamsAreDrawnOnEveryLane) {
  testing::TempDir dir("ts-router");
  DaemonConfig config = small_config();
  config.video.max_frames = 1000;
  config.limits.max_open_videos_per_worker = 6;  // 2 per lane: some suspensions too
  std::mutex finished_mutex;
  std::vector<IndexEntry> finished;
  StreamRouter router(
      config, dir.path(),
      [&](const IndexEntry& e) {
        std::lock_guard<std::mutex> lock(finished_mutex);
        finished.push_back(e);
      },
      nullptr, 3);
  constexpr int kStreams = 9, kSteps = 4;
  std::vector<size_t> per_lane(3, 0);
  {
    RenderQueue queue(3, 4);
    for (int step = 0; step < kSteps; ++step) {
      for (int s = 0; s < kStreams; ++s) {
        FakeRecord r;
        fill_record(r, "s" + std::to_string(s), step, 40);
        RenderJob job = router.route(1, 1001, r.view).job;
        ASSERT_TRUE(job);
        if (step == 0) ++per_lane[job.lane];
        queue.push(std::move(job));
      }
    }
    const std::vector<RenderJob> finishing = router.finish_producer(1);
    ASSERT_EQ(finishing.size(), 3u);
    for (size_t i = 0; i < finishing.size(); ++i) EXPECT_EQ(finishing[i].lane, i);
    for (const RenderJob& job : finishing) queue.push(job);
    queue.drain();
  }
  EXPECT_EQ(per_lane, (std::vector<size_t>{3, 3, 3}));
  expect_whole_files(dir.path(), finished, kStreams, kSteps);
}

// Every render mode, asked for by the client's hint, becomes a playable video named
// after its mode.
TEST(StreamRouter, EveryModeRendersPlayableVideo) {
  testing::TempDir dir("ts-router");
  DaemonConfig config = small_config();
  config.render.tsne_iterations = 60;
  config.render.tsne_warm_iterations = 20;
  std::vector<IndexEntry> finished;
  StreamRouter router(config, dir.path(), [&](const IndexEntry& e) { finished.push_back(e); });
  // Every mode of the one list (render_modes.h) but auto, which resolves to one of them.
  std::vector<std::pair<wire::RenderHint, std::string>> modes;
  for (uint8_t value = 1; value <= wire::kMaxRenderHint; ++value) {
    const auto hint = static_cast<wire::RenderHint>(value);
    if (hint != wire::RenderHint::kAuto) modes.emplace_back(hint, std::string(wire::render_mode_name(hint)));
  }
  ASSERT_GE(modes.size(), 7u);
  for (int step = 0; step < 2; ++step) {
    for (const auto& [hint, name] : modes) {
      FakeRecord r;
      fill_record(r, "m." + name, step, 60 * 8);
      r.view.header.ndim = 2;  // 60 rows x 8 features
      r.view.header.shape[0] = 60;
      r.view.header.shape[1] = 8;
      r.view.header.render_hint = static_cast<uint8_t>(hint);
      EXPECT_EQ(router.mode_for(r.view.header), hint);
      router.route(3, 1003, r.view).job();
    }
  }
  run_all(router.finish_all());
  ASSERT_EQ(finished.size(), modes.size());
  for (const IndexEntry& e : finished) {
    EXPECT_EQ(e.stream, "m." + e.mode);
    EXPECT_EQ(e.frames, 2) << e.path;
    EXPECT_EQ(count_frames(dir.path() + "/" + e.path), 2) << e.path;
  }
}

}  // namespace
}  // namespace tensorscope::daemon
