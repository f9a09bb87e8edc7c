// text_painter.h — internal: one Hershey font at one size; measures, elides, draws.
//
// Used by the frame painters in the daemon's worker processes so that every string is
// measured before it is drawn and never runs past the space it was given.
// Thread safety: immutable after construction; cv::putText on distinct images.
#pragma once

#include <string>

#include <opencv2/core.hpp>

namespace tensorscope::plotting::internal {

class TextPainter {
 public:
  TextPainter(int font, double scale, int thickness);

  int width(const std::string& text) const;
  int ascent() const { return ascent_; }    // pixels above the baseline
  int descent() const { return descent_; }  // pixels below it
  int line_height() const { return ascent_ + descent_; }
  double scale() const { return scale_; }
  // The same font scaled by `factor`.
  TextPainter scaled(double factor) const;

  // `text` cut to fit max_width, with "..." at the end or in the middle.
  std::string elide_end(const std::string& text, int max_width) const;
  std::string elide_middle(const std::string& text, int max_width) const;

  // Draws with its baseline at `baseline_y`, starting at x; returns the end x.
  int draw(cv::Mat& image, const std::string& text, int x, int baseline_y, const cv::Scalar& color) const;
  // Right-aligned so it ends at right_x; returns the start x.
  int draw_right(cv::Mat& image, const std::string& text, int right_x, int baseline_y, const cv::Scalar& color) const;

 private:
  int font_;
  double scale_;
  int thickness_;
  int ascent_;
  int descent_;
};

// Hershey fonts only know printable ASCII: anything else becomes '?'.
std::string printable_ascii(const std::string& text);

}  // namespace tensorscope::plotting::internal
