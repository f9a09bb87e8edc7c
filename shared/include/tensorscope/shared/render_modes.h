// render_modes.h — the render modes, once: each one's wire value and name.
//
// Used by the client (RenderMode, its to_string), the wire format (RecordHeader::
// render_hint), the daemon (the config's accepted modes, the mode selector, one renderer
// per mode) and the Python package (RENDER_MODES, built by the extension from this list).
// To add a mode: one line in TENSORSCOPE_RENDER_MODES (its value and name cannot be given
// apart: base/named_enum.h), then its renderer in the daemon (make_frame_renderer: the
// build fails on a mode without one) and its row in docs/user/render_modes.md (a test
// checks it); docs/changing.md lists it all. Thread safety: constants only.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "tensorscope/base/named_enum.h"

namespace tensorscope::wire {

// How the daemon draws a stream, as the training program asks for it: X(value, name),
// values numbered from 0 in this order (part of the ABI). The daemon's per-stream config
// rules take precedence over the client's wish, which takes precedence over the daemon's
// render.mode.
#define TENSORSCOPE_RENDER_MODES(X)                                                         \
  X(kDefault, "")            /* no wish: the daemon's render.mode (no name: never named) */ \
  X(kAuto, "auto")           /* by shape: 1-D line, 2-D heatmap, 3-D and up histogram */    \
  X(kLine, "line")           /* 1-D values */                                               \
  X(kHistogram, "histogram") /* value distribution, bins fixed per stream */                \
  X(kHeatmap, "heatmap")     /* 2-D with colorbar */                                        \
  X(kForce2d, "force2d")     /* any shape, flattened and zero-padded to a square heatmap */ \
  X(kPca, "pca")             /* rows projected on the top two principal components */       \
  X(kTsne, "tsne")           /* 2-D t-SNE embedding of rows, warm-started frame to frame */ \
  X(kStats, "stats")         /* mean/std/min/max over steps */

// RenderHint and kRenderModeNames, each mode's name indexed by its value.
TENSORSCOPE_NAMED_ENUM(RenderHint, uint8_t, kRenderModeNames, TENSORSCOPE_RENDER_MODES);
static_assert(static_cast<uint8_t>(RenderHint::kStats) == 8, "render hints are part of the ABI: append new modes");
static_assert(named_and_distinct(kRenderModeNames, 1), "every mode but kDefault has a name of its own");
inline constexpr uint8_t kMaxRenderHint = static_cast<uint8_t>(kRenderModeNames.size() - 1);

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
