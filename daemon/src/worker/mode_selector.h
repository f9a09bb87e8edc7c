// mode_selector.h — which render mode a record gets.
//
// Used inside a worker process (reader thread). Precedence: the first of the config's
// render.stream_modes rules whose regex matches the stream name, then the client's hint
// (Client::set_render_mode), then render.mode. "auto" resolves by shape: scalars and
// one-element tensors -> stats, 1-D -> line, 2-D -> heatmap, 3-D and up -> histogram.
// Modes the daemon cannot draw are not accepted by the config loader.
// Thread safety: one thread (a per-stream cache is kept).
#pragma once

#include <regex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "config/daemon_config.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope::daemon {

// "stats", "line", "heatmap" or "histogram" from the shape alone.
std::string mode_by_shape(const wire::RecordHeader& header);

class ModeSelector {
 public:
  explicit ModeSelector(const RenderConfig& config);

  std::string select(const wire::RecordHeader& header);

 private:
  // The rule's mode for `stream`, "" when no rule matches (cached per name).
  const std::string& rule_mode(const std::string& stream);

  std::vector<std::pair<std::regex, std::string>> rules_;
  std::string default_mode_;
  std::unordered_map<std::string, std::string> rule_cache_;
};

}  // namespace tensorscope::daemon
