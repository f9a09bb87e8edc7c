// shard_merge.h — the whole tensor's summary from its shards': a DTensor (FSDP2's
// parameters and gradients, a tensor-parallel layer's weights) is summarized by each rank
// where it lives, with no collective in the training step (shared/shard_placement.h), and
// merged here, from the summary tables the ranks' daemons wrote, by whoever reads them
// together: tensorscope.read_summaries (through the extension) and the live view
// (view/src/whole_tables.h), the ranks of one job (job_groups.h) in one merger.
//
// The rows of one (track, stream, step) are its parts. A replica (a Replicate mesh
// dimension) counts once: the rows at coordinate 0 of every Replicate dimension are the
// parts, the others are left out. The whole's row is made as soon as every part is in (as
// many as the product of the Shard dimensions' sizes, their elements adding up to the
// whole tensor's): its counts, norms, mean and std merged exactly (shared/summary_merge.h),
// and its update ratio from each shard's ratio and its norm at the shard's previous step.
// Rows are taken as the tables grow: each table's rows in its order (a shard lives on one
// rank, so its steps come in order, and a tensor's whole rows are made in step order).
//
// Left out and counted: a tensor with Partial sums (its parts' values are not its own),
// a step whose parts are not all in (a rank that has not written it yet, or died: once a
// later step of the tensor is whole, or the open parts pass max_pending_rows, the oldest
// go), parts that cannot be one tensor's (two rows for one part with other values, other
// mesh sizes, elements that do not add up: two runs' tables read as one), and compacted
// rows (several steps each: not one step's values). A row of a step already made whole
// (a table read again after its compaction) is passed over.
//
// Thread safety: none; one per reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tensorscope/recording/summary_table.h"
#include "tensorscope/shared/summary_merge.h"

namespace tensorscope::recording {

class ShardMerger {
 public:
  static constexpr size_t kMaxPendingRows = size_t{1} << 17;     // about 40 MiB of open parts
  static constexpr size_t kMaxShardsFollowed = size_t{1} << 20;  // shards whose last norm is kept

  explicit ShardMerger(size_t max_pending_rows = kMaxPendingRows) : max_pending_rows_(max_pending_rows) {}

  // Takes one row of a table (a row of a tensor that is not sharded is ignored).
  void add(const SummaryTableRow& row);

  // The whole rows made since the last call, in the order they were made: rank -1, no
  // shard, the order of the parts' lowest.
  std::vector<SummaryTableRow> take_whole();
  // Every whole row not taken yet, by step then track, stream (a reader of finished tables).
  std::vector<SummaryTableRow> whole_rows();

  struct LeftOut {
    uint64_t partial = 0;      // steps of tensors with Partial sums
    uint64_t incomplete = 0;   // steps with parts missing (open ones included)
    uint64_t conflicting = 0;  // steps whose parts cannot be one tensor's
    uint64_t compacted = 0;    // rows
  };
  LeftOut left_out() const;
  size_t pending_rows() const { return pending_rows_; }

 private:
  using Key = std::tuple<std::string, std::string, int64_t>;  // track, stream, step
  using Parts = std::vector<uint32_t>;                        // coordinates on Shard and Partial dims
  struct Group {
    std::map<Parts, SummaryTableRow> parts;
    std::vector<RatioPart> ratios;
    size_t expected = 1;
    bool partial = false;
    bool conflicting = false;
  };

  void close(std::map<Key, Group>::iterator group);  // made whole, or counted
  void drop(std::map<Key, Group>::iterator group);   // counted incomplete
  void drop_oldest();

  const size_t max_pending_rows_;
  std::map<Key, Group> open_;
  size_t pending_rows_ = 0;
  std::map<std::pair<std::string, std::string>, int64_t> made_;              // track, stream -> the newest step closed
  std::map<std::tuple<std::string, std::string, Parts>, double> before_l2_;  // a shard's norm at its last step
  std::vector<SummaryTableRow> whole_;
  LeftOut counted_;
};

}  // namespace tensorscope::recording
