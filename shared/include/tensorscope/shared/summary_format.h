// summary_format.h — the payload of a kSummary record: a small summary of every tensor a
// track saw in one step (numel, L2 norm, max |x|, mean, std, NaN/Inf counts, zeros, for
// parameters the update ratio and, for a track with a cast format, the low-precision
// numerics), many tensors in one record. The client writes it
// (encode_summaries), the daemon reads it (parse_summaries) and never trusts it.
//
// Used by the training process (client) and the daemon's workers. Thread safety: free
// functions over value types.
//
// Layout (little-endian, as the ring): a 16-byte header
//   uint32 magic (kSummaryMagic)  uint16 version  uint16 entry_size  uint32 count  uint32 0
// then `count` entries of `entry_size` bytes, in the order the track saw the tensors
// (forward outputs in call order, gradients after them as backward delivered them):
//   char name[128]   the stream the tensor would have, NUL-terminated
//   uint8 kind       wire::TensorKind (activation .. parameter_gradient)
//   uint8 flags      kSummaryHasUpdateRatio
//   uint8 cast       CastFormat (shared/cast_formats.h); kNone: no numerics fields
//   uint8 dtype      wire::DType of the tensor (0, kInvalid: not known; a client before
//                    it wrote 0 there)
//   uint8 pad[4]
//   uint64 numel, nan_count, inf_count, zero_count
//   float64 l2, max_abs, mean, std    over the finite elements (0 when there are none)
//   float64 update_ratio              |w_t - w_prev| / |w_prev| (flag set), else 0
// (208 bytes: kSummaryEntryBytesV1) then, written since the cast formats:
//   uint64 underflow_count            finite non-zero values a cast to `cast` makes 0
//   uint64 overflow_count             finite values it makes Inf (or NaN)
//   float64 min_abs_nonzero           the smallest finite non-zero |x| (0: none)
// (0 when `cast` is kNone) (232 bytes: kSummaryEntryBytesV2) then, written since sharded
// tensors (shared/shard_placement.h):
//   uint64 whole_numel                the whole tensor's elements (0: not sharded)
//   uint8 mesh_dims  uint8 pad[7]     how many of the 4 mesh dimensions follow are used
//   4 x {uint8 placement  uint8 tensor_dim  uint16 0  uint32 coordinate  uint32 size}
// (296 bytes). Fields are only ever appended, the version stays 1: a reader
// takes the fields its entry_size holds (a 208-byte entry has no numerics) and skips
// those it does not know. A reader refuses another version with a message that names
// both.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tensorscope/base/status.h"
#include "tensorscope/shared/cast_formats.h"
#include "tensorscope/shared/shard_placement.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope {

inline constexpr uint32_t kSummaryMagic = 0x4d535354;  // "TSSM"
inline constexpr uint16_t kSummaryVersion = 1;
inline constexpr size_t kSummaryHeaderBytes = 16;
inline constexpr size_t kSummaryEntryBytesV1 = 208;
inline constexpr size_t kSummaryEntryBytesV2 = 232;
inline constexpr size_t kSummaryEntryBytes = 296;
inline constexpr uint32_t kMaxSummaryEntries = 8192;
inline constexpr uint8_t kSummaryHasUpdateRatio = 1;

struct TensorSummary {
  std::string name;
  wire::TensorKind kind = wire::TensorKind::kActivation;
  wire::DType dtype = wire::DType::kInvalid;  // the tensor's element type (kInvalid: not known)
  uint64_t numel = 0;
  uint64_t nan_count = 0;
  uint64_t inf_count = 0;
  uint64_t zero_count = 0;
  double l2 = 0;
  double max_abs = 0;
  double mean = 0;
  double std = 0;
  bool has_update_ratio = false;
  double update_ratio = 0;
  // Low-precision numerics, against `cast_format` (kNone: not measured, all 0).
  CastFormat cast_format = CastFormat::kNone;
  uint64_t underflow_count = 0;
  uint64_t overflow_count = 0;
  double min_abs_nonzero = 0;
  // A DTensor's local part: where it sits in the whole (not sharded: no dims).
  ShardPlacement shard;

  bool operator==(const TensorSummary&) const = default;
  bool finite() const { return nan_count == 0 && inf_count == 0; }
  bool has_numerics() const { return cast_format != CastFormat::kNone; }
  double zero_fraction() const { return fraction(zero_count); }
  double underflow_fraction() const { return fraction(underflow_count); }
  double overflow_fraction() const { return fraction(overflow_count); }
  // log2(max |x| / smallest non-zero |x|) over the finite values: the binades the tensor
  // spans (0 for a constant magnitude); NaN without numerics or without a non-zero value.
  double dynamic_range() const;

 private:
  double fraction(uint64_t count) const {
    return numel > 0 ? static_cast<double>(count) / static_cast<double>(numel) : 0;
  }
};

// The payload for `summaries` (at most kMaxSummaryEntries; names longer than 127 bytes
// are cut).
std::string encode_summaries(const std::vector<TensorSummary>& summaries);

// The summaries of a payload, or why it is refused: a wrong magic or version, a size that
// does not match the count, an entry whose name is empty or not text, a kind that is not
// a tensor's, a dtype this daemon does not know, counts larger than numel, negative norms, or a shard placement that cannot be.
StatusOr<std::vector<TensorSummary>> parse_summaries(std::string_view payload);

}  // namespace tensorscope
