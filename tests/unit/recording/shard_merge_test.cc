// ShardMerger (recording/shard_merge.h): the rows of a DTensor's shards, as the ranks'
// tables hold them, make the whole tensor's row — its summary and update ratio those of
// the whole — as soon as every shard is in; replicas count once; Partial sums, missing
// shards, parts of two runs and compacted rows make none and are counted, open parts
// stay within their bound, and a table read again adds nothing.
#include "tensorscope/recording/shard_merge.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace tensorscope::recording {
namespace {

// The summary of x (no NaN), as a rank's row of shard `dims` of a tensor of `whole` elements.
SummaryTableRow row_of(const std::vector<double>& x, int64_t step, int rank, std::vector<MeshDim> dims,
                       uint64_t whole) {
  SummaryTableRow r;
  r.step = step;
  r.rank = rank;
  r.track = "net";
  r.order = 2;
  TensorSummary& s = r.summary;
  s.name = "net.fc.weight";
  s.kind = wire::TensorKind::kParameter;
  s.numel = x.size();
  double sum = 0, squares = 0;
  for (double v : x) {
    sum += v;
    squares += v * v;
    s.zero_count += v == 0 ? 1 : 0;
    s.max_abs = std::max(s.max_abs, std::fabs(v));
  }
  s.mean = sum / static_cast<double>(x.size());
  s.std = std::sqrt(std::max(0.0, squares / static_cast<double>(x.size()) - s.mean * s.mean));
  s.l2 = std::sqrt(squares);
  s.shard.whole_numel = whole;
  s.shard.dims = std::move(dims);
  return r;
}

std::vector<double> slice(const std::vector<double>& x, size_t from, size_t to) {
  return std::vector<double>(x.begin() + static_cast<long>(from), x.begin() + static_cast<long>(to));
}

double ratio(const std::vector<double>& now, const std::vector<double>& before) {
  double change = 0, base = 0;
  for (size_t i = 0; i < now.size(); ++i) {
    change += (now[i] - before[i]) * (now[i] - before[i]);
    base += before[i] * before[i];
  }
  return std::sqrt(change / base);
}

TEST(ShardMerge, TheShardsOfEachStepMakeTheWholeTensorsRow) {
  // A parameter of 10 elements in 2 uneven shards (6 + 4), over 3 steps.
  std::vector<std::vector<double>> steps = {{1, 2, 0, -3, 4, 5, 6, 0, 7, -8}};
  for (int k = 1; k < 3; ++k) {
    std::vector<double> next = steps.back();
    for (size_t i = 0; i < next.size(); ++i) next[i] = next[i] * (1.0 + 0.01 * k) + (i == 9 ? 0.5 : 0.0);
    steps.push_back(next);
  }
  ShardMerger merger;
  for (int rank : {1, 0}) {  // (rank 1's table read first)
    for (int64_t step = 0; step < 3; ++step) {
      const auto& x = steps[static_cast<size_t>(step)];
      SummaryTableRow r = row_of(rank == 0 ? slice(x, 0, 6) : slice(x, 6, 10), step, rank,
                                 {{MeshPlacement::kShard, 0, static_cast<uint32_t>(rank), 2}}, 10);
      if (step > 0) {
        const auto& before = steps[static_cast<size_t>(step - 1)];
        r.summary.has_update_ratio = true;
        r.summary.update_ratio =
            rank == 0 ? ratio(slice(x, 0, 6), slice(before, 0, 6)) : ratio(slice(x, 6, 10), slice(before, 6, 10));
      }
      merger.add(r);
    }
  }
  const std::vector<SummaryTableRow> whole = merger.whole_rows();
  ASSERT_EQ(whole.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    const SummaryTableRow expected = row_of(steps[k], static_cast<int64_t>(k), -1, {}, 0);
    const SummaryTableRow& got = whole[k];
    EXPECT_EQ(got.step, static_cast<int64_t>(k));
    EXPECT_EQ(got.rank, -1);
    EXPECT_EQ(got.track, "net");
    EXPECT_EQ(got.summary.name, "net.fc.weight");
    EXPECT_FALSE(got.summary.shard.sharded());
    EXPECT_EQ(got.summary.numel, 10u);
    EXPECT_EQ(got.summary.zero_count, 2u);
    EXPECT_EQ(got.summary.max_abs, expected.summary.max_abs);
    EXPECT_NEAR(got.summary.l2, expected.summary.l2, 1e-12);
    EXPECT_NEAR(got.summary.mean, expected.summary.mean, 1e-12);
    EXPECT_NEAR(got.summary.std, expected.summary.std, 1e-12);
    EXPECT_EQ(got.summary.has_update_ratio, k > 0);
    if (k > 0) {
      EXPECT_NEAR(got.summary.update_ratio, ratio(steps[k], steps[k - 1]), 1e-12);
    }
  }
  EXPECT_EQ(merger.left_out().incomplete, 0u);
}

TEST(ShardMerge, AReplicaCountsOnceAndAMissingShardMakesNoRow) {
  const std::vector<double> x = {1, 2, 3, 4};
  ShardMerger merger;
  // A 2 x 2 mesh: dim 0 replicates, dim 1 shards. Step 0 complete (with replicas), step 1
  // missing the shard at coordinate 1.
  for (uint32_t replica : {0u, 1u}) {
    for (uint32_t shard : {0u, 1u}) {
      const auto part = slice(x, 2 * shard, 2 * shard + 2);
      const std::vector<MeshDim> dims = {{MeshPlacement::kReplicate, 0, replica, 2},
                                         {MeshPlacement::kShard, 0, shard, 2}};
      merger.add(row_of(part, 0, static_cast<int>(2 * replica + shard), dims, 4));
      if (shard == 0) merger.add(row_of(part, 1, static_cast<int>(2 * replica), dims, 4));
    }
  }
  const auto whole = merger.whole_rows();
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].step, 0);
  EXPECT_EQ(whole[0].summary.numel, 4u);
  EXPECT_NEAR(whole[0].summary.l2, std::sqrt(30.0), 1e-12);
  EXPECT_EQ(merger.left_out().incomplete, 1u);
}

