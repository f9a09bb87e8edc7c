// render_queue_test.cc — RenderQueue: a lane runs its jobs in order, lanes run at once,
// push_after_all waits for every lane, a throwing job is counted and its lane goes on.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "worker/render_queue.h"

namespace tensorscope::daemon {
namespace {

// Waits (generously: a loaded machine) until `done` holds; false on timeout.
bool wait_until(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(RenderQueue, EachLaneRunsItsJobsInOrder) {
  std::mutex mutex;
  std::vector<std::vector<int>> seen(3);
  {
    RenderQueue queue(3, 2);
    EXPECT_EQ(queue.lanes(), 3u);
    for (int i = 0; i < 300; ++i) {
      const size_t lane = static_cast<size_t>(i) % 3;
      queue.push({lane, [&, lane, i] {
                    std::lock_guard<std::mutex> lock(mutex);
                    seen[lane].push_back(i);
                  }});
    }
    queue.drain();
    EXPECT_EQ(queue.depth(), 0u);
    EXPECT_EQ(queue.jobs_run(), (std::vector<uint64_t>{100, 100, 100}));
  }
  for (size_t lane = 0; lane < 3; ++lane) {
    ASSERT_EQ(seen[lane].size(), 100u);
    for (size_t k = 0; k < 100; ++k) EXPECT_EQ(seen[lane][k], static_cast<int>(lane + 3 * k));
  }
}

// A job on lane 0 that waits for a job on lane 1 finishes only if both run at once.
TEST(RenderQueue, LanesRunAtTheSameTime) {
  std::atomic<bool> second_ran{false}, first_saw_it{false};
  RenderQueue queue(2, 4);
  queue.push({0, [&] { first_saw_it = wait_until([&] { return second_ran.load(); }); }});
  queue.push({1, [&] { second_ran = true; }});
  queue.drain();
  EXPECT_TRUE(first_saw_it);
}

TEST(RenderQueue, AfterAllRunsOnceWhenEveryLaneHasDrawnWhatCameBefore) {
  std::atomic<int> drawn{0}, after_runs{0}, drawn_when_after{-1};
  std::atomic<bool> release{false};
  RenderQueue queue(4, 8);
  for (size_t lane = 0; lane < 4; ++lane) {
    queue.push({lane, [&, lane] {
                  if (lane == 2) wait_until([&] { return release.load(); });  // one slow lane
                  ++drawn;
                }});
  }
  queue.push_after_all(
      [&] {
        drawn_when_after = drawn.load();
        ++after_runs;
      },
      [] {}, 10);
  // The fast lanes are past the barrier; the slow one holds it back.
  ASSERT_TRUE(wait_until([&] { return drawn.load() == 3; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(after_runs.load(), 0);
  release = true;
  queue.drain();
  EXPECT_EQ(after_runs.load(), 1);
  EXPECT_EQ(drawn_when_after.load(), 4);
}

TEST(RenderQueue, AThrowingJobIsCountedAndItsLaneGoesOn) {
  std::atomic<int> after{0};
  RenderQueue queue(2, 2);
  queue.push({1, [] { throw std::runtime_error("cannot draw"); }});
  queue.push({1, [&] { ++after; }});
  queue.drain();
  EXPECT_EQ(queue.errors(), 1u);
  EXPECT_EQ(after.load(), 1);
}

// A full lane makes push() wait, calling `waiting` meanwhile; other lanes are not held up.
TEST(RenderQueue, AFullLaneMakesPushWaitAndCallsWaiting) {
  std::atomic<bool> release{false};
  std::atomic<int> other_lane{0}, waiting_calls{0};
  RenderQueue queue(2, 1);
  queue.push({0, [&] { wait_until([&] { return release.load(); }); }});  // running
  queue.push({0, [] {}});                                                // waiting: lane 0 full
  queue.push({1, [&] { ++other_lane; }});
  ASSERT_TRUE(wait_until([&] { return other_lane.load() == 1; }));
  std::thread releaser([&] {
    wait_until([&] { return waiting_calls.load() >= 2; });
    release = true;
  });
  queue.push(
      {0, [] {}}, [&] { ++waiting_calls; }, 5);
  releaser.join();
  EXPECT_GE(waiting_calls.load(), 2);
  queue.drain();
}

// A shutdown with a backlog: the frames queued are dropped and counted, so are frames
// pushed later (no waiting for room), and the jobs that finish videos still run, in order.
TEST(RenderQueue, SheddingDropsFramesAndRunsEveryOtherJob) {
  RenderQueue queue(1, 4);
  std::atomic<bool> release{false};
  std::atomic<int> frames{0}, finished{0};
  queue.push({0, [&] {
                while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
              }});  // a slow frame being drawn
  ASSERT_TRUE(wait_until([&] { return queue.depth() == 0; }));
  for (int i = 0; i < 3; ++i) queue.push({0, [&] { ++frames; }, /*frame=*/true});
  queue.push({0, [&] { finished = frames.load() + 100; }});  // finishes the video
  EXPECT_EQ(queue.depth(), 4u);
  EXPECT_EQ(queue.shed(), 3u);
  EXPECT_EQ(queue.depth(), 1u);
  // The lane is busy and would be full, yet a frame pushed now is dropped at once and a
  // finishing job is queued past the capacity.
  for (int i = 0; i < 10; ++i) queue.push({0, [&] { ++frames; }, /*frame=*/true});
  for (int i = 0; i < 5; ++i) queue.push({0, [&] { ++finished; }});
  EXPECT_EQ(queue.shed_frames(), 13u);
  release = true;
  queue.drain();
  EXPECT_EQ(frames, 0);
  EXPECT_EQ(finished, 105);
}

}  // namespace
}  // namespace tensorscope::daemon
