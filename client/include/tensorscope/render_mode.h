// render_mode.h — how the daemon draws a stream, as the training program asks for it.
//
// Used in the training process: Client::set_render_mode(stream, mode), TrackOptions::
// render_mode. RenderMode is the wire's RenderHint (tensorscope/shared/render_modes.h,
// where every mode is defined once, in TENSORSCOPE_RENDER_MODES; kDefault: no wish;
// docs/user/render_modes.md shows each). The daemon's per-stream config rules
// (render.stream_modes) take precedence over this wish, which takes precedence over the
// daemon's render.mode. Thread safety: a value type.
#pragma once

#include "tensorscope/shared/render_modes.h"

namespace tensorscope {

using RenderMode = wire::RenderHint;

// "auto", "line", ...; "default" for kDefault.
const char* to_string(RenderMode mode);

}  // namespace tensorscope
