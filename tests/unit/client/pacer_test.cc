// pacer_test.cc — the client's pacing without a daemon: the Pacer's stride from what it
// observes (fake time), and StreamGate spreading the calls it admits under a stride
// evenly over the streams and the steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "pacer.h"
#include "stream_gate.h"

namespace tensorscope {
namespace {

TEST(Pacer, FitsWhatIsSentToWhatTheDaemonReadsInOneWindow) {
  Pacer pacer;
  pacer.use_connection(1);
  EXPECT_EQ(pacer.stride16(), Pacer::kOne);
  int64_t now = 1000;
  uint64_t read = 0;
  pacer.observe(0, 0.1, false, read, now);  // the window starts
  // 400 calls offered in 60 ms, the daemon read 20 records, then the ring was full.
  for (int i = 0; i < 400; ++i) pacer.offer();
  read += 20;
  pacer.observe(300, 1.0, true, read, now + 60);
  EXPECT_EQ(pacer.stride16(), 21u * 16) << "1.05 x 400 / 20, in sixteenths";
  // A full ring again at once: no new judgement within kFullGapMs of the last.
  for (int i = 0; i < 400; ++i) pacer.offer();
  pacer.observe(300, 1.0, true, read, now + 70);
  EXPECT_EQ(pacer.stride16(), 21u * 16);
}

TEST(Pacer, BehindIsAFullRingAllWindowLongOrAnOldBacklogNotABurst) {
  for (const bool by_fill : {true, false}) {
    SCOPED_TRACE(by_fill ? "ring 3/4 full" : "backlog over 2 s");
    Pacer pacer;
    pacer.use_connection(1);
    const double high = by_fill ? 0.8 : 0.3;
    const int64_t old = by_fill ? 400 : 2500;
    int64_t now = 0;
    uint64_t read = 0;
    pacer.observe(old, high, false, read, now);
    for (int i = 0; i < 80; ++i) pacer.offer();
    read += 20;
    pacer.observe(old, high, false, read, now += 100);
    EXPECT_EQ(pacer.stride16(), Pacer::kOne) << "a window lasts kWindowMs";
    pacer.observe(old, 0.1, false, read, now += 150);  // the ring emptied, and the backlog with it
    EXPECT_EQ(pacer.stride16(), by_fill ? Pacer::kOne : 68u)
        << "by fill: a burst it absorbed; by age: 16 x 1.05 x 80 / 20, up";
    for (int i = 0; i < 80; ++i) pacer.offer();
    read += 20;
    pacer.observe(old, high, false, read, now += 100);
    pacer.observe(old, high, false, read, now += 150);
    EXPECT_EQ(pacer.stride16(), 68u) << "behind all window long";
  }
}

TEST(Pacer, ACaughtUpDaemonLowersItSlowlyAndANewConnectionStartsOver) {
  Pacer pacer;
  pacer.use_connection(1);
  int64_t now = 0;
  uint64_t read = 0;
  pacer.observe(2500, 0.5, false, read, now);
  for (int i = 0; i < 80; ++i) pacer.offer();
  read += 20;
  pacer.observe(2500, 0.5, false, read, now += 250);
  ASSERT_EQ(pacer.stride16(), 68u);
  // Under kLowBacklogMs: lowered, but only kHoldMs after the raise and once per kLowerGapMs.
  pacer.observe(50, 0.1, false, read, now += 250);
  pacer.observe(50, 0.1, false, read, now += 250);
  EXPECT_EQ(pacer.stride16(), 68u) << "held after a raise";
  pacer.observe(50, 0.1, false, read, now += Pacer::kHoldMs);
  EXPECT_EQ(pacer.stride16(), 51u) << "a quarter (at least 1/16) less";
  pacer.observe(50, 0.1, false, read, now += 250);
  EXPECT_EQ(pacer.stride16(), 51u) << "once per kLowerGapMs";
  pacer.observe(50, 0.1, false, read, now += Pacer::kLowerGapMs);
  EXPECT_EQ(pacer.stride16(), 39u);
  // A backlog between the two: neither.
  pacer.observe(900, 0.3, false, read, now += 250);
  pacer.observe(900, 0.3, false, read, now += 250);
  pacer.observe(900, 0.3, false, read, now += Pacer::kLowerGapMs);
  EXPECT_EQ(pacer.stride16(), 39u);
  pacer.use_connection(2);
  EXPECT_EQ(pacer.stride16(), Pacer::kOne) << "a new connection starts over";
}

// A daemon that reads steadily, then stalls for a window with the ring full (it finalizes
// a video of every stream at once): the stride fits its recent rate, not the stall's.
TEST(Pacer, AMomentaryStallIsJudgedByTheRecentRate) {
  Pacer pacer;
  pacer.use_connection(3);
  int64_t now = 0;
  uint64_t read = 0;
  pacer.observe(50, 0.2, false, read, now);
  for (int w = 0; w < 5; ++w) {  // 100 offered and 100 read per window: keeping up
    for (int i = 0; i < 100; ++i) pacer.offer();
    read += 100;
    pacer.observe(50, 0.2, false, read, now += Pacer::kWindowMs);
  }
  ASSERT_EQ(pacer.stride16(), Pacer::kOne);
  for (int i = 0; i < 100; ++i) pacer.offer();
  read += 5;  // the stall
  pacer.observe(300, 1.0, true, read, now += Pacer::kWindowMs);
  EXPECT_EQ(pacer.stride16(), 17u) << "1.05 x 100 offered / 100 taken at the recent rate (not / 5: 336)";
}

TEST(Pacer, NeverLowersWhileBehindAndIsCapped) {
  Pacer pacer;
  pacer.use_connection(7);
  pacer.observe(900, 1.0, true, 0, 0);
  int64_t now = 0;
  for (int w = 0; w < 13; ++w) {  // nothing read at all: a stall, not a rate of 0
    for (int i = 0; i < 100'000; ++i) pacer.offer();
    pacer.observe(900, 1.0, true, 0, now += Pacer::kWindowMs);
    EXPECT_EQ(pacer.stride16(), std::min<uint32_t>(Pacer::kOne << (w + 1), Pacer::kMaxStride16)) << "doubles";
  }
  pacer.observe(900, 1.0, true, 10, now += Pacer::kWindowMs);  // few offers now: the fit is 1, the stride stays
  pacer.observe(900, 1.0, true, 20, now += Pacer::kWindowMs);
  EXPECT_EQ(pacer.stride16(), Pacer::kMaxStride16);
}

// A fresh daemon's worker reads nothing for 600 ms (it is still starting) while the ring,
// 1024 slots, fills in 20 ms; then it drains the ring and waits for work. The stride
// doubles once per kWindowMs while it stalls (it used to double at every full window,
// every 20 ms: 1 in 256 and more), and is back to every call within kHoldMs and a window
// per halving (before that it jumped to 1 in 300 and came down by a quarter every half
// second: a minute of 1-in-1000 when the pushes that would observe it are themselves
// 1 in 1000).
TEST(Pacer, AStallDoublesAndADaemonWaitingForWorkHalvesItBack) {
  Pacer pacer;
  pacer.use_connection(9);
  int64_t now = 0;
  uint64_t read = 0;
  pacer.observe(0, 0.0, false, read, now);
  int64_t raised = 0;
  for (int w = 0; w < 30; ++w) {
    for (int i = 0; i < 300; ++i) pacer.offer();
    const uint32_t before = pacer.stride16();
    pacer.observe(20, 1.0, true, read, now += Pacer::kFullGapMs);
    if (pacer.stride16() != before) raised = now;
  }
  ASSERT_EQ(pacer.stride16(), 8u * Pacer::kOne) << "3 doublings in 600 ms: not 1.05 x 300 / 1, nor one per full window";
  for (int i = 0; i < 300; ++i) pacer.offer();
  read += 1024;  // the daemon reads the whole ring
  pacer.observe(0, 0.01, false, read, now += Pacer::kWindowMs);
  EXPECT_EQ(pacer.stride16(), 8u * Pacer::kOne) << "held for kHoldMs after the raise";
  int windows = 0;
  while (pacer.stride16() > Pacer::kOne && windows < 100) {
    for (int i = 0; i < 300; ++i) pacer.offer();
    read += 10;
    pacer.observe(0, 0.01, false, read, now += Pacer::kWindowMs);
    ++windows;
  }
  EXPECT_EQ(pacer.stride16(), Pacer::kOne);
  EXPECT_LE(now - raised, Pacer::kHoldMs + 6 * Pacer::kWindowMs);
  // Work queued (the ring over kIdleFill), nearly caught up: the quarter steps, as before
  // (a fresh connection whose daemon read a steady 20 records per window).
  pacer.use_connection(11);
  pacer.observe(0, 0.01, false, read, now += Pacer::kWindowMs);
  for (int w = 0; w < 3; ++w) pacer.observe(0, 0.01, false, read += 20, now += Pacer::kWindowMs);
  pacer.observe(2500, 0.5, false, read, now += Pacer::kWindowMs);
  for (int i = 0; i < 80; ++i) pacer.offer();
  read += 20;
  pacer.observe(2500, 0.5, false, read, now += Pacer::kWindowMs);
  ASSERT_EQ(pacer.stride16(), 68u);
  pacer.observe(50, 0.2, false, read, now += Pacer::kHoldMs);
  EXPECT_EQ(pacer.stride16(), 51u);
  // A daemon busy with what it has (records waiting over kIdleBacklogMs), however empty
  // the ring: not halved.
  pacer.use_connection(10);
  now += Pacer::kWindowMs;
  pacer.observe(0, 0.0, false, read, now);
  for (int i = 0; i < 300; ++i) pacer.offer();
  pacer.observe(20, 1.0, true, read, now += Pacer::kFullGapMs);
  ASSERT_EQ(pacer.stride16(), 2 * Pacer::kOne);
  pacer.observe(100, 0.01, false, read += 500, now += Pacer::kHoldMs);
  EXPECT_EQ(pacer.stride16(), 2 * Pacer::kOne - 8) << "a quarter (the backlog under kLowBacklogMs), not a half";
}

TEST(StreamGatePacing, OneCallInStrideOfEachStreamSpreadEvenlyOverTheCalls) {
  StreamGate gate(1, 0);
  const int streams = 8, stride = 4, steps = 16;  // stride16 64
  std::map<std::string, int> admitted;
  for (int step = 0; step < steps; ++step) {
    int this_step = 0;
    for (int s = 0; s < streams; ++s) {
      const std::string name = "s" + std::to_string(s);
      const auto a = gate.admit(name, stride * 16);
      EXPECT_EQ(a.paced, !a.admitted) << "only pacing holds calls back here";
      if (a.admitted) {
        ++admitted[name];
        ++this_step;
      }
    }
    EXPECT_EQ(this_step, streams / stride) << "step " << step << ": the same share every step";
  }
  for (int s = 0; s < streams; ++s) EXPECT_EQ(admitted["s" + std::to_string(s)], steps / stride);
  // Tracked calls (pace): the same, and the render hint comes along.
  StreamGate tracks(1, 0);
  tracks.set_render_hint("t", 5);
  int tracked = 0;
  for (int i = 0; i < 12; ++i) {
    const auto a = tracks.pace("t", 3 * 16);
    EXPECT_EQ(a.render_hint, 5);
    tracked += a.admitted ? 1 : 0;
  }
  EXPECT_EQ(tracked, 4);
  EXPECT_TRUE(tracks.pace("t", 16).admitted) << "stride 1: no pacing";
}

TEST(StreamGatePacing, AFractionalStrideSendsItsShareOfEveryStreamAtEveryStep) {
  StreamGate gate(1, 0);
  const int streams = 5, steps = 20;  // one call in 2.5: 2 of the 5 streams each step
  std::map<std::string, int> admitted;
  for (int step = 0; step < steps; ++step) {
    int this_step = 0;
    for (int s = 0; s < streams; ++s) {
      if (gate.admit("s" + std::to_string(s), 40).admitted) {
        ++admitted["s" + std::to_string(s)];
        ++this_step;
      }
    }
    EXPECT_EQ(this_step, 2) << "step " << step;
  }
  for (const auto& [name, n] : admitted) EXPECT_EQ(n, steps * 2 / 5) << name;
}

TEST(StreamGatePacing, EveryNComesFirstAndPacingCountsOnlyTheCallsItSees) {
  StreamGate gate(2, 0);  // every other call
  int admitted = 0, paced = 0;
  for (int i = 0; i < 40; ++i) {
    const auto a = gate.admit("x", 5 * 16);
    admitted += a.admitted ? 1 : 0;
    paced += a.paced ? 1 : 0;
  }
  EXPECT_EQ(admitted, 4) << "every 10th call: every_n 2, then one in 5";
  EXPECT_EQ(paced, 16);
}

TEST(FairStrides, StreamsBelowTheLevelSendEveryCallTheOthersShareTheRest) {
  // The daemon takes one call in 4 of 200: 50 calls. Two rare streams (2 and 8 calls)
  // send all theirs; the two busy ones (90 and 100) share the other 40 at one stride.
  const std::vector<uint32_t> s = fair_stride16s({90, 2, 100, 8}, 4 * 16);
  EXPECT_EQ(s[1], 16u);
  EXPECT_EQ(s[3], 16u);
  EXPECT_EQ(s[0], s[2]);
  EXPECT_NEAR(16.0 * 190 / s[0], 40, 2) << "what the busy streams send: what is left";
  // Equal streams: the pacer's own stride, exactly (fractions too).
  EXPECT_EQ(fair_stride16s({30, 30, 30}, 40), (std::vector<uint32_t>{40, 40, 40}));
  EXPECT_EQ(fair_stride16s({30, 29, 31}, 64), (std::vector<uint32_t>{64, 64, 64}));
  // No pacing; no calls seen yet.
  EXPECT_EQ(fair_stride16s({5, 1}, 16), (std::vector<uint32_t>{16, 16}));
  EXPECT_EQ(fair_stride16s({0, 0}, 48), (std::vector<uint32_t>{48, 48}));
  EXPECT_TRUE(fair_stride16s({}, 48).empty());
}

// A scalar pushed every step beside 20 layers sent every 100th step, the daemon taking
// one call in 3.88: the layers' snapshots all go, the scalar gives way.
TEST(StreamGatePacing, AScalarEveryStepDoesNotThinRareSnapshots) {
  StreamGate gate(1, 0);
  const uint32_t stride16 = 62;  // 3.88
  int loss = 0, layers = 0, layer_calls = 0, calls = 0;
  for (int step = 0; step < 10000; ++step) {
    ++calls;
    loss += gate.admit("loss", stride16).admitted ? 1 : 0;
    if (step % 100 != 0) continue;
    for (int l = 0; l < 20; ++l) {
      ++calls;
      ++layer_calls;
      layers += gate.admit("layer" + std::to_string(l), stride16).admitted ? 1 : 0;
    }
  }
  EXPECT_GE(layers, layer_calls * 97 / 100) << "of " << layer_calls;
  EXPECT_LT(loss, 10000 / 2) << "the scalar is thinned";
  // In all, what the daemon takes (within a tenth).
  const double taken = static_cast<double>(calls) * 16 / stride16;
  EXPECT_NEAR(loss + layers, taken, taken / 10);
}

}  // namespace
}  // namespace tensorscope
