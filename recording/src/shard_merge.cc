// shard_merge.cc — see shard_merge.h.
#include "tensorscope/recording/shard_merge.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tensorscope/shared/summary_merge.h"

namespace tensorscope::recording {

void ShardMerger::add(const SummaryTableRow& row) {
  const ShardPlacement& shard = row.summary.shard;
  if (!shard.sharded()) return;
  if (row.steps != 1) {
    ++compacted_;
    return;
  }
  Key key{row.track, row.summary.name, row.step};
  std::vector<uint32_t> coordinates;
  for (const MeshDim& d : shard.dims) {
    if (d.placement == MeshPlacement::kReplicate && d.coordinate != 0) return;  // a replica
    if (d.placement == MeshPlacement::kPartial) partial_[key] = true;
    if (d.placement == MeshPlacement::kShard) coordinates.push_back(d.coordinate);
  }
  groups_[key].emplace(std::move(coordinates), row);
}

std::vector<SummaryTableRow> ShardMerger::whole_rows() const {
  left_out_ = LeftOut{};
  left_out_.compacted = compacted_;
  std::vector<SummaryTableRow> out;
  // Each shard's norm at its previous step (for the update ratio), by track, stream and
  // coordinates: the groups are in step order within a (track, stream).
  std::map<std::tuple<std::string, std::string, std::vector<uint32_t>>, double> before_l2;
  for (const auto& [key, shards] : groups_) {
    const auto& [track, stream, step] = key;
    const SummaryTableRow& first = shards.begin()->second;
    const ShardPlacement& placement = first.summary.shard;
    uint64_t expected = 1, numel = 0;
    for (const MeshDim& d : placement.dims) {
      if (d.placement == MeshPlacement::kShard) expected *= d.size;
    }
    bool alike = true;
    for (const auto& [coordinates, row] : shards) {
      numel += row.summary.numel;
      alike = alike && row.summary.shard.whole_numel == placement.whole_numel &&
          row.summary.shard.dims.size() == placement.dims.size();
    }
    std::vector<RatioPart> ratios;
    for (const auto& [coordinates, row] : shards) {
      const auto previous = before_l2.find({track, stream, coordinates});
      const TensorSummary& s = row.summary;
      if (s.has_update_ratio && previous != before_l2.end()) {
        ratios.push_back(RatioPart{s.update_ratio, previous->second, s.l2});
      }
      before_l2[{track, stream, coordinates}] = s.l2;
    }
    if (partial_.count(key) > 0) {
      ++left_out_.partial;
      continue;
    }
    if (!alike || shards.size() != expected || numel != placement.whole_numel) {
      ++left_out_.incomplete;
      continue;
    }
    SummaryTableRow whole = first;
    whole.rank = -1;
    for (auto it = std::next(shards.begin()); it != shards.end(); ++it) {
      whole.summary = merge_summaries(whole.summary, it->second.summary);
      whole.order = std::min(whole.order, it->second.order);
    }
    whole.summary.has_update_ratio = ratios.size() == shards.size();
    whole.summary.update_ratio = whole.summary.has_update_ratio ? merged_update_ratio(ratios) : 0.0;
    whole.summary.shard = ShardPlacement{};
    out.push_back(std::move(whole));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const SummaryTableRow& a, const SummaryTableRow& b) { return a.step < b.step; });
  return out;
}

}  // namespace tensorscope::recording
