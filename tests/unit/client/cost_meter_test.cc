// CostMeter (client/core/cost_meter.h) on a clock the test moves: a window's share is its
// spans' time over its length, nested spans count once, a share over the limit is said once
// (and only then), an unmatched leave does nothing.
#include "cost_meter.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace tensorscope {
namespace {

int64_t now_ns = 0;
int64_t test_clock() { return now_ns; }
constexpr int64_t kMs = 1'000'000;

// A span of `busy` followed by `idle` nanoseconds of the training's own work.
void step(CostMeter* meter, int64_t busy, int64_t idle) {
  meter->enter();
  now_ns += busy;
  meter->leave();
  now_ns += idle;
}

TEST(CostMeter, AWindowsShareIsItsSpansTimeOverItsLength) {
  now_ns = 0;
  CostMeter meter(&test_clock);
  EXPECT_EQ(meter.last_fraction(), -1.0);
  // 2% of each 100 ms step, for 5 s and one more step to end the window.
  for (int i = 0; i < 50; ++i) step(&meter, 2 * kMs, 98 * kMs);
  EXPECT_EQ(meter.last_fraction(), -1.0) << "the window ends at a span's end";
  step(&meter, 2 * kMs, 98 * kMs);
  EXPECT_NEAR(meter.last_fraction(), 51 * 2.0 / 5002.0, 1e-9);
  EXPECT_EQ(meter.note(), "") << "2% is within the limit";
}

TEST(CostMeter, NestedSpansCountOnceAndAnUnmatchedLeaveNothing) {
  now_ns = 0;
  CostMeter meter(&test_clock);
  meter.leave();  // unmatched
  for (int i = 0; i < 60; ++i) {
    meter.enter();
    now_ns += 1 * kMs;
    meter.enter();  // (a native hook calling the track's Python hook)
    now_ns += 2 * kMs;
    meter.leave();
    now_ns += 1 * kMs;
    meter.leave();
    now_ns += 96 * kMs;
  }
  // Windows of 5 s from the first span: the first ends at the span ending at 5,004 ms.
  EXPECT_NEAR(meter.last_fraction(), 51 * 4.0 / 5004.0, 1e-9);
}

TEST(CostMeter, AShareOverTheLimitIsSaidOnce) {
  now_ns = 0;
  CostMeter meter(&test_clock);
  for (int i = 0; i < 51; ++i) step(&meter, 12 * kMs, 88 * kMs);
  EXPECT_NEAR(meter.last_fraction(), 0.12, 0.005);
  const std::string note = meter.note();
  EXPECT_NE(note.find("tracking took 12% of the wall time over 5 s"), std::string::npos) << note;
  EXPECT_NE(note.find("stats_every"), std::string::npos) << note;
  // A later, heavier window: its share is reported, the note stays what was said first.
  for (int i = 0; i < 51; ++i) step(&meter, 30 * kMs, 70 * kMs);
  EXPECT_NEAR(meter.last_fraction(), 0.30, 0.01);
  EXPECT_EQ(meter.note(), note);
}

}  // namespace
}  // namespace tensorscope
