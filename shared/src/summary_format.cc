// summary_format.cc — see summary_format.h.
#include "tensorscope/shared/summary_format.h"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>

#include "byte_fields.h"

namespace tensorscope {
namespace {

// Offsets in an entry (summary_format.h).
constexpr size_t kKindAt = wire::kNameBytes;
constexpr size_t kFlagsAt = kKindAt + 1;
constexpr size_t kCastAt = kKindAt + 2;
constexpr size_t kDTypeAt = kKindAt + 3;
constexpr size_t kCountsAt = kKindAt + 8;
constexpr size_t kValuesAt = kCountsAt + 4 * 8;
constexpr size_t kNumericsAt = kValuesAt + 5 * 8;
static_assert(kNumericsAt == kSummaryEntryBytesV1);
constexpr size_t kShardAt = kNumericsAt + 3 * 8;
constexpr size_t kMeshDimsAt = kShardAt + 16;
constexpr size_t kMeshDimBytes = 12;
static_assert(kShardAt == kSummaryEntryBytesV2);
static_assert(kMeshDimsAt + kMaxMeshDims * kMeshDimBytes == kSummaryEntryBytes);

using internal::get_field;
using internal::put_field;

std::string entry_refusal(const TensorSummary& s) {
  if (s.name.empty()) return "an entry has no name";
  for (const char c : s.name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "an entry's name holds a control byte";
  }
  const auto kind = static_cast<uint8_t>(s.kind);
  if (kind < static_cast<uint8_t>(wire::TensorKind::kTensor) ||
      kind > static_cast<uint8_t>(wire::TensorKind::kParameterGradient)) {
    return "entry '" + s.name + "' has kind " + std::to_string(kind) + ", not a tensor's";
  }
  if (static_cast<uint8_t>(s.dtype) > wire::kMaxDType) {
    return "entry '" + s.name + "' has dtype " + std::to_string(static_cast<int>(s.dtype)) +
        ", which this daemon does not know (update tensorscoped to the client's version)";
  }
  if (s.nan_count > s.numel || s.inf_count > s.numel - s.nan_count || s.zero_count > s.numel) {
    return "entry '" + s.name + "' counts more NaN, Inf or zero elements than it has";
  }
  for (const double v : {s.l2, s.max_abs, s.std, s.update_ratio, s.min_abs_nonzero}) {
    if (v < 0) return "entry '" + s.name + "' has a negative norm";
  }
  if (s.has_numerics() && cast_format_info(s.cast_format) == nullptr) {
    return "entry '" + s.name + "' names cast format " + std::to_string(static_cast<int>(s.cast_format)) +
        ", which this daemon does not know (update tensorscoped to the client's version)";
  }
  if (s.underflow_count > s.numel || s.overflow_count > s.numel - s.underflow_count) {
    return "entry '" + s.name + "' counts more underflowing or overflowing elements than it has";
  }
  if (std::string why = shard_refusal(s.shard, s.numel); !why.empty()) return "entry '" + s.name + "' has " + why;
  return {};
}

}  // namespace

double TensorSummary::dynamic_range() const {
  if (!has_numerics() || !(min_abs_nonzero > 0) || !(max_abs >= min_abs_nonzero)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return std::log2(max_abs) - std::log2(min_abs_nonzero);  // (the quotient of float64 extremes overflows)
}

std::string encode_summaries(const std::vector<TensorSummary>& summaries) {
  const size_t count = std::min<size_t>(summaries.size(), kMaxSummaryEntries);
  std::string out(kSummaryHeaderBytes + count * kSummaryEntryBytes, '\0');
  put_field<uint32_t>(out, 0, kSummaryMagic);
  put_field<uint16_t>(out, 4, kSummaryVersion);
  put_field<uint16_t>(out, 6, static_cast<uint16_t>(kSummaryEntryBytes));
  put_field<uint32_t>(out, 8, static_cast<uint32_t>(count));
  for (size_t i = 0; i < count; ++i) {
    const TensorSummary& s = summaries[i];
    const size_t at = kSummaryHeaderBytes + i * kSummaryEntryBytes;
    std::memcpy(out.data() + at, s.name.data(), std::min(s.name.size(), wire::kNameBytes - 1));
    put_field<uint8_t>(out, at + kKindAt, static_cast<uint8_t>(s.kind));
    put_field<uint8_t>(out, at + kFlagsAt, s.has_update_ratio ? kSummaryHasUpdateRatio : 0);
    put_field<uint8_t>(out, at + kCastAt, static_cast<uint8_t>(s.cast_format));
    put_field<uint8_t>(out, at + kDTypeAt, static_cast<uint8_t>(s.dtype));
    const uint64_t counts[] = {s.numel, s.nan_count, s.inf_count, s.zero_count};
    std::memcpy(out.data() + at + kCountsAt, counts, sizeof(counts));
    const double values[] = {s.l2, s.max_abs, s.mean, s.std, s.has_update_ratio ? s.update_ratio : 0.0};
    std::memcpy(out.data() + at + kValuesAt, values, sizeof(values));
    if (s.has_numerics()) {
      put_field<uint64_t>(out, at + kNumericsAt, s.underflow_count);
      put_field<uint64_t>(out, at + kNumericsAt + 8, s.overflow_count);
      put_field<double>(out, at + kNumericsAt + 16, s.min_abs_nonzero);
    }
    if (s.shard.sharded()) {
      const size_t dims = std::min(s.shard.dims.size(), kMaxMeshDims);
      put_field<uint64_t>(out, at + kShardAt, s.shard.whole_numel);
      put_field<uint8_t>(out, at + kShardAt + 8, static_cast<uint8_t>(dims));
      for (size_t d = 0; d < dims; ++d) {
        const MeshDim& m = s.shard.dims[d];
        const size_t dim_at = at + kMeshDimsAt + d * kMeshDimBytes;
        put_field<uint8_t>(out, dim_at, static_cast<uint8_t>(m.placement));
        put_field<uint8_t>(out, dim_at + 1, m.tensor_dim);
        put_field<uint32_t>(out, dim_at + 4, m.coordinate);
        put_field<uint32_t>(out, dim_at + 8, m.size);
      }
    }
  }
  return out;
}

StatusOr<std::vector<TensorSummary>> parse_summaries(std::string_view in) {
  if (in.size() < kSummaryHeaderBytes) return Status::error("summary record shorter than its header");
  if (get_field<uint32_t>(in, 0) != kSummaryMagic) return Status::error("not a summary record (wrong magic)");
  const auto version = get_field<uint16_t>(in, 4);
  if (version != kSummaryVersion) {
    return Status::error("summary record of format version " + std::to_string(version) + "; this daemon reads " +
                         std::to_string(kSummaryVersion) + " (update tensorscoped to the client's version)");
  }
  const size_t entry_size = get_field<uint16_t>(in, 6);
  const uint32_t count = get_field<uint32_t>(in, 8);
  if (entry_size < kSummaryEntryBytesV1) return Status::error("summary entries shorter than version 1's");
  if (count > kMaxSummaryEntries) {
    return Status::error("summary record of " + std::to_string(count) + " entries (at most " +
                         std::to_string(kMaxSummaryEntries) + ")");
  }
  if (in.size() != kSummaryHeaderBytes + static_cast<size_t>(count) * entry_size) {
    return Status::error("summary record size does not match its " + std::to_string(count) + " entries");
  }
  std::vector<TensorSummary> out;
  out.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const std::string_view e = in.substr(kSummaryHeaderBytes + i * entry_size, entry_size);
    const size_t name_length = ::strnlen(e.data(), wire::kNameBytes);
    if (name_length == wire::kNameBytes) return Status::error("a summary entry's name is not terminated");
    TensorSummary s;
    s.name.assign(e.data(), name_length);
    s.kind = static_cast<wire::TensorKind>(get_field<uint8_t>(e, kKindAt));
    s.dtype = static_cast<wire::DType>(get_field<uint8_t>(e, kDTypeAt));
    s.has_update_ratio = (get_field<uint8_t>(e, kFlagsAt) & kSummaryHasUpdateRatio) != 0;
    s.numel = get_field<uint64_t>(e, kCountsAt);
    s.nan_count = get_field<uint64_t>(e, kCountsAt + 8);
    s.inf_count = get_field<uint64_t>(e, kCountsAt + 16);
    s.zero_count = get_field<uint64_t>(e, kCountsAt + 24);
    s.l2 = get_field<double>(e, kValuesAt);
    s.max_abs = get_field<double>(e, kValuesAt + 8);
    s.mean = get_field<double>(e, kValuesAt + 16);
    s.std = get_field<double>(e, kValuesAt + 24);
    s.update_ratio = s.has_update_ratio ? get_field<double>(e, kValuesAt + 32) : 0.0;
    if (entry_size >= kSummaryEntryBytesV2) {
      s.cast_format = static_cast<CastFormat>(get_field<uint8_t>(e, kCastAt));
      if (s.has_numerics()) {
        s.underflow_count = get_field<uint64_t>(e, kNumericsAt);
        s.overflow_count = get_field<uint64_t>(e, kNumericsAt + 8);
        s.min_abs_nonzero = get_field<double>(e, kNumericsAt + 16);
      }
    }
    if (entry_size >= kSummaryEntryBytes) {
      s.shard.whole_numel = get_field<uint64_t>(e, kShardAt);
      const size_t dims = get_field<uint8_t>(e, kShardAt + 8);
      if (dims > kMaxMeshDims) return Status::error("a summary entry's mesh has more than 4 dimensions");
      for (size_t d = 0; d < dims; ++d) {
        const size_t dim_at = kMeshDimsAt + d * kMeshDimBytes;
        MeshDim m;
        m.placement = static_cast<MeshPlacement>(get_field<uint8_t>(e, dim_at));
        m.tensor_dim = get_field<uint8_t>(e, dim_at + 1);
        m.coordinate = get_field<uint32_t>(e, dim_at + 4);
        m.size = get_field<uint32_t>(e, dim_at + 8);
        s.shard.dims.push_back(m);
      }
    }
    if (std::string why = entry_refusal(s); !why.empty()) return Status::error(why);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace tensorscope
