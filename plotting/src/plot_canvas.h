// plot_canvas.h — internal: sizes, colours and x/y axes shared by the line, heatmap and
// stats painters (the histogram painter keeps its own copy in frame_painter.cc).
//
// Used by the daemon's worker processes while drawing one frame. Sizes are designed at
// 640x480 and scaled with the frame; every label is measured before it is drawn, and
// ranges may be huge (1e308) or degenerate without overflowing or crashing.
// Thread safety: pure functions on the caller's image; thread-safe.
#pragma once

#include <array>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "tensorscope/plotting/frame_painter.h"
#include "text_painter.h"

namespace tensorscope::plotting::internal {

struct PlotMetrics {
  double unit;
  int pad;   // outer margin
  int gap;   // between rows and items
  int tick;  // tick mark length
  int line;  // line thickness for axes
  TextPainter title;
  TextPainter body;
  TextPainter small;
};

PlotMetrics plot_metrics(const cv::Mat& image);
cv::Scalar mix(const cv::Scalar& a, const cv::Scalar& b, double t);
cv::Size frame_size(const FrameStyle& style);
// Muted text colour (labels, tick values) and axis colour for a style.
cv::Scalar dim_color(const FrameStyle& style);
cv::Scalar axis_color(const FrameStyle& style);
// Viridis as 256 BGR entries (OpenCV's table), built once.
const std::array<cv::Vec3b, 256>& viridis();

// Red-ish colour for NaN/Inf markers, readable on the style's background.
cv::Scalar alert_color(const FrameStyle& style);

// A finite, non-empty range [lo, hi] around finite data [lo, hi] with `margin` (a
// fraction of the span) on each side. Equal values get +-10% (or +-1 around 0);
// non-finite input gives [-1, 1]. Never overflows.
struct Range {
  double lo = 0;
  double hi = 1;
  double linthresh = 0;  // > 0: a symlog axis (axis_ticks.h) with this linear threshold
};
Range padded_range(double lo, double hi, double margin);

// Maps data to pixels inside `rect` (y grows upwards in data, downwards in pixels;
// a range with lo > hi is drawn inverted, e.g. matrix rows top to bottom).
struct PlotRect {
  cv::Rect rect;
  Range x, y;
  double fx(double v) const;  // fractional pixel x; clamped to a few rects around the plot
  double fy(double v) const;
  int px(double v) const;
  int py(double v) const;
};

struct AxesSpec {
  Range x, y;
  std::string x_title;     // drawn below the x tick labels, centred
  std::string y_title;     // drawn above the y axis, left-aligned
  bool x_integer = false;  // ticks only at whole numbers (element indices, steps)
  bool y_integer = false;  // (a symlog y axis, y.linthresh > 0, is labelled at 0 and decades)
  int footer_rows = 1;     // rows of small text left free below the x title
};

// Draws grid, ticks, tick labels and titles in `area`; returns the plot rectangle
// (empty rect when the area is too small for a plot). With dry_run, only computes the
// rectangle. footer_baseline(area, m, i) gives the baseline of the i-th free row from
// the bottom of the area.
PlotRect draw_axes(cv::Mat& image, const cv::Rect& area, const AxesSpec& spec, const FrameStyle& style,
                   const PlotMetrics& m, bool dry_run = false);
int footer_baseline(const cv::Rect& area, const PlotMetrics& m, int row_from_bottom);

// Pieces of text in different colours drawn as one line, shrunk to fit max_width.
struct TextRun {
  std::string text;
  cv::Scalar color;
};
void draw_text_runs(cv::Mat& image, const TextPainter& font, int x, int baseline, const std::vector<TextRun>& runs,
                    int max_width);
// Width of the runs at the font's size.
int text_runs_width(const TextPainter& font, const std::vector<TextRun>& runs);

// Message centred in `rect` (elided to fit).
void draw_centered(cv::Mat& image, const TextPainter& font, const std::string& text, const cv::Rect& rect,
                   const cv::Scalar& color);

// Fast fill of a CV_8UC3 image (cv::Mat::setTo with a 3-channel Scalar is slow).
void fill_background(cv::Mat& image, const cv::Scalar& color);

}  // namespace tensorscope::plotting::internal
