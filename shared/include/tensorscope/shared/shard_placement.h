// shard_placement.h — where the summary of a sharded tensor's local part sits in the whole
// tensor: a PyTorch DTensor (FSDP2's parameters and their gradients, a tensor-parallel
// layer's weights) that each rank summarizes where it lives, with no collective. The
// device mesh's dimensions, each with its placement (Shard of a tensor dimension, a
// Replicate copy, or Partial sums that add up to the whole), this rank's coordinate on it
// and its size; and the whole tensor's element count. The shards of one tensor at one
// step are merged into the whole's summary by whoever reads the ranks' summaries
// together (recording/shard_merge.h), never in the training step.
//
// Text form (the summary table's `shard` cell): one "<placement>@<coordinate>/<size>" per
// mesh dimension, joined by '|', the placement "S<tensor dim>", "R" or "P":
// "S0@1/4" (the second of 4 shards along dim 0), "R@0/2|S0@3/4" (a 2-D mesh: replicas of
// 4 shards); "" for a tensor that is not sharded.
//
// Used by the client (the summary record), the daemon (its summary table) and the readers.
// Thread safety: pure functions over value types.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tensorscope {

inline constexpr size_t kMaxMeshDims = 4;

enum class MeshPlacement : uint8_t { kShard = 1, kReplicate = 2, kPartial = 3 };
// Their names, for the Python package (MESH_PLACEMENTS).
inline constexpr std::array<std::pair<std::string_view, MeshPlacement>, 3> kMeshPlacements = {
    {{"shard", MeshPlacement::kShard}, {"replicate", MeshPlacement::kReplicate}, {"partial", MeshPlacement::kPartial}}};

struct MeshDim {
  MeshPlacement placement = MeshPlacement::kReplicate;
  uint8_t tensor_dim = 0;  // the dimension a kShard cuts
  uint32_t coordinate = 0;
  uint32_t size = 1;
  bool operator==(const MeshDim&) const = default;
};

struct ShardPlacement {
  uint64_t whole_numel = 0;   // of the whole tensor (0 when not sharded)
  std::vector<MeshDim> dims;  // empty: the summary is of a whole tensor
  bool sharded() const { return !dims.empty(); }
  bool operator==(const ShardPlacement&) const = default;
};

// The text of `dims` ("" for none).
std::string shard_text(const std::vector<MeshDim>& dims);
// The dims of `text` (none for ""); false for text that is not shard_text's.
bool parse_shard_text(std::string_view text, std::vector<MeshDim>* dims);

// Why `p` cannot describe a part of `numel` elements ("" when it can): more than
// kMaxMeshDims dims, an unknown placement, a coordinate not below its size, a size of 0, a
// whole tensor smaller than the part, or a whole count without dims.
std::string shard_refusal(const ShardPlacement& p, uint64_t numel);

}  // namespace tensorscope