TEST(ShardMerge, PartialSumsAndCompactedRowsMakeNoRow) {
  ShardMerger merger;
  for (uint32_t rank : {0u, 1u}) {
    merger.add(row_of({1, 2}, 0, static_cast<int>(rank), {{MeshPlacement::kPartial, 0, rank, 2}}, 2));
    SummaryTableRow compacted = row_of({1}, 1, static_cast<int>(rank), {{MeshPlacement::kShard, 0, rank, 2}}, 2);
    compacted.steps = 4;
    merger.add(compacted);
  }
  SummaryTableRow plain = row_of({1, 2}, 0, 0, {}, 0);  // not sharded: ignored
  merger.add(plain);
  EXPECT_TRUE(merger.whole_rows().empty());
  EXPECT_EQ(merger.left_out().partial, 1u);
  EXPECT_EQ(merger.left_out().compacted, 2u);
}

// Two shards of 2 elements (whole: 4) of step `step`, the values of rank `rank`'s part.
SummaryTableRow part_of(int64_t step, int rank, double scale = 1.0) {
  return row_of({scale * (1 + step), scale * (2 + rank)}, step, rank,
                {{MeshPlacement::kShard, 0, static_cast<uint32_t>(rank), 2}}, 4);
}

TEST(ShardMerge, WholeRowsAreMadeAsTheTablesGrowInStepOrder) {
  ShardMerger merger;
  for (int64_t step = 0; step < 3; ++step) merger.add(part_of(step, 0));  // rank 0 ahead
  EXPECT_TRUE(merger.take_whole().empty());
  EXPECT_EQ(merger.pending_rows(), 3u);
  merger.add(part_of(0, 1));
  merger.add(part_of(1, 1));
  std::vector<SummaryTableRow> made = merger.take_whole();
  ASSERT_EQ(made.size(), 2u);
  EXPECT_EQ(made[0].step, 0);
  EXPECT_EQ(made[1].step, 1);
  EXPECT_EQ(made[1].summary.numel, 4u);
  EXPECT_TRUE(merger.take_whole().empty());  // taken
  EXPECT_EQ(merger.pending_rows(), 1u);
  EXPECT_EQ(merger.left_out().incomplete, 1u);  // step 2, open
  merger.add(part_of(2, 1));
  EXPECT_EQ(merger.take_whole().size(), 1u);
  EXPECT_EQ(merger.left_out().incomplete, 0u);
}

TEST(ShardMerge, TheStepsOfARankThatStoppedAreDroppedWithinTheBoundAndCounted) {
  ShardMerger merger(16);
  for (int64_t step = 0; step < 10; ++step) merger.add(part_of(step, 1));  // rank 1 stops at step 9
  for (int64_t step = 0; step < 100; ++step) {
    merger.add(part_of(step, 0));
    EXPECT_LE(merger.pending_rows(), 16u);
  }
  EXPECT_EQ(merger.whole_rows().size(), 10u);
  EXPECT_EQ(merger.left_out().incomplete, 90u);  // dropped and still open
  // A step a later one passed never completes: closing step 12 drops step 11.
  ShardMerger gap;
  gap.add(part_of(11, 0));
  gap.add(part_of(12, 0));
  gap.add(part_of(12, 1));  // rank 1 has no step 11
  EXPECT_EQ(gap.take_whole().size(), 1u);
  EXPECT_EQ(gap.pending_rows(), 0u);
  EXPECT_EQ(gap.left_out().incomplete, 1u);
}

TEST(ShardMerge, PartsThatCannotBeOneTensorsAreCountedNotMerged) {
  ShardMerger merger;
  // Step 0: rank 0's part twice with other values (two runs' tables read as one).
  merger.add(part_of(0, 0));
  merger.add(part_of(0, 0, 3.0));
  merger.add(part_of(0, 1));
  // Step 1: the other part of a tensor on another mesh (4 shards).
  merger.add(part_of(1, 0));
  SummaryTableRow other = part_of(1, 1);
  other.summary.shard.dims[0].size = 4;
  merger.add(other);
  // Step 2: parts whose elements do not add up to the whole.
  merger.add(part_of(2, 0));
  SummaryTableRow short_part = part_of(2, 1);
  short_part.summary.numel = 1;
  merger.add(short_part);
  EXPECT_TRUE(merger.whole_rows().empty());
  EXPECT_EQ(merger.left_out().conflicting, 3u);
}

TEST(ShardMerge, ATableReadAgainAddsNothing) {
  ShardMerger merger;
  for (int rank : {0, 1}) {
    for (int64_t step = 0; step < 3; ++step) merger.add(part_of(step, rank));
  }
  merger.add(part_of(3, 0));
  EXPECT_EQ(merger.take_whole().size(), 3u);
  // Rank 0's table, compacted: read again from its start (its open step too).
  for (int64_t step = 0; step < 4; ++step) merger.add(part_of(step, 0));
  EXPECT_TRUE(merger.take_whole().empty());
  merger.add(part_of(3, 1));
  EXPECT_EQ(merger.take_whole().size(), 1u);
  const ShardMerger::LeftOut left = merger.left_out();
  EXPECT_EQ(left.conflicting + left.incomplete + left.partial, 0u);
}

}  // namespace
}  // namespace tensorscope::recording
