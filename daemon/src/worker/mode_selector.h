// mode_selector.h — which render mode a record gets.
//
// Used inside a worker process (reader thread). Precedence: the first of the config's
// render.stream_modes rules whose regex matches the stream name, then the client's hint
// (Client::set_render_mode), then render.mode. "auto" resolves by shape: scalars and
// one-element tensors -> stats, 1-D -> line, 2-D -> heatmap, 3-D and up -> histogram.
// The result is a mode the daemon draws (never kAuto or kDefault).
// Thread safety: one thread (a per-stream cache is kept).
#pragma once

#include <optional>
#include <regex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "config/daemon_config.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope::daemon {

// kStats, kLine, kHeatmap or kHistogram from the shape alone.
RenderMode mode_by_shape(const wire::RecordHeader& header);

class ModeSelector {
 public:
  explicit ModeSelector(const RenderConfig& config);

  RenderMode select(const wire::RecordHeader& header);

 private:
  // The rule's mode for `stream`, nullopt when no rule matches (cached per name).
  std::optional<RenderMode> rule_mode(const std::string& stream);

  std::vector<std::pair<std::regex, RenderMode>> rules_;
  RenderMode default_mode_;
  std::unordered_map<std::string, std::optional<RenderMode>> rule_cache_;
};

}  // namespace tensorscope::daemon
