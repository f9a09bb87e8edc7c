#include "worker/mode_selector.h"

#include "tensorscope/base/logging.h"

namespace tensorscope::daemon {
namespace {

constexpr size_t kMaxCachedNames = 1 << 16;

}  // namespace

RenderMode mode_by_shape(const wire::RecordHeader& h) {
  uint64_t numel = 1;
  for (uint8_t d = 0; d < h.ndim && d < wire::kMaxDims; ++d) {
    numel *= static_cast<uint64_t>(h.shape[d] < 0 ? 0 : h.shape[d]);
  }
  if (numel == 1) return RenderMode::kStats;  // a scalar (a loss, a norm): its value over steps
  if (h.ndim <= 1) return RenderMode::kLine;
  if (h.ndim == 2) return RenderMode::kHeatmap;
  return RenderMode::kHistogram;
}

ModeSelector::ModeSelector(const RenderConfig& config) : default_mode_(config.mode) {
  for (const ModeRule& rule : config.stream_modes) {
    try {
      rules_.emplace_back(std::regex(rule.match, std::regex::ECMAScript | std::regex::optimize), rule.value);
    } catch (const std::regex_error& e) {
      // The loader checked every rule; this would be a bug, not bad input.
      TS_LOG_ERROR("render.stream_modes: cannot compile '{}': {}", rule.match, e.what());
    }
  }
}

std::optional<RenderMode> ModeSelector::rule_mode(const std::string& stream) {
  auto it = rule_cache_.find(stream);
  if (it != rule_cache_.end()) return it->second;
  std::optional<RenderMode> mode;
  for (const auto& [regex, rule_mode] : rules_) {
    if (std::regex_search(stream, regex)) {
      mode = rule_mode;
      break;
    }
  }
  if (rule_cache_.size() >= kMaxCachedNames) rule_cache_.clear();
  return rule_cache_.emplace(stream, std::move(mode)).first->second;
}

RenderMode ModeSelector::select(const wire::RecordHeader& header) {
  std::optional<RenderMode> mode = rules_.empty() ? std::nullopt : rule_mode(header.name);
  // The reader let only hints up to kMaxRenderHint through.
  if (!mode && header.render_hint != 0) mode = static_cast<RenderMode>(header.render_hint);
  const RenderMode chosen = mode.value_or(default_mode_);
  return chosen == RenderMode::kAuto || chosen == RenderMode::kDefault ? mode_by_shape(header) : chosen;
}

}  // namespace tensorscope::daemon
