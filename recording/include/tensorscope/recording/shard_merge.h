// shard_merge.h — the whole tensor's summary from its shards': a DTensor (FSDP2's
// parameters and gradients, a tensor-parallel layer's weights) is summarized by each rank
// where it lives, with no collective in the training step (shared/shard_placement.h), and
// merged here, from the summary tables the ranks' daemons wrote, by whoever reads them
// together: tensorscope.read_summaries (through the extension) and the live view.
//
// The rows of one (track, stream, step) are its shards. A replica (a Replicate mesh
// dimension) counts once: the rows at coordinate 0 of every Replicate dimension are the
// shards, the others are left out. The whole's row is made once every shard is in (as
// many as the product of the Shard dimensions' sizes, their elements adding up to the
// whole tensor's): its counts, norms, mean and std merged exactly (shared/summary_merge.h),
// and its update ratio from each shard's ratio and its norm at the shard's previous step.
// Left out and counted: a tensor with Partial sums (its shards' values are not its own),
// a step whose shards are not all in (a rank that has not written it yet, or died), and
// compacted rows (several steps each: not one step's values).
//
// Thread safety: none; one per reader.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "tensorscope/recording/summary_table.h"

namespace tensorscope::recording {

class ShardMerger {
 public:
  // Takes one row of a table, in any order (a row of a tensor that is not sharded is
  // ignored).
  void add(const SummaryTableRow& row);

  // The whole rows: rank -1, no shard, the order of the shards' lowest, by step then track,
  // stream.
  std::vector<SummaryTableRow> whole_rows() const;

  // Groups left out by the last whole_rows(): Partial sums, shards missing.
  struct LeftOut {
    uint64_t partial = 0;
    uint64_t incomplete = 0;
    uint64_t compacted = 0;  // rows
  };
  const LeftOut& left_out() const { return left_out_; }

 private:
  using Key = std::tuple<std::string, std::string, int64_t>;  // track, stream, step
  // The shards of one key by their coordinates on the Shard dimensions.
  std::map<Key, std::map<std::vector<uint32_t>, SummaryTableRow>> groups_;
  std::map<Key, bool> partial_;
  mutable LeftOut left_out_;
  uint64_t compacted_ = 0;
};

}  // namespace tensorscope::recording
