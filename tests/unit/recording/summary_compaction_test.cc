// summary_compaction_test.cc — a long run's summary table kept within its size: the older
// half merged two by two per tensor (steps added up, extremes kept), each tensor's first
// NaN and the steps with anomalies kept whole, the newest half as it was; compacted again
// and again, older steps hold ever more of them and every step is still accounted for.
#include "tensorscope/recording/summary_compaction.h"

#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "tensorscope/recording/summary_table.h"

namespace tensorscope::recording {
namespace {

TensorSummary tensor(const std::string& name, double l2, uint64_t nans = 0) {
  TensorSummary s;
  s.name = name;
  s.kind = wire::TensorKind::kActivation;
  s.numel = 100;
  s.l2 = l2;
  s.max_abs = l2 / 2;
  s.mean = l2 / 10;
  s.std = l2 / 5;
  s.zero_count = 10;
  s.nan_count = nans;
  return s;
}

// `steps` steps of two tensors; "b" has NaNs from `bad_step` on.
std::string table(int64_t steps, int64_t bad_step) {
  std::string text = std::string(kSummaryTableHeader) + "\n";
  for (int64_t s = 0; s < steps; ++s) {
    text += summary_table_lines(s, 0, "net",
                                {tensor("a", 1 + static_cast<double>(s % 10)), tensor("b", 2, s >= bad_step ? 5 : 0)});
  }
  return text;
}

std::vector<SummaryTableRow> rows_of(const std::string& text) {
  std::vector<SummaryTableRow> rows;
  EXPECT_EQ(for_each_summary_table_row(text, [&rows](const SummaryTableRow& r) { rows.push_back(r); }), 0u);
  return rows;
}

std::string compacted(const std::string& text, const std::set<int64_t>& keep, uint64_t target,
                      CompactedTable* result = nullptr) {
  std::string out;
  const CompactedTable r =
      compact_summary_table(text, keep, target, [&out](std::string_view piece) { out.append(piece); });
  EXPECT_EQ(r.bytes_out, out.size());
  if (result != nullptr) *result = r;
  return out;
}

TEST(SummaryCompaction, OlderStepsMergeInBlocksKeepingExtremesAndFindings) {
  const std::string text = table(100, 30);
  CompactedTable result;
  const std::string out = compacted(text, {12}, text.size() / 2, &result);
  EXPECT_EQ(result.lines_in, 200u);
  EXPECT_EQ(result.skipped, 0u);
  EXPECT_EQ(result.merged_before, 75) << "the newest quarter of the lines: steps 75..99 of two tensors";
  EXPECT_GE(result.block_steps, 2);
  EXPECT_LE(out.size(), text.size() / 2 + text.size() / 20) << "about the target";
  const auto rows = rows_of(out);
  EXPECT_EQ(rows.size(), result.lines_out);
  std::map<std::string, int64_t> steps;
  bool first_nan_whole = false, kept_step_whole = false;
  int merged_lines = 0;
  for (const auto& r : rows) {
    steps[r.summary.name] += r.steps;
    if (r.step >= 75) {
      EXPECT_EQ(r.steps, 1) << "the newest as they were";
    }
    if (r.summary.name == "b" && r.step == 30) first_nan_whole = r.steps == 1 && r.summary.nan_count == 5;
    if (r.step == 12) kept_step_whole = kept_step_whole || r.steps == 1;
    if (r.summary.name == "a" && r.steps > 1) {
      // The largest l2 of the steps it stands for, the mean of their means.
      ++merged_lines;
      double l2 = 0, mean = 0;
      int n = 0;
      for (int64_t s = r.step; s < r.step + r.steps + (r.step < 12 && r.step + r.steps > 12 ? 1 : 0); ++s) {
        if (s == 12) continue;  // kept as a line of its own
        l2 = std::max(l2, 1 + static_cast<double>(s % 10));
        mean += (1 + static_cast<double>(s % 10)) / 10;
        ++n;
      }
      EXPECT_DOUBLE_EQ(r.summary.l2, l2) << "step " << r.step;
      EXPECT_DOUBLE_EQ(r.summary.max_abs, l2 / 2);
      EXPECT_NEAR(r.summary.mean, mean / n, 1e-12);
      EXPECT_NEAR(r.summary.zero_fraction(), 0.1, 1e-12);
      EXPECT_EQ(r.step / result.block_steps, (r.step + r.steps - 1) / result.block_steps) << "within one block";
    }
    if (r.summary.name == "b" && r.step > 30 && r.step < 75) {
      EXPECT_EQ(r.summary.nan_count, 5u * static_cast<uint64_t>(r.steps)) << "NaNs add up";
    }
  }
  EXPECT_GT(merged_lines, 0);
  EXPECT_EQ(steps["a"], 100) << "every step still accounted for";
  EXPECT_EQ(steps["b"], 100);
  EXPECT_TRUE(first_nan_whole) << "the first NaN of b stays a line of its own";
  EXPECT_TRUE(kept_step_whole) << "a step with an anomaly stays whole";
}

TEST(SummaryCompaction, AsTheTableGrowsOlderStepsShareOneResolutionAndTheNewestStayWhole) {
  std::string text = table(1024, 1000000);
  const uint64_t limit = text.size() / 4;
  // The run goes on: a step's lines appended, the table compacted when past the limit.
  for (int64_t s = 1024; s < 8192; ++s) {
    text += summary_table_lines(s, 0, "net", {tensor("a", 1), tensor("b", 2)});
    if (text.size() > limit) text = compacted(text, {}, limit / 5 * 3);
  }
  const auto rows = rows_of(text);
  EXPECT_LE(text.size(), limit);
  int64_t total = 0;
  std::map<int64_t, int> widths;  // of "a"'s merged lines but its last (a block cut short)
  std::vector<const SummaryTableRow*> a;
  for (const auto& r : rows) {
    if (r.summary.name == "a") a.push_back(&r);
  }
  for (size_t i = 0; i < a.size(); ++i) {
    total += a[i]->steps;
    if (a[i]->steps > 1 && i + 1 < a.size() && a[i + 1]->steps > 1) ++widths[a[i]->steps];
  }
  EXPECT_EQ(total, 8192);
  EXPECT_EQ(a.back()->steps, 1);
  ASSERT_FALSE(widths.empty());
  // One resolution for the older steps (a run of the block before it at most).
  EXPECT_LE(widths.size(), 2u);
  std::string seen;
  for (const auto& [w, n] : widths) seen += std::to_string(w) + " x" + std::to_string(n) + " ";
  EXPECT_GT(widths.rbegin()->second, 8) << "most older lines at the coarsest resolution: " << seen << "of " << a.size();
}

// Numerics merge into the magnitudes of the steps together (the dynamic range of their
// union) and the largest fractions lost.
TEST(SummaryCompaction, NumericsKeepTheWidestRangeAndTheLargestLosses) {
  std::string text = std::string(kSummaryTableHeader) + "\n";
  for (int64_t s = 0; s < 64; ++s) {
    TensorSummary t = tensor("a", 8);  // max |x| 4
    t.cast_format = CastFormat::kFp16;
    t.min_abs_nonzero = std::ldexp(1.0, -static_cast<int>(s % 16));  // range 2 + s % 16 binades
    t.underflow_count = static_cast<uint64_t>(s % 8);
    t.overflow_count = s == 5 ? 3 : 0;
    text += summary_table_lines(s, 0, "net", {t});
  }
  CompactedTable result;
  const std::string out = compacted(text, {}, text.size() / 4, &result);
  ASSERT_GE(result.block_steps, 8);
  int merged = 0;
  for (const auto& r : rows_of(out)) {
    ASSERT_TRUE(r.summary.has_numerics());
    EXPECT_EQ(r.summary.cast_format, CastFormat::kFp16);
    if (r.steps < 8) continue;
    ++merged;
    const int64_t last = r.step + r.steps - 1;
    const double widest = 2.0 + static_cast<double>(std::min<int64_t>(15, last - r.step + r.step % 16));
    EXPECT_NEAR(r.summary.dynamic_range(), widest, 1e-9) << "steps " << r.step << ".." << last;
    EXPECT_EQ(r.summary.underflow_count, 7u);
    EXPECT_EQ(r.summary.overflow_count, r.step <= 5 && 5 <= last ? 3u : 0u);
  }
  EXPECT_GT(merged, 0);
}

TEST(SummaryCompaction, ATableWithoutTheStepsColumnAndBadLinesIsRead) {
  const std::string header = kSummaryTableHeader;
  std::string text = header.substr(0, header.find(",steps")) + "\n";
  for (int s = 0; s < 10; ++s) text += std::to_string(s) + ",0,net,0,x,activation,10,1,1,0,1,0,0,0,\n";
  text += "not a line\n";
  CompactedTable result;
  const std::string out = compacted(text, {}, 0, &result);
  EXPECT_EQ(result.skipped, 1u);
  EXPECT_EQ(out.substr(0, out.find('\n')), kSummaryTableHeader);
  int64_t total = 0;
  for (const auto& r : rows_of(out)) total += r.steps;
  EXPECT_EQ(total, 10);
  EXPECT_EQ(compacted("", {}, 0), std::string(kSummaryTableHeader) + "\n");
}

}  // namespace
}  // namespace tensorscope::recording
