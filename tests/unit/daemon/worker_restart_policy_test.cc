// The supervisor's restart policy: backoff doubling up to its maximum, reset after a
// healthy run, restarts not counted while stopping, the heartbeat deadline, and the
// supervisor's own stalls.
#include "supervisor/worker_restart_policy.h"

#include <gtest/gtest.h>

namespace tensorscope::daemon {
namespace {

constexpr RestartPolicyConfig kConfig{/*initial_backoff_ms=*/100, /*max_backoff_ms=*/1000,
                                      /*heartbeat_timeout_ms=*/5000, /*healthy_after_ms=*/10000};

TEST(WorkerRestartPolicy, BackoffDoublesUpToItsMaximum) {
  WorkerRestartPolicy p(kConfig);
  int64_t now = 1000;
  const int64_t expected[] = {100, 200, 400, 800, 1000, 1000};
  for (int64_t delay : expected) {
    p.started(now);
    now += 50;  // crashes at once
    EXPECT_EQ(p.exited(now), delay);
    EXPECT_FALSE(p.restart_due(now + delay - 1));
    EXPECT_TRUE(p.restart_due(now + delay));
    now += delay;
  }
  EXPECT_EQ(p.restarts(), 6u);
}

TEST(WorkerRestartPolicy, AHealthyRunStartsTheBackoffOver) {
  WorkerRestartPolicy p(kConfig);
  p.started(0);
  EXPECT_EQ(p.exited(10), 100);
  p.started(110);
  EXPECT_EQ(p.exited(120), 200);
  p.started(320);
  EXPECT_EQ(p.exited(320 + 10001), 100) << "ran longer than healthy_after_ms";
  p.started(20000);
  EXPECT_EQ(p.exited(20000 + 10000), 200) << "exactly healthy_after_ms is not longer";
}

TEST(WorkerRestartPolicy, ExitsWhileStoppingAreNotCounted) {
  WorkerRestartPolicy p(kConfig);
  p.started(0);
  EXPECT_EQ(p.exited(10, /*counted=*/false), 100);
  EXPECT_EQ(p.restarts(), 0u);
  p.started(200);
  EXPECT_EQ(p.exited(210), 100) << "an uncounted exit does not double the backoff";
  EXPECT_EQ(p.restarts(), 1u);
}

TEST(WorkerRestartPolicy, AFailedStartIsTriedAgainAfterTheCurrentDelay) {
  WorkerRestartPolicy p(kConfig);
  p.start_failed(500);
  EXPECT_FALSE(p.restart_due(599));
  EXPECT_TRUE(p.restart_due(600));
  EXPECT_EQ(p.restarts(), 0u);
}

TEST(WorkerRestartPolicy, HeartbeatDeadline) {
  WorkerRestartPolicy p(kConfig);
  p.started(1000);
  EXPECT_FALSE(p.heartbeat_missed(6000));
  EXPECT_TRUE(p.heartbeat_missed(6001));
  p.heard(5000);
  EXPECT_FALSE(p.heartbeat_missed(10000));
  EXPECT_EQ(p.silent_ms(10000), 5000);
  EXPECT_TRUE(p.heartbeat_missed(10001));
}

// A worker waiting for a core (runnable) is starved, not hung, until the starved limit.
TEST(WorkerRestartPolicy, ARunnableWorkerIsStarvedNotHung) {
  RestartPolicyConfig config = kConfig;
  config.starved_limit_ms = 60000;
  WorkerRestartPolicy p(config);
  p.started(0);
  EXPECT_EQ(p.silence(5000, true, 10), Silence::kHeard);
  for (int64_t t = 5001; t <= 60000; t += 100) ASSERT_EQ(p.silence(t, true, 10), Silence::kStarved) << t;
  EXPECT_EQ(p.silence(60001, true, 10), Silence::kHung);  // running, yet silent a minute
}

// Asleep: starved while its CPU time still advances, hung after a whole timeout without.
TEST(WorkerRestartPolicy, AnIdleSilentWorkerIsHungAfterATimeoutWithoutCpu) {
  WorkerRestartPolicy p(kConfig);
  p.started(0);
  EXPECT_EQ(p.silence(5001, false, 7), Silence::kStarved);   // a first look: the baseline
  EXPECT_EQ(p.silence(8000, false, 9), Silence::kStarved);   // it used CPU since
  EXPECT_EQ(p.silence(13000, false, 9), Silence::kStarved);  // 5000 ms without: not past yet
  EXPECT_EQ(p.silence(13001, false, 9), Silence::kHung);
  // Heard again: a later silence starts a new watch.
  p.heard(14000);
  EXPECT_EQ(p.silence(15000, false, 9), Silence::kHeard);
  EXPECT_EQ(p.silence(19001, false, 9), Silence::kStarved);
  EXPECT_EQ(p.silence(24002, false, 9), Silence::kHung);
}

TEST(StallDetector, OnlyGapsAboveTheThresholdCount) {
  StallDetector d(1000);
  EXPECT_EQ(d.gap(5000), 0) << "the first call has nothing to compare with";
  EXPECT_EQ(d.gap(5100), 0);
  EXPECT_EQ(d.gap(6100), 0) << "exactly the threshold is no stall";
  EXPECT_EQ(d.gap(16100), 10000);
  EXPECT_EQ(d.gap(16200), 0);
}

}  // namespace
}  // namespace tensorscope::daemon
