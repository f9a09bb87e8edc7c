// frame_renderer.h — one stream's way of turning records into frames, per render mode.
//
// Used inside a worker process. prepare() runs on the reader thread, straight on the
// payload in shared memory (valid only during the call), and keeps only what the frame
// needs (a reduction, or a bounded copy for modes that need the data); the returned
// function runs on the render thread and draws the frame. A renderer may keep state
// across frames (fixed histogram bins, statistics history, a warm-started embedding);
// state used by prepare() belongs to the reader thread, state used by the draw function
// to the render thread.
// Thread safety: as above; one renderer per stream.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <opencv2/core.hpp>

#include "tensorscope/plotting/frame_painter.h"
#include "tensorscope/plotting/scatter_plot.h"
#include "config/daemon_config.h"
#include "tensorscope/shared/ring_reader.h"

namespace tensorscope::daemon {

// What a drawn frame tells besides its pixels: for a frame that colours points by class,
// where its classes are shown (legend_json below, for the live view) and how well they
// separate (for the separation table, recording/separation_table.h).
struct FrameNotes {
  std::string legend;          // "" when there is none
  bool classes_shown = false;  // the fields below are set
  uint64_t classes = 0;        // different labels
  uint64_t points = 0;
  double silhouette = 0;  // NaN: fewer than two classes
};

// Draws a frame; `notes` (may be null) receives what it tells besides its pixels, and is
// left as it is by frames without classes.
using DrawFrame = std::function<cv::Mat(const plotting::FrameStyle&, FrameNotes* notes)>;

// A frame's class legend for the live view (live_board.h): {"plot": [x0, y0, x1, y1],
// "classes": [{"name", "color": [r, g, b], "box": [x0, y0, x1, y1]}, ...]}, boxes as
// fractions of the frame's width and height; "" when it has no entries.
std::string legend_json(const plotting::ScatterLegend& legend);

class FrameRenderer {
 public:
  virtual ~FrameRenderer() = default;
  virtual DrawFrame prepare(const RecordView& record, plotting::FrameInfo info) = 0;
};

// The renderer for `mode`: every mode but kDefault and kAuto (resolved before, by the
// mode selector), which give nullptr. `frame_width`: pixels across, the resolution line plots reduce to; `stream`: the
// stream's name (for per-stream settings such as render.histogram_ranges).
std::unique_ptr<FrameRenderer> make_frame_renderer(RenderMode mode, const RenderConfig& config, int frame_width,
                                                   const std::string& stream);

}  // namespace tensorscope::daemon
