// Tests of HistogramRangePolicy: the re-range rules over hand-made histograms.
#include <gtest/gtest.h>

#include <vector>

#include "tensorscope/plotting/histogram_range_policy.h"

namespace tensorscope::plotting {
namespace {

// 64 bins; `spread` bins in the middle hold `inside` values each; tails as given.
Histogram histogram(int spread, uint64_t inside, uint64_t under = 0, uint64_t over = 0) {
  Histogram h;
  h.range = HistogramRange{-1, 1, 64};
  h.counts.assign(64, 0);
  for (int b = 32 - spread / 2; b < 32 - spread / 2 + spread; ++b) h.counts[static_cast<size_t>(b)] = inside;
  h.underflow = under;
  h.overflow = over;
  return h;
}

TEST(HistogramRangePolicy, KeepsAWellSpreadBody) {
  HistogramRangePolicy p;
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(p.on_frame(histogram(40, 100)).rerange);
}

TEST(HistogramRangePolicy, ANarrowBodyWaitsForMinFrames) {
  RerangeRules rules;
  rules.min_frames = 5;
  HistogramRangePolicy p(rules);
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(p.on_frame(histogram(4, 100)).rerange) << i;
  const auto d = p.on_frame(histogram(4, 100));
  EXPECT_TRUE(d.rerange);
  EXPECT_EQ(d.reason, "values shrank");
  p.took_range();
  EXPECT_FALSE(p.on_frame(histogram(4, 100)).rerange);
}

TEST(HistogramRangePolicy, GrowingTailsAndMovedBodies) {
  RerangeRules rules;
  rules.min_frames = 3;
  HistogramRangePolicy p(rules);
  p.on_frame(histogram(40, 100));
  p.on_frame(histogram(40, 100));
  // 15 % outside, both sides: due at the third frame.
  const auto grew = p.on_frame(histogram(40, 100, 350, 350));
  EXPECT_TRUE(grew.rerange);
  EXPECT_EQ(grew.reason, "values grew");
  p.took_range();
  // Most values off the plot: at once, before min_frames.
  const auto moved = p.on_frame(histogram(40, 10, 0, 5000));
  EXPECT_TRUE(moved.rerange);
  EXPECT_EQ(moved.reason, "values moved");
}

TEST(HistogramRangePolicy, MinFramesOfZeroIsOne) {
  RerangeRules rules;
  rules.min_frames = 0;
  HistogramRangePolicy p(rules);
  EXPECT_TRUE(p.on_frame(histogram(2, 100)).rerange);
}

}  // namespace
}  // namespace tensorscope::plotting
