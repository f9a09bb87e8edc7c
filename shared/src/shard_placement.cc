// shard_placement.cc — see shard_placement.h.
#include "tensorscope/shared/shard_placement.h"

#include <charconv>

namespace tensorscope {
namespace {

// A decimal number at the start of `text`, consumed; false when there is none or it is too large.
template <typename T>
bool take_number(std::string_view* text, T* value) {
  const char* end = text->data() + text->size();
  const auto [at, ec] = std::from_chars(text->data(), end, *value);
  if (ec != std::errc() || at == text->data()) return false;
  text->remove_prefix(static_cast<size_t>(at - text->data()));
  return true;
}

bool take_char(std::string_view* text, char c) {
  if (text->empty() || text->front() != c) return false;
  text->remove_prefix(1);
  return true;
}

}  // namespace

std::string shard_text(const std::vector<MeshDim>& dims) {
  std::string out;
  for (const MeshDim& d : dims) {
    if (!out.empty()) out += '|';
    if (d.placement == MeshPlacement::kShard) {
      out += 'S' + std::to_string(d.tensor_dim);
    } else {
      out += d.placement == MeshPlacement::kReplicate ? "R" : "P";
    }
    out += '@' + std::to_string(d.coordinate) + '/' + std::to_string(d.size);
  }
  return out;
}

bool parse_shard_text(std::string_view text, std::vector<MeshDim>* dims) {
  dims->clear();
  while (!text.empty()) {
    if (!dims->empty() && !take_char(&text, '|')) return false;
    MeshDim d;
    if (take_char(&text, 'S')) {
      unsigned dim = 0;
      if (!take_number(&text, &dim) || dim > 255) return false;
      d.placement = MeshPlacement::kShard;
      d.tensor_dim = static_cast<uint8_t>(dim);
    } else if (take_char(&text, 'R')) {
      d.placement = MeshPlacement::kReplicate;
    } else if (take_char(&text, 'P')) {
      d.placement = MeshPlacement::kPartial;
    } else {
      return false;
    }
    if (!take_char(&text, '@') || !take_number(&text, &d.coordinate) || !take_char(&text, '/') ||
        !take_number(&text, &d.size) || d.size == 0 || d.coordinate >= d.size || dims->size() == kMaxMeshDims) {
      return false;
    }
    dims->push_back(d);
  }
  return true;
}

std::string shard_refusal(const ShardPlacement& p, uint64_t numel) {
  if (p.dims.empty()) return p.whole_numel == 0 ? "" : "a whole tensor's count without a mesh";
  if (p.dims.size() > kMaxMeshDims) return "a mesh of more than " + std::to_string(kMaxMeshDims) + " dimensions";
  for (const MeshDim& d : p.dims) {
    if (d.placement != MeshPlacement::kShard && d.placement != MeshPlacement::kReplicate &&
        d.placement != MeshPlacement::kPartial) {
      return "an unknown placement " + std::to_string(static_cast<int>(d.placement));
    }
    if (d.size == 0 || d.coordinate >= d.size) return "a mesh coordinate not below its size";
  }
  if (p.whole_numel < numel) return "a whole tensor smaller than its part";
  return {};
}

}  // namespace tensorscope
