// held_summaries_test.cc — the client's held summary records (client/core/held_summaries.h):
// kept in order; past the budget the oldest are thinned, the first non-finite value and
// the largest max |x| of every tensor kept; past twice the budget the run's first NaN is
// the last to go. And ClientCore with a daemon that stops reading: every step's summary
// reaches it, in order, once it reads again.
#include "held_summaries.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client_core.h"
#include "fake_daemon.h"
#include "temp_dir.h"
#include "tensorscope/shared/summary_format.h"

namespace tensorscope {
namespace {

// One record of two tensors: `a` with `max_abs`, "net.b" finite unless `nan`.
std::string record(double max_abs, bool nan = false, const std::string& a_name = "net.a") {
  TensorSummary a, b;
  a.name = a_name;
  a.numel = 10;
  a.max_abs = max_abs;
  a.l2 = max_abs;
  b.name = "net.b";
  b.numel = 10;
  b.nan_count = nan ? 1 : 0;
  return encode_summaries({a, b});
}

std::vector<int64_t> held_steps(HeldSummaries h) {
  std::vector<int64_t> steps;
  for (; !h.empty(); h.pop_oldest()) steps.push_back(h.oldest().step);
  return steps;
}

bool holds(const std::vector<int64_t>& steps, int64_t step) {
  return std::find(steps.begin(), steps.end(), step) != steps.end();
}

TEST(HeldSummaries, InOrderWithinTheBudget) {
  HeldSummaries h(1 << 20);
  for (int64_t s = 0; s < 10; ++s) h.hold("net", s, record(1));
  EXPECT_EQ(h.size(), 10u);
  EXPECT_EQ(h.lost(), 0u);
  EXPECT_EQ(h.bytes(), 10 * record(1).size());
  EXPECT_EQ(held_steps(h), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(HeldSummaries, PastTheBudgetOlderRecordsThinButFindingsStay) {
  const size_t bytes = record(1).size();
  HeldSummaries h(100 * bytes);
  for (int64_t s = 0; s < 1000; ++s) {
    // Step 123: the first NaN; step 456: the largest value of "net.a".
    h.hold("net", s, record(s == 456 ? 1e6 : 1 + static_cast<double>(s % 10), s == 123 || s == 700));
    ASSERT_LE(h.bytes(), 100 * bytes) << "step " << s;
  }
  const std::vector<int64_t> steps = held_steps(h);
  EXPECT_TRUE(holds(steps, 123)) << "the first non-finite value";
  EXPECT_TRUE(holds(steps, 456)) << "the largest max |x|";
  EXPECT_TRUE(holds(steps, 999)) << "the newest";
  EXPECT_EQ(h.lost(), 1000 - steps.size());
  EXPECT_GT(steps.size(), 50u) << "thinned to the budget, not emptied";
  EXPECT_TRUE(std::is_sorted(steps.begin(), steps.end()));
  // Thinned evenly, like the overview's merged columns: no gap of hundreds of steps.
  int64_t widest = 0;
  for (size_t i = 1; i < steps.size(); ++i) widest = std::max(widest, steps[i] - steps[i - 1]);
  EXPECT_LE(widest, 64);
}

TEST(HeldSummaries, ARecordSentIsNoLongerAFindingTheNextThinningKnows) {
  const size_t bytes = record(1).size();
  HeldSummaries h(10 * bytes);
  h.hold("net", 0, record(100));  // the largest value, held
  for (int64_t s = 1; s < 10; ++s) h.hold("net", s, record(1));
  h.pop_oldest();  // step 0 sent: step 1..9 left, "net.a" largest is now 1 everywhere
  for (int64_t s = 10; s < 40; ++s) h.hold("net", s, record(s == 30 ? 50 : 1));
  EXPECT_TRUE(holds(held_steps(h), 30));
  EXPECT_LE(h.bytes(), 10 * bytes);
}

TEST(HeldSummaries, AfterTheDaemonCaughtUpNewRecordsAreThinnedFromScratch) {
  const size_t bytes = record(1).size();
  HeldSummaries h(100 * bytes);
  for (int64_t s = 0; s < 2000; ++s) h.hold("net", s, record(1));  // a long stall: a coarse stride
  while (h.bytes() > 40 * bytes) h.pop_oldest();                   // the daemon reads again
  for (int64_t s = 2000; s < 2070; ++s) h.hold("net", s, record(1));
  std::vector<int64_t> fresh;
  for (int64_t step : held_steps(h)) {
    if (step >= 2000) fresh.push_back(step);
  }
  ASSERT_GE(fresh.size(), 30u) << "the new records are not thinned at the old stride";
  for (size_t i = 1; i < fresh.size(); ++i) EXPECT_LE(fresh[i] - fresh[i - 1], 2);
}

TEST(HeldSummaries, FindingsAlonePastTwiceTheBudgetKeepTheFirstNaN) {
  const size_t bytes = record(1).size();
  HeldSummaries h(4 * bytes);
  // Every record the largest value of a tensor of its own: all of them findings.
  for (int64_t s = 0; s < 20; ++s) h.hold("net", s, record(1, s == 3, "t" + std::to_string(s)));
  EXPECT_LE(h.bytes(), 8 * bytes);
  const std::vector<int64_t> steps = held_steps(h);
  EXPECT_TRUE(holds(steps, 3));
  EXPECT_TRUE(holds(steps, 19)) << "the newest";
  EXPECT_EQ(h.lost() + steps.size(), 20u);
}

TEST(HeldSummaries, DroppingAllCountsThem) {
  HeldSummaries h(1 << 20);
  for (int64_t s = 0; s < 5; ++s) h.hold("net", s, record(1));
  h.drop_all();
  EXPECT_TRUE(h.empty());
  EXPECT_EQ(h.bytes(), 0u);
  EXPECT_EQ(h.lost(), 5u);
}

TEST(HeldSummaries, ARecordThatDoesNotParseIsHeldAndMayGo) {
  HeldSummaries h(8);
  h.hold("net", 0, "junk");
  h.hold("net", 1, "more junk");
  EXPECT_LE(h.size(), 1u);
  EXPECT_EQ(h.lost() + h.size(), 2u);
}

// A daemon that stops reading for a while, as a worker stalled on a slow disk does: the
// ring fills with tensors, and the summaries of every step still arrive, in order, and so
// do the whole tensors of the steps after a NaN (the evidence).
TEST(ClientCoreHeldSummaries, AStalledDaemonGetsEveryStepsSummaryInOrder) {
  testing::TempDir dir("ts-held");
  std::atomic<bool> stalled{true};
  std::mutex mutex;
  std::vector<int64_t> summary_steps;
  std::map<int64_t, int> tensors_at;  // step -> tensor records received
  int64_t nan_step = -1;
  testing::FakeDaemon sink(dir.path() + "/run", "held", [&](const RecordView& v) {
    while (stalled.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (v.header.kind == static_cast<uint8_t>(wire::TensorKind::kTensor)) {
      std::lock_guard<std::mutex> lock(mutex);
      ++tensors_at[v.header.step];
    }
    if (v.header.kind != static_cast<uint8_t>(wire::TensorKind::kSummary)) return;
    auto entries = parse_summaries(std::string_view(reinterpret_cast<const char*>(v.payload), v.header.payload_bytes));
    ASSERT_TRUE(entries.is_ok()) << entries.message();
    std::lock_guard<std::mutex> lock(mutex);
    summary_steps.push_back(v.header.step);
    if (nan_step < 0 && !(*entries)[1].finite()) nan_step = v.header.step;
  });
  ASSERT_TRUE(sink.start());
  CoreOptions o;
  o.session = "held";
  o.runtime_dir = dir.path() + "/run";
  o.shm_budget = 1 << 20;
  o.ring_slots = 16;
  o.connect_timeout_ms = 20000;
  o.pacing = false;
  ClientCore core(o);
  for (int i = 0; i < 2000 && !core.connected(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(core.connected());

  std::vector<float> values(16 * 1024, 1.0f);  // 64 KiB a tensor
  TensorRef t;
  t.data = values.data();
  t.dtype = wire::DType::kFloat32;
  t.ndim = 1;
  t.shape[0] = static_cast<int64_t>(values.size());
  t.strides[0] = 1;
  const int64_t steps = 200;
  core.hold_evidence(150, 152);  // the tracks' capture window after a NaN at step 150
  for (int64_t s = 0; s < steps; ++s) {
    core.set_step(s);
    for (int k = 0; k < 4; ++k) (void)core.send("t" + std::to_string(k), t, wire::TensorKind::kTensor, 0);
    EXPECT_EQ(core.send_summaries("net", record(1, s == 150), s), PushResult::kPushed) << "step " << s;
  }
  const ClientStats during = core.stats();
  EXPECT_GT(during.dropped_full, 0u) << "the ring was full: tensors were dropped";
  EXPECT_GT(during.summaries_held, 100u) << "the summaries waited instead";
  EXPECT_EQ(during.summaries_lost, 0u);
  EXPECT_EQ(during.evidence_held, 12u) << "steps 150..152, four tensors each";

  stalled = false;
  ASSERT_TRUE(core.wait_until_read(60000));
  EXPECT_EQ(core.stats().summaries_held, 0u);
  std::lock_guard<std::mutex> lock(mutex);
  ASSERT_EQ(summary_steps.size(), static_cast<size_t>(steps));
  for (int64_t s = 0; s < steps; ++s) EXPECT_EQ(summary_steps[static_cast<size_t>(s)], s);
  EXPECT_EQ(nan_step, 150);
  for (int64_t s = 150; s <= 152; ++s) EXPECT_EQ(tensors_at[s], 4) << "the evidence of step " << s;
  EXPECT_EQ(core.stats().evidence_held, 0u);
  EXPECT_EQ(core.stats().evidence_lost, 0u);
}

TEST(ClientCoreHeldSummaries, WithoutADaemonNothingIsHeldAndWaitingReturns) {
  testing::TempDir dir("ts-held");
  CoreOptions o;
  o.session = "none";
  o.runtime_dir = dir.path();
  o.connect_timeout_ms = 0;
  ClientCore core(o);
  EXPECT_EQ(core.send_summaries("net", record(1), 0), PushResult::kNotConnected);
  EXPECT_EQ(core.stats().summaries_held, 0u);
  EXPECT_FALSE(core.wait_until_read(50));
}

TEST(ClientCoreSteps, NextStepStopsAtTheLargestStep) {
  testing::TempDir dir("ts-held");
  CoreOptions o;
  o.session = "steps";
  o.runtime_dir = dir.path();
  ClientCore core(o);
  core.set_step(std::numeric_limits<int64_t>::max() - 1);
  EXPECT_EQ(core.next_step(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(core.next_step(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(core.step(), std::numeric_limits<int64_t>::max());
}

}  // namespace
}  // namespace tensorscope
