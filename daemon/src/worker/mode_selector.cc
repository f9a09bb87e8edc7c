#include "worker/mode_selector.h"

#include "tensorscope/base/logging.h"

namespace tensorscope::daemon {
namespace {

constexpr size_t kMaxCachedNames = 1 << 16;

}  // namespace

std::string mode_by_shape(const wire::RecordHeader& h) {
  uint64_t numel = 1;
  for (uint8_t d = 0; d < h.ndim && d < wire::kMaxDims; ++d) {
    numel *= static_cast<uint64_t>(h.shape[d] < 0 ? 0 : h.shape[d]);
  }
  if (numel == 1) return "stats";  // a scalar (a loss, a norm): its value over steps
  if (h.ndim <= 1) return "line";
  if (h.ndim == 2) return "heatmap";
  return "histogram";
}

ModeSelector::ModeSelector(const RenderConfig& config) : default_mode_(config.mode) {
  for (const ModeRule& rule : config.stream_modes) {
    try {
      rules_.emplace_back(std::regex(rule.match, std::regex::ECMAScript | std::regex::optimize),
                          rule.mode);
    } catch (const std::regex_error& e) {
      // The loader checked every rule; this would be a bug, not bad input.
      TS_LOG_ERROR("render.stream_modes: cannot compile '{}': {}", rule.match, e.what());
    }
  }
}

const std::string& ModeSelector::rule_mode(const std::string& stream) {
  auto it = rule_cache_.find(stream);
  if (it != rule_cache_.end()) return it->second;
  std::string mode;
  for (const auto& [regex, rule_mode] : rules_) {
    if (std::regex_search(stream, regex)) {
      mode = rule_mode;
      break;
    }
  }
  if (rule_cache_.size() >= kMaxCachedNames) rule_cache_.clear();
  return rule_cache_.emplace(stream, std::move(mode)).first->second;
}

std::string ModeSelector::select(const wire::RecordHeader& header) {
  std::string mode = rules_.empty() ? std::string() : rule_mode(header.name);
  if (mode.empty() && header.render_hint != 0) {
    mode = wire::render_hint_name(static_cast<wire::RenderHint>(header.render_hint));
  }
  if (mode.empty()) mode = default_mode_;
  if (mode == "auto") mode = mode_by_shape(header);
  return mode;
}

}  // namespace tensorscope::daemon
