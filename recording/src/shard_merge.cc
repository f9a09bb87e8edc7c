// shard_merge.cc — see shard_merge.h.
#include "tensorscope/recording/shard_merge.h"

#include <algorithm>
#include <optional>

namespace tensorscope::recording {
namespace {

// Whether two rows can be parts of one tensor: the same whole and mesh.
bool same_tensor(const ShardPlacement& a, const ShardPlacement& b) {
  if (a.whole_numel != b.whole_numel || a.dims.size() != b.dims.size()) return false;
  for (size_t i = 0; i < a.dims.size(); ++i) {
    if (a.dims[i].placement != b.dims[i].placement || a.dims[i].tensor_dim != b.dims[i].tensor_dim ||
        a.dims[i].size != b.dims[i].size) {
      return false;
    }
  }
  return true;
}

}  // namespace

void ShardMerger::add(const SummaryTableRow& row) {
  const ShardPlacement& shard = row.summary.shard;
  if (!shard.sharded()) return;
  if (row.steps != 1) {
    ++counted_.compacted;
    return;
  }
  Parts parts;
  size_t expected = 1;
  bool partial = false;
  for (const MeshDim& d : shard.dims) {
    if (d.placement == MeshPlacement::kReplicate && d.coordinate != 0) return;  // a replica
    if (d.placement == MeshPlacement::kReplicate) continue;
    partial = partial || d.placement == MeshPlacement::kPartial;
    parts.push_back(d.coordinate);
    expected *= d.size;
  }
  const auto made = made_.find({row.track, row.summary.name});
  if (made != made_.end() && row.step <= made->second) return;  // read again, or after its step closed
  // The shard's part of the update ratio: its ratio and its norm at its previous step.
  std::optional<RatioPart> ratio;
  const auto shard_key = std::make_tuple(row.track, row.summary.name, parts);
  if (const auto before = before_l2_.find(shard_key); before != before_l2_.end()) {
    if (row.summary.has_update_ratio) ratio = RatioPart{row.summary.update_ratio, before->second, row.summary.l2};
    before->second = row.summary.l2;
  } else if (before_l2_.size() < kMaxShardsFollowed) {
    before_l2_.emplace(shard_key, row.summary.l2);
  }

  auto [it, opened] = open_.try_emplace(Key{row.track, row.summary.name, row.step});
  Group& group = it->second;
  if (opened) {
    group.expected = expected;
    group.partial = partial;
  } else if (!same_tensor(group.parts.begin()->second.summary.shard, shard)) {
    group.conflicting = true;
  }
  const auto [part, added] = group.parts.try_emplace(parts, row);
  if (!added) {
    // The same part twice: a table read again (the same values), or two runs' tables.
    if (!(part->second.summary == row.summary)) group.conflicting = true;
    return;
  }
  ++pending_rows_;
  if (ratio) group.ratios.push_back(*ratio);
  if (group.parts.size() >= group.expected) close(it);
  if (pending_rows_ > max_pending_rows_) drop_oldest();
}

void ShardMerger::close(std::map<Key, Group>::iterator it) {
  const auto& [track, stream, step] = it->first;
  Group& group = it->second;
  // The tensor's earlier steps still open never will be: every shard has passed them.
  for (auto earlier = open_.lower_bound(Key{track, stream, INT64_MIN}); earlier != it;) drop(earlier++);
  made_[{track, stream}] = step;
  const SummaryTableRow& first = group.parts.begin()->second;
  uint64_t numel = 0;
  for (const auto& [coordinates, row] : group.parts) numel += row.summary.numel;
  if (group.partial) {
    ++counted_.partial;
  } else if (group.conflicting || numel != first.summary.shard.whole_numel) {
    ++counted_.conflicting;
  } else {
    SummaryTableRow whole = first;
    whole.rank = -1;
    for (auto part = std::next(group.parts.begin()); part != group.parts.end(); ++part) {
      whole.summary = merge_summaries(whole.summary, part->second.summary);
      whole.order = std::min(whole.order, part->second.order);
    }
    whole.summary.has_update_ratio = group.ratios.size() == group.parts.size();
    whole.summary.update_ratio = whole.summary.has_update_ratio ? merged_update_ratio(group.ratios) : 0.0;
    whole.summary.shard = ShardPlacement{};
    whole_.push_back(std::move(whole));
  }
  pending_rows_ -= group.parts.size();
  open_.erase(it);
}

void ShardMerger::drop(std::map<Key, Group>::iterator it) {
  ++(it->second.partial ? counted_.partial : counted_.incomplete);
  pending_rows_ -= it->second.parts.size();
  open_.erase(it);
}

void ShardMerger::drop_oldest() {
  // Down to three quarters of the bound, the oldest steps first (dropping is rare: a rank
  // that stopped writing, or tables read far apart).
  std::vector<std::pair<int64_t, Key>> by_step;
  for (const auto& [key, group] : open_) by_step.emplace_back(std::get<2>(key), key);
  std::sort(by_step.begin(), by_step.end());
  for (const auto& [step, key] : by_step) {
    if (pending_rows_ <= max_pending_rows_ / 4 * 3) break;
    drop(open_.find(key));
  }
}

std::vector<SummaryTableRow> ShardMerger::take_whole() { return std::exchange(whole_, {}); }

std::vector<SummaryTableRow> ShardMerger::whole_rows() {
  std::vector<SummaryTableRow> out = take_whole();
  std::stable_sort(out.begin(), out.end(), [](const SummaryTableRow& a, const SummaryTableRow& b) {
    return std::tie(a.step, a.track, a.summary.name) < std::tie(b.step, b.track, b.summary.name);
  });
  return out;
}

ShardMerger::LeftOut ShardMerger::left_out() const {
  LeftOut out = counted_;
  for (const auto& [key, group] : open_) ++(group.partial ? out.partial : out.incomplete);
  return out;
}

}  // namespace tensorscope::recording
