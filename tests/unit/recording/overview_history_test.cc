// overview_history_test.cc — the overview's matrices: rows in forward order with the
// gradients after them, the scrolling window, the whole run merged by max, late steps,
// the row limit.
#include "tensorscope/recording/overview_history.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace tensorscope::recording {
namespace {

constexpr size_t kGradNorm = static_cast<size_t>(OverviewMetricId::kGradNorm);
constexpr size_t kActStd = static_cast<size_t>(OverviewMetricId::kActStd);
constexpr size_t kZeros = static_cast<size_t>(OverviewMetricId::kZeroFraction);
constexpr size_t kUpdate = static_cast<size_t>(OverviewMetricId::kUpdateRatio);

TensorSummary summary(const std::string& name, wire::TensorKind kind, double value) {
  TensorSummary s;
  s.name = name;
  s.kind = kind;
  s.numel = 100;
  s.l2 = value;
  s.std = value;
  s.zero_count = 25;
  return s;
}

// A step of a three-module model as a track sends it: outputs in forward order, then
// gradients as backward delivers them (last module first).
std::vector<TensorSummary> model_step(double scale) {
  using K = wire::TensorKind;
  return {summary("net.a", K::kActivation, 1 * scale),     summary("net.b", K::kActivation, 2 * scale),
          summary("net.c", K::kActivation, 3 * scale),     summary("net.c.grad", K::kGradient, 30 * scale),
          summary("net.b.grad", K::kGradient, 20 * scale), summary("net.a.grad", K::kGradient, 10 * scale)};
}

TEST(OverviewMetricsTest, NamesAreUniqueAndFound) {
  for (size_t m = 0; m < kOverviewMetrics.size(); ++m) {
    EXPECT_EQ(overview_metric_index(kOverviewMetrics[m].name), static_cast<int>(m));
  }
  EXPECT_EQ(overview_metric_index("nope"), -1);
}

TEST(OverviewHistoryTest, RowsInForwardOrderGradientsInModuleOrder) {
  OverviewHistory h;
  EXPECT_TRUE(h.observe(0, model_step(1)));
  const OverviewGrid grads = h.window(kGradNorm);
  EXPECT_EQ(grads.rows, (std::vector<std::string>{"net.a.grad", "net.b.grad", "net.c.grad"}));
  EXPECT_FLOAT_EQ(grads.value(0, 0), 10);
  EXPECT_FLOAT_EQ(grads.value(2, 0), 30);
  const OverviewGrid acts = h.window(kActStd);
  EXPECT_EQ(acts.rows, (std::vector<std::string>{"net.a", "net.b", "net.c"}));
  EXPECT_FLOAT_EQ(h.window(kZeros).value(1, 0), 0.25f);
  EXPECT_FALSE(h.has_rows(kUpdate));
  EXPECT_TRUE(h.window(kUpdate).rows.empty());
}

// Outputs that are never exactly zero (a convolution's, its ReLU untracked) can show no
// dead units: the metric has no rows until an activation with zeros comes.
TEST(OverviewHistoryTest, TheFractionOfZerosHasRowsOnceAnActivationHadZeros) {
  OverviewHistory h;
  std::vector<TensorSummary> step = model_step(1);
  for (TensorSummary& s : step) s.zero_count = 0;
  step[3].zero_count = 50;  // a gradient's zeros are no dead units
  h.observe(0, step);
  EXPECT_TRUE(h.has_rows(kActStd));
  EXPECT_FALSE(h.has_rows(kZeros));
  step[1].zero_count = 1;
  h.observe(1, step);
  EXPECT_TRUE(h.has_rows(kZeros));
  EXPECT_EQ(h.whole_run(kZeros).rows, (std::vector<std::string>{"net.a", "net.b", "net.c"}));
}

// The numerics' metrics: rows for every kind once a summary with numerics came (a track
// with a cast format beside one without: the other's rows show no value), merged by max.
TEST(OverviewHistoryTest, NumericsMetricsHaveRowsOnceASummaryHadThem) {
  constexpr size_t kRange = static_cast<size_t>(OverviewMetricId::kDynamicRange);
  constexpr size_t kUnder = static_cast<size_t>(OverviewMetricId::kUnderflow);
  constexpr size_t kOver = static_cast<size_t>(OverviewMetricId::kOverflow);
  OverviewHistory h(/*window_columns=*/10, /*max_run_columns=*/2);
  h.observe(0, model_step(1));
  for (size_t m : {kRange, kUnder, kOver}) EXPECT_FALSE(h.has_rows(m)) << kOverviewMetrics[m].name;
  const size_t memory = h.memory_bytes();
  for (int64_t step = 1; step <= 4; ++step) {
    std::vector<TensorSummary> with = model_step(1);
    for (size_t i = 0; i + 1 < with.size(); ++i) {  // net.a.grad: a track without numerics
      with[i].cast_format = CastFormat::kBf16;
      with[i].max_abs = 8;
      with[i].min_abs_nonzero = std::ldexp(1.0, -static_cast<int>(step));
      with[i].underflow_count = static_cast<uint64_t>(step);
      with[i].overflow_count = step == 2 ? 10 : 0;
    }
    h.observe(step, with);
  }
  EXPECT_GT(h.memory_bytes(), memory);
  for (size_t m : {kRange, kUnder, kOver}) {
    ASSERT_TRUE(h.has_rows(m));
    EXPECT_EQ(h.window(m).rows,
              (std::vector<std::string>{"net.a", "net.b", "net.c", "net.a.grad", "net.b.grad", "net.c.grad"}));
  }
  const OverviewGrid range = h.window(kRange);
  EXPECT_TRUE(std::isnan(range.value(0, 0))) << "step 0 had no numerics";
  EXPECT_FLOAT_EQ(range.value(0, 1), 4);  // log2(8 / 2^-1)
  EXPECT_FLOAT_EQ(range.value(2, 4), 7);
  EXPECT_TRUE(std::isnan(range.value(3, 4))) << "net.a.grad: no numerics";
  EXPECT_FLOAT_EQ(h.window(kUnder).value(1, 3), 0.03f);
  EXPECT_FLOAT_EQ(h.window(kOver).value(1, 2), 0.1f);
  // The whole run in two columns (steps 0-3 and 4): the largest of each.
  const OverviewGrid run = h.whole_run(kOver);
  ASSERT_EQ(run.columns(), 2u);
  EXPECT_FLOAT_EQ(run.value(0, 0), 0.1f);
  EXPECT_FLOAT_EQ(run.value(0, 1), 0.0f);
  EXPECT_FLOAT_EQ(h.whole_run(kRange).value(0, 0), 6);
}

TEST(OverviewHistoryTest, WindowKeepsTheLastColumnsWholeRunMergesByMax) {
  OverviewHistory h(/*window_columns=*/10, /*max_run_columns=*/8);
  for (int64_t step = 0; step < 40; ++step) {
    auto s = model_step(1 + static_cast<double>(step));
    if (step == 13) s[1].nan_count = 3;  // net.b at step 13
    EXPECT_TRUE(h.observe(step, s));
    EXPECT_FALSE(h.observe(step, {}));  // a second track's record of the same step
  }
  const OverviewGrid w = h.window(kActStd);
  ASSERT_EQ(w.columns(), 10u);
  EXPECT_EQ(w.first_steps.front(), 30);
  EXPECT_EQ(w.first_steps.back(), 39);
  EXPECT_FLOAT_EQ(w.value(0, 9), 40);
  const OverviewGrid run = h.whole_run(kActStd);
  EXPECT_LE(run.columns(), 8u);
  EXPECT_EQ(run.steps_per_column, 8);
  EXPECT_EQ(run.first_steps.front(), 0);
  EXPECT_EQ(run.last_steps.back(), 39);
  // Column 1 covers steps 8..15: its largest value (step 15: scale 16) and the NaN of step 13.
  EXPECT_EQ(run.first_steps[1], 8);
  EXPECT_EQ(run.last_steps[1], 15);
  EXPECT_FLOAT_EQ(run.value(0, 1), 16);
  EXPECT_TRUE(run.is_nonfinite(1, 1));
  EXPECT_FALSE(run.is_nonfinite(0, 1));
  EXPECT_FALSE(run.is_nonfinite(1, 0));
  EXPECT_EQ(h.steps_seen(), 40);
}

TEST(OverviewHistoryTest, AtStepIsTheWholeRunsColumnHoldingIt) {
  OverviewHistory h(/*window_columns=*/10, /*max_run_columns=*/8);
  EXPECT_EQ(h.at_step(kActStd, 3).columns(), 0u);
  for (int64_t step = 5; step < 40; ++step) h.observe(step, model_step(1 + static_cast<double>(step)));
  // 8 steps a column from step 5: 5..12, 13..20, ... Step 14's is 13..20, its largest value (step 20's).
  const OverviewGrid at = h.at_step(kActStd, 14);
  ASSERT_EQ(at.columns(), 1u);
  EXPECT_EQ(at.first_steps[0], 13);
  EXPECT_EQ(at.last_steps[0], 20);
  EXPECT_EQ(at.rows, h.whole_run(kActStd).rows);
  EXPECT_FLOAT_EQ(at.value(0, 0), 21);
  EXPECT_EQ(h.at_step(kActStd, 3).columns(), 0u) << "before the first step";
  EXPECT_EQ(h.at_step(kActStd, 1000).last_steps.at(0), 39) << "after the last: the last";
}

TEST(OverviewHistoryTest, ALateStepOfAnotherTrackFillsItsColumn) {
  OverviewHistory h;
  using K = wire::TensorKind;
  h.observe(0, {summary("a", K::kActivation, 1)});
  h.observe(2, {summary("a", K::kActivation, 1)});
  h.observe(1, {summary("b", K::kActivation, 5)});  // between the two
  const OverviewGrid g = h.window(kActStd);
  ASSERT_EQ(g.first_steps, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(std::isnan(g.value(1, 0)));
  EXPECT_FLOAT_EQ(g.value(1, 1), 5);
  EXPECT_EQ(h.newest_step(), 2);
}

TEST(OverviewHistoryTest, UpdateRatioOnlyForParametersThatHaveOne) {
  OverviewHistory h;
  TensorSummary w = summary("net.fc.weight", wire::TensorKind::kParameter, 1);
  h.observe(0, {w});
  w.has_update_ratio = true;
  w.update_ratio = 1e-3;
  h.observe(1, {w});
  const OverviewGrid g = h.window(kUpdate);
  ASSERT_EQ(g.rows.size(), 1u);
  EXPECT_TRUE(std::isnan(g.value(0, 0)));
  EXPECT_FLOAT_EQ(g.value(0, 1), 1e-3f);
  EXPECT_TRUE(h.window(kActStd).rows.empty());
}

TEST(OverviewHistoryTest, RowsBeyondTheLimitAreCounted) {
  OverviewHistory h(10, 10, /*max_rows=*/2);
  h.observe(0, model_step(1));
  const OverviewGrid g = h.window(kActStd);
  EXPECT_EQ(g.rows.size(), 2u);
  EXPECT_EQ(g.summaries_left_out, 4);
}

// A history of `steps` steps of model_step, merged into at most `run_columns` columns.
OverviewHistory long_run(int64_t steps, int run_columns) {
  OverviewHistory h(1, run_columns);
  for (int64_t s = 0; s < steps; ++s) h.observe(s, model_step(1.0 + static_cast<double>(s % 7)));
  return h;
}

TEST(FitOverviewGridTest, NoRowLimitFitsColumnsOnly) {
  // The live view asks for every row (SIZE_MAX) and fewer columns than the run has: the
  // block side must not overflow (it once made an endless loop that allocated without end).
  const OverviewGrid run = long_run(700, 1024).whole_run(kActStd);
  ASSERT_EQ(run.rows.size(), 3u);
  ASSERT_GT(run.columns(), 600u);
  const OverviewGrid fitted = fit_overview_grid(run, SIZE_MAX, 600);
  EXPECT_EQ(fitted.rows, run.rows);  // rows untouched
  EXPECT_LE(fitted.columns(), 600u);
  EXPECT_GE(fitted.columns(), 300u);
  EXPECT_EQ(fitted.values.size(), fitted.rows.size() * fitted.columns());
  EXPECT_EQ(fitted.first_steps.front(), 0);
  EXPECT_EQ(fitted.last_steps.back(), 699);
  // Merged by max: every cell of a two-step block holds the larger of its steps' values.
  EXPECT_EQ(fitted.steps_per_column, 2 * run.steps_per_column);
  EXPECT_FLOAT_EQ(fitted.value(0, 0), std::max(run.value(0, 0), run.value(0, 1)));
}

TEST(FitOverviewGridTest, EveryBoundFromOneToUnlimited) {
  const OverviewGrid run = long_run(50, 64).whole_run(kActStd);
  for (size_t rows : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, SIZE_MAX - 1, SIZE_MAX}) {
    for (size_t cols : {size_t{0}, size_t{1}, size_t{7}, size_t{49}, size_t{50}, SIZE_MAX}) {
      const OverviewGrid g = fit_overview_grid(run, rows, cols);
      EXPECT_LE(g.rows.size(), std::max<size_t>(1, rows)) << rows << " x " << cols;
      EXPECT_LE(g.columns(), std::max<size_t>(1, cols)) << rows << " x " << cols;
      EXPECT_GE(g.rows.size(), 1u);
      EXPECT_GE(g.columns(), 1u);
      EXPECT_EQ(g.values.size(), g.rows.size() * g.columns());
      EXPECT_EQ(g.last_steps.back(), 49);
    }
  }
}

// A compacted table's lines (64 steps each) then whole steps: the whole run's columns
// cover about the same number of steps each, the old ones not squeezed into a few.
TEST(OverviewHistoryTest, LinesStandingForManyStepsWidenTheRunsColumns) {
  OverviewHistory h(10, 1024);
  for (int64_t s = 0; s < 6400; s += 64) h.observe(s, model_step(1), 64);
  for (int64_t s = 6400; s < 6528; ++s) h.observe(s, model_step(2));
  const OverviewGrid g = h.whole_run(kActStd);
  EXPECT_GE(g.steps_per_column, 64);
  EXPECT_EQ(g.first_steps.front(), 0);
  EXPECT_EQ(g.last_steps.back(), 6527);
  for (size_t c = 0; c + 1 < g.columns(); ++c) {
    EXPECT_LE(g.last_steps[c] - g.first_steps[c] + 1, g.steps_per_column) << "column " << c;
  }
  EXPECT_LE(g.columns(), 6528u / 64 + 2);
  EXPECT_FLOAT_EQ(g.value(0, g.columns() - 1), 2) << "the newest steps' values";
}

}  // namespace
}  // namespace tensorscope::recording
