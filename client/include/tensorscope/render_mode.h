// render_mode.h — how the daemon draws a stream, as the training program asks for it.
//
// Used in the training process: Client::set_render_mode(stream, mode). The daemon's
// per-stream config rules (render.stream_modes) take precedence over this wish, which
// takes precedence over the daemon's render.mode. Thread safety: a value type.
#pragma once

#include <cstdint>

namespace tensorscope {

enum class RenderMode : uint8_t {
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

const char* to_string(RenderMode mode);

}  // namespace tensorscope
