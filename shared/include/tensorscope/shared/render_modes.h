// render_modes.h — the render modes, once: each one's wire value and name.
//
// Used by the client (RenderMode, its to_string), the wire format (RecordHeader::
// render_hint), the daemon (the config's accepted modes, the mode selector, one renderer
// per mode) and the Python package (RENDER_MODES, built by the extension from this list).
// To add a mode: a value below and its name in kRenderModeNames (the two are checked
// against each other here), then its renderer in the daemon (make_frame_renderer: the
// build fails on a mode without one) and its row in docs/user/render_modes.md (a test checks
// it); docs/changing.md lists it all. Thread safety: constants only.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tensorscope::wire {

// How the daemon draws a stream, as the training program asks for it. Values are part of
// the ABI. The daemon's per-stream config rules take precedence over the client's wish,
// which takes precedence over the daemon's render.mode.
enum class RenderHint : uint8_t {
  kDefault = 0,    // no wish: the daemon's render.mode
  kAuto = 1,       // by shape: 1-D line, 2-D heatmap, 3-D and up histogram, scalars stats
  kLine = 2,       // 1-D values
  kHistogram = 3,  // value distribution, bins fixed per stream
  kHeatmap = 4,    // 2-D with colorbar
  kForce2d = 5,    // any shape, flattened and zero-padded to a square heatmap
  kPca = 6,        // rows projected on the top two principal components
  kTsne = 7,       // 2-D t-SNE embedding of rows, warm-started frame to frame
  kStats = 8,      // mean/std/min/max over steps
};

// Each mode's name, indexed by its value; kDefault has none ("").
inline constexpr std::array<std::string_view, 9> kRenderModeNames = {"",        "auto", "line", "histogram", "heatmap",
                                                                     "force2d", "pca",  "tsne", "stats"};
inline constexpr uint8_t kMaxRenderHint = static_cast<uint8_t>(kRenderModeNames.size() - 1);
static_assert(static_cast<uint8_t>(RenderHint::kStats) == kMaxRenderHint,
              "every render mode has a name in kRenderModeNames, in value order");

// The named modes ("auto" .. the last): what a config or a Python caller may name.
inline constexpr std::array<std::string_view, kMaxRenderHint> kNamedRenderModes = [] {
  std::array<std::string_view, kMaxRenderHint> names{};
  for (uint8_t i = 0; i < kMaxRenderHint; ++i) names[i] = kRenderModeNames[i + 1];
  return names;
}();

// "auto", "line", ...; "" for kDefault and for values no mode has.
constexpr std::string_view render_mode_name(RenderHint hint) {
  const auto value = static_cast<uint8_t>(hint);
  return kRenderModeNames[value <= kMaxRenderHint ? value : 0];
}

// The mode called `name`; nullopt for "" and for any other text.
constexpr std::optional<RenderHint> render_mode_from_name(std::string_view name) {
  for (uint8_t i = 1; i <= kMaxRenderHint; ++i) {
    if (kRenderModeNames[i] == name) return static_cast<RenderHint>(i);
  }
  return std::nullopt;
}

}  // namespace tensorscope::wire
