// many_streams_test.cc — end-to-end: many producers and streams through one worker:
// eight processes of one rank never share a file, a thousand streams keep every frame
// with a bounded number of open videos, the stream limit's drops reach the producer, one
// producer's streams are drawn on every render thread of its worker.
//
// Each test starts its own daemon(s) in a private temporary directory (runtime dir,
// session, output) and runs test_producer processes against them (integration_fixture.h).
#include "integration_fixture.h"
#include "tensorscope/recording/video_steps.h"

namespace tensorscope::itest {
namespace {

// 1b. Eight training processes that all say rank 0 (no RANK set) push the same stream
// names through one worker: each process gets its own files (named after its pid),
// every file plays with its listed frames, and every pushed record is a frame.
TEST_F(IntegrationTest, EightProducersOfOneRankNeverShareAFile) {
  const std::string name = session("rank0");
  DaemonProcess* daemon = start_ready_daemon(name, output_dir("rank0"), 1, write_config(25));
  ASSERT_NE(daemon, nullptr);
  constexpr int kProducers = 8;
  std::vector<ChildProcess*> producers;
  for (int i = 0; i < kProducers; ++i) {
    producers.push_back(start_producer(name, 0, {"--count", "120", "--streams", "3", "--stdin-control"}));
    ASSERT_NE(producers.back(), nullptr);
  }
  std::map<int64_t, int64_t> expected;  // pid -> frames
  for (ChildProcess* p : producers) {
    json f = final_line(p);
    ASSERT_TRUE(f.is_object()) << "producer " << p->pid() << " printed no final line";
    expect_accounted(f, "producer " + std::to_string(p->pid()));
    EXPECT_EQ(u64(f, "dropped_full"), 0u);
    expected[p->pid()] = static_cast<int64_t>(u64(f, "pushed"));
  }
  for (ChildProcess* p : producers) release_producer(p);
  json last;
  EXPECT_TRUE(daemon->wait_status([](const json& s) { return s.value("producers", json::array()).empty(); },
                                  kSettleTimeout, &last))
      << "producers still listed:\n"
      << last.dump(2);
  terminate_daemon(daemon);
  const auto files = index_or_fail(daemon->session_dir());
  std::map<int64_t, int64_t> frames;
  for (const auto& f : files) {
    const int64_t pid = f.value("pid", int64_t{0});
    frames[pid] += f.value("frames", int64_t{0});
    EXPECT_THAT(f.value("path", ""), HasSubstr("__rank0__pid" + std::to_string(pid) + "__")) << f.dump();
  }
  EXPECT_EQ(frames, expected);
  verify_session_dir(daemon->session_dir(), files, /*every_video_listed=*/true);
  EXPECT_THAT(daemon->log(), ::testing::Not(HasSubstr("cannot finalize")));
}

// 1c. A thousand streams through one worker that may keep 16 videos open: every stream
// gets every frame, in whole files (not a file per frame), while the worker's open
// descriptors stay bounded; the stream limit's drops reach the producer's stats.
TEST_F(IntegrationTest, AThousandStreamsOnOneWorkerKeepEveryFrame) {
  const std::string name = session("many");
  DaemonProcess* daemon = start_ready_daemon(
      name, output_dir("many"), 1, write_config(1000, 45000, 160, 120, "limits:\n  max_open_videos_per_worker: 16\n"));
  ASSERT_NE(daemon, nullptr);
  auto status = daemon->status();
  ASSERT_TRUE(status.is_ok()) << status.message();
  const pid_t worker = static_cast<pid_t>((*status)["workers"][0].value("pid", -1));
  const int idle_fds = open_descriptors(worker);
  ASSERT_GT(idle_fds, 0);

  constexpr int kStreams = 1000, kRounds = 3;
  ChildProcess* producer =
      start_producer(name, 0,
                     {"--count", std::to_string(kStreams * kRounds), "--streams", std::to_string(kStreams),
                      "--max-elements", "64", "--sleep-us", "3000", "--stdin-control",
                      // Every record fits in the ring, and none is paced away: on a loaded
                      // machine the worker may fall behind the producer, and what this test
                      // counts is frames, not drops.
                      "--ring-slots", "4096", "--no-pacing"});
  ASSERT_NE(producer, nullptr);
  int most_fds = idle_fds;
  json f;
  while (!(f = progress_line(
               producer, [](const json& l) { return l.value("final", false); }, 200ms))
              .is_object()) {
    most_fds = std::max(most_fds, open_descriptors(worker));
    ASSERT_TRUE(producer->running()) << "the producer exited without a final line";
  }
  expect_accounted(f, "producer");
  EXPECT_EQ(u64(f, "dropped_full"), 0u);
  EXPECT_EQ(u64(f, "pushed"), static_cast<uint64_t>(kStreams * kRounds));
  json last;
  EXPECT_TRUE(daemon->wait_status(
      [&](const json& s) {
        const json p = producer_entry(s, producer->pid());
        most_fds = std::max(most_fds, open_descriptors(worker));
        return p.is_object() && u64(p, "received") == u64(f, "pushed");
      },
      kSettleTimeout, &last))
      << last.dump(2);
  release_producer(producer);
  EXPECT_TRUE(daemon->wait_status([](const json& s) { return s.value("producers", json::array()).empty(); },
                                  kSettleTimeout, &last));
  terminate_daemon(daemon);
  // 16 videos and their journals, the producer's segment, and a few of libraries.
  EXPECT_LE(most_fds, idle_fds + 2 * 16 + 8) << "idle " << idle_fds;
  const auto files = index_or_fail(daemon->session_dir());
  std::map<std::string, int64_t> expected;
  add_expected(f, 0, &expected);
  EXPECT_EQ(expected.size(), static_cast<size_t>(kStreams));
  EXPECT_EQ(frames_by_stream(files), expected);
  // One file per stream and render mode (the random shapes pick the mode): suspending a
  // video never splits it.
  std::map<std::string, int> files_per_video;
  for (const auto& e : files) ++files_per_video[e.value("stream", "") + "/" + e.value("mode", "")];
  for (const auto& [video, n] : files_per_video) EXPECT_EQ(n, 1) << video;
  verify_session_dir(daemon->session_dir(), files, /*every_video_listed=*/true);
}

// 1d. Past limits.max_streams_per_worker, records of further streams are not drawn and
// the producer's stats() says how many.
TEST_F(IntegrationTest, TheStreamLimitsDropsReachTheProducer) {
  const std::string name = session("limit");
  DaemonProcess* daemon = start_ready_daemon(
      name, output_dir("limit"), 1, write_config(1000, 45000, 160, 120, "limits:\n  max_streams_per_worker: 5\n"));
  ASSERT_NE(daemon, nullptr);
  ChildProcess* producer =
      start_producer(name, 0, {"--count", "80", "--streams", "8", "--max-elements", "64", "--stdin-control"});
  ASSERT_NE(producer, nullptr);
  json f = final_line(producer);
  ASSERT_TRUE(f.is_object());
  json last;
  EXPECT_TRUE(daemon->wait_status(
      [&](const json& s) {
        const json p = producer_entry(s, producer->pid());
        return p.is_object() && u64(p, "received") == u64(f, "pushed") && u64(p, "dropped_by_daemon") > 0;
      },
      kSettleTimeout, &last))
      << last.dump(2);
  const json p = producer_entry(last, producer->pid());
  EXPECT_GT(u64(p, "dropped_by_daemon"), 0u);
  EXPECT_LT(u64(p, "dropped_by_daemon"), u64(p, "received"));
  release_producer(producer);
  terminate_daemon(daemon);
}

// 1e. One training process is read by one worker, whose render threads (2 here) share
// its streams: both threads draw, and every stream is one whole video with its frames in
// step order, each frame's step in the steps file.
TEST_F(IntegrationTest, OneProducersStreamsAreDrawnOnEveryRenderThread) {
  const std::string name = session("lanes");
  DaemonProcess* daemon =
      start_ready_daemon(name, output_dir("lanes"), 1, write_config(100000, 45000, 160, 120, "render_threads: 2\n"));
  ASSERT_NE(daemon, nullptr);
  ChildProcess* producer = start_producer(
      name, 0,
      {"--count", "480", "--streams", "8", "--max-elements", "1024", "--stdin-control", "--ring-slots", "1024"});
  ASSERT_NE(producer, nullptr);
  const json f = final_line(producer);
  ASSERT_TRUE(f.is_object());
  expect_accounted(f, "producer");
  ASSERT_GT(u64(f, "pushed"), 0u);
  json last;
  ASSERT_TRUE(daemon->wait_status(
      [&](const json& s) {
        const json p = producer_entry(s, producer->pid());
        return p.is_object() && u64(p, "received") == u64(f, "pushed");
      },
      kSettleTimeout, &last))
      << last.dump(2);
  release_producer(producer);
  EXPECT_TRUE(daemon->wait_status([](const json& s) { return s.value("producers", json::array()).empty(); },
                                  kSettleTimeout, &last));
  // Both render threads drew about half of the frames (4 streams each).
  const json jobs = last["workers"][0]["stats"].value("render_jobs", json::array());
  ASSERT_EQ(jobs.size(), 2u) << last.dump(2);
  for (const auto& n : jobs) EXPECT_GE(n.get<uint64_t>(), u64(f, "pushed") / 4) << jobs.dump();
  terminate_daemon(daemon);

  const auto files = index_or_fail(daemon->session_dir());
  std::map<std::string, int64_t> expected;
  add_expected(f, 0, &expected);
  EXPECT_EQ(frames_by_stream(files), expected);
  std::map<std::string, int> files_per_video;
  for (const auto& e : files) {
    const std::string path = e.value("path", "");
    ++files_per_video[e.value("stream", "") + "/" + e.value("mode", "")];
    auto steps = recording::read_video_steps(recording::kept_steps_path(daemon->session_dir(), path));
    ASSERT_TRUE(steps.is_ok()) << steps.message();
    EXPECT_EQ(static_cast<int64_t>(steps->steps.size()), e.value("frames", int64_t{-1})) << path;
    // Strictly increasing: no frame before an earlier step's, none twice.
    EXPECT_EQ(std::adjacent_find(steps->steps.begin(), steps->steps.end(), std::greater_equal<int64_t>()),
              steps->steps.end())
        << path << ": frames out of step order";
  }
  for (const auto& [video, n] : files_per_video) EXPECT_EQ(n, 1) << video;
  verify_session_dir(daemon->session_dir(), files, /*every_video_listed=*/true);
}

}  // namespace
}  // namespace tensorscope::itest
