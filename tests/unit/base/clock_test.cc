// clock_test.cc — the wall clock agrees with time(2) and the monotonic clock never goes back.
#include "tensorscope/base/clock.h"

#include <gtest/gtest.h>

#include <ctime>
#include <thread>

namespace tensorscope {
namespace {

TEST(Clock, WallClockIsTheUnixTime) {
  const int64_t seconds = static_cast<int64_t>(std::time(nullptr));
  EXPECT_NEAR(static_cast<double>(unix_time_ns() / 1000000000), static_cast<double>(seconds), 2.0);
  EXPECT_NEAR(static_cast<double>(unix_time_ms() / 1000), static_cast<double>(seconds), 2.0);
}

TEST(Clock, MonotonicClockMovesForwardInStep) {
  const int64_t ns0 = steady_time_ns(), ms0 = steady_time_ms();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int64_t ms1 = steady_time_ms(), ns1 = steady_time_ns(), ms2 = steady_time_ms();
  EXPECT_GE(ns1 - ns0, 20000000);
  EXPECT_GE(ms1 - ms0, 19);
  EXPECT_LT(ms1 - ms0, 5000);
  // One clock: the nanoseconds read between two millisecond reads lie between them
  // (however long the thread was preempted in between).
  EXPECT_GE(ns1 / 1000000, ms1 - 1);
  EXPECT_LE(ns1 / 1000000, ms2 + 1);
}

}  // namespace
}  // namespace tensorscope
