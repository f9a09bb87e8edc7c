// overview.h — the overview frame: one metric (recording/overview_history.h) of every
// tracked tensor of one rank over the steps, as a heatmap read in a second: module names
// down the left in forward order, steps along the bottom, the metric in colour (on a log
// scale where the metric spans decades: recording/overview_scale.h), non-finite cells in
// one unmistakable colour with the first of them framed and named in the footer, and the
// other anomalies reported (an explosion, dead units) framed and named beside it.
//
// Used by the daemon's worker processes (the overview videos while training, a PNG of the
// whole run at the end). Frames are CV_8UC3 of style.width x style.height; no exception
// escapes (a failed drawing gives a blank frame of the right size).
// Thread safety: pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "tensorscope/plotting/frame_painter.h"
#include "tensorscope/recording/overview_history.h"

namespace tensorscope::plotting {

// An anomaly named in the footer beside the first NaN/Inf, its cell framed where the grid
// has its row and step (daemon/src/worker/anomaly_detector.h reports them).
struct OverviewMark {
  std::string what;  // "explosion", "dead units"
  std::string row;   // its stream
  int64_t step = 0;
};

// `where` names the rank and process ("rank 0 · pid 4242"); `span` says what the columns
// are ("last 200 summarised steps" / "whole run").
cv::Mat draw_overview_frame(const recording::OverviewGrid& grid, const std::string& where, const std::string& span,
                            const FrameStyle& style, const std::vector<OverviewMark>& marks = {});

// The colour of an overview cell that holds a NaN or Inf (BGR), for tests and legends.
cv::Vec3b overview_nonfinite_color();

}  // namespace tensorscope::plotting
