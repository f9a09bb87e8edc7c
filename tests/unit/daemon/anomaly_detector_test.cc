// What a worker flags in a producer's summaries: the first non-finite value once (the
// first tensor in the record's order), explosions against the running median (not of
// values too small to matter), dead units after dead_steps steps in a row, and nothing
// for healthy data.
#include "worker/anomaly_detector.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace tensorscope::daemon {
namespace {

TensorSummary entry(const std::string& name, double l2, wire::TensorKind kind = wire::TensorKind::kActivation) {
  TensorSummary s;
  s.name = name;
  s.kind = kind;
  s.numel = 100;
  s.l2 = l2;
  s.max_abs = l2;
  return s;
}

AnomaliesConfig config() {
  AnomaliesConfig c;
  c.explosion_factor = 10;
  c.explosion_window = 8;
  c.explosion_min_rms = 0;
  c.dead_fraction = 0.99;
  c.dead_steps = 5;
  return c;
}

TEST(AnomalyDetector, TheFirstNonFiniteValueOnceNamingTheFirstTensor) {
  AnomalyDetector d(config());
  EXPECT_TRUE(d.observe("net", 0, 3, 77, {entry("a", 1), entry("b", 1)}).empty());
  std::vector<TensorSummary> bad = {entry("a", 1), entry("b", 1), entry("c", 1)};
  bad[1].nan_count = 4;
  bad[2].inf_count = 1;
  const auto found = d.observe("net", 12, 3, 77, bad);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].type, "non_finite");
  EXPECT_EQ(found[0].step, 12);
  EXPECT_EQ(found[0].rank, 3);
  EXPECT_EQ(found[0].stream, "b");
  EXPECT_EQ(found[0].details["later_non_finite"], 1);
  EXPECT_EQ(found[0].details["order"], 1) << "its place in the record: forward order";
  EXPECT_NE(found[0].message.find("step 12, rank 3, b"), std::string::npos) << found[0].message;
  EXPECT_TRUE(d.observe("net", 13, 3, 77, bad).empty()) << "reported once";
}

TEST(AnomalyDetector, AnExplosionAgainstTheRunningMedianOncePerStream) {
  AnomalyDetector d(config());
  for (int step = 0; step < 8; ++step) {
    EXPECT_TRUE(d.observe("net", step, 0, 1, {entry("a", 1.0 + 0.1 * (step % 3)), entry("b", 2)}).empty());
  }
  EXPECT_TRUE(d.observe("net", 8, 0, 1, {entry("a", 9), entry("b", 2)}).empty()) << "9x: under the factor";
  const auto found = d.observe("net", 9, 0, 1, {entry("a", 50), entry("b", 2)});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].type, "explosion");
  EXPECT_EQ(found[0].stream, "a");
  EXPECT_NEAR(found[0].details["ratio"].get<double>(), 50 / 1.1, 1e-9);
  EXPECT_EQ(found[0].details["order"], 0);
  EXPECT_TRUE(d.observe("net", 10, 0, 1, {entry("a", 500), entry("b", 2)}).empty()) << "once per stream";
}

TEST(AnomalyDetector, NoExplosionBeforeHalfTheWindow) {
  AnomalyDetector d(config());
  for (int step = 0; step < 3; ++step) EXPECT_TRUE(d.observe("net", step, 0, 1, {entry("a", 1)}).empty());
  EXPECT_TRUE(d.observe("net", 3, 0, 1, {entry("a", 1000)}).empty()) << "3 steps of 8 are no baseline";
  EXPECT_TRUE(d.observe("net", 4, 0, 1, {entry("a", 1)}).empty());
  EXPECT_EQ(d.observe("net", 5, 0, 1, {entry("a", 1000)}).size(), 1u) << "5 of 8 are";
}

// Norms that rose before the baseline was long enough are not reported when it is (at
// a step that is not the one they rose at).
TEST(AnomalyDetector, NoExplosionDatedLate) {
  AnomalyDetector d(config());
  for (int step = 0; step < 3; ++step) EXPECT_TRUE(d.observe("net", step, 0, 1, {entry("a", 1)}).empty());
  for (int step = 3; step < 12; ++step) {
    EXPECT_TRUE(d.observe("net", step, 0, 1, {entry("a", 1000)}).empty()) << step;
  }
}

// A healthy run's gradient near zero (the loss of easy batches) grows 160x on a harder
// batch: no explosion while its RMS stays under explosion_min_rms; a real one above it.
TEST(AnomalyDetector, SmallValuesThatGrowAreNoExplosion) {
  AnomaliesConfig c = config();
  c.explosion_min_rms = 1;
  AnomalyDetector d(c);
  for (int step = 0; step < 8; ++step) {
    EXPECT_TRUE(d.observe("net", step, 0, 1, {entry("g", 2.5e-4, wire::TensorKind::kGradient)}).empty());
  }
  EXPECT_TRUE(d.observe("net", 8, 0, 1, {entry("g", 0.04, wire::TensorKind::kGradient)}).empty()) << "RMS 0.004";
  const auto found = d.observe("net", 9, 0, 1, {entry("g", 25, wire::TensorKind::kGradient)});  // RMS 2.5
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NEAR(found[0].details["rms"].get<double>(), 2.5, 1e-12);
}

TEST(AnomalyDetector, DeadUnitsAfterDeadStepsInARowOfActivationsOnly) {
  AnomalyDetector d(config());
  auto dead = [](const std::string& name, double zeros, wire::TensorKind kind) {
    TensorSummary s = entry(name, 1, kind);
    s.zero_count = static_cast<uint64_t>(zeros * 100);
    return s;
  };
  for (int step = 0; step < 4; ++step) {
    EXPECT_TRUE(d.observe("net", step, 0, 1,
                          {dead("relu", 1.0, wire::TensorKind::kActivation),
                           dead("relu.grad", 1.0, wire::TensorKind::kGradient)})
                    .empty());
  }
  EXPECT_TRUE(d.observe("net", 4, 0, 1, {dead("relu", 0.5, wire::TensorKind::kActivation)}).empty()) << "run broken";
  std::vector<Anomaly> found;
  for (int step = 5; step < 10 && found.empty(); ++step) {
    found = d.observe("net", step, 0, 1, {dead("relu", 0.995, wire::TensorKind::kActivation)});
  }
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].type, "dead_units");
  EXPECT_EQ(found[0].stream, "relu");
  EXPECT_EQ(found[0].step, 9);
}

TEST(AnomalyDetector, HealthyNoisyTrainingIsNeverFlagged) {
  AnomalyDetector d(config());
  for (int step = 0; step < 1000; ++step) {
    const double decay = std::exp(-step / 300.0);  // norms that shrink 20x over the run
    std::vector<TensorSummary> entries;
    for (int i = 0; i < 10; ++i)
      entries.push_back(entry("m" + std::to_string(i), decay * (1 + 0.3 * std::sin(step + i))));
    EXPECT_TRUE(d.observe("net", step, 0, 1, entries).empty()) << step;
  }
}

}  // namespace
}  // namespace tensorscope::daemon
