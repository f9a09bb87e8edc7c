// text_painter.cc — measuring, eliding and drawing Hershey text.
#include "text_painter.h"

#include <algorithm>

#include <opencv2/imgproc.hpp>

namespace tensorscope::plotting::internal {

std::string printable_ascii(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else if (c >= 0x80) {
      // One '?' per UTF-8 sequence: skip its continuation bytes.
      out.push_back('?');
      while (i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xc0) == 0x80) ++i;
    } else {
      out.push_back(' ');  // tabs, newlines, other controls
    }
  }
  return out;
}

TextPainter::TextPainter(int font, double scale, int thickness)
    : font_(font), scale_(std::max(scale, 0.05)), thickness_(std::max(thickness, 1)) {
  int baseline = 0;
  const cv::Size size = cv::getTextSize("Ag[]", font_, scale_, thickness_, &baseline);
  ascent_ = size.height;
  descent_ = baseline;
}

TextPainter TextPainter::scaled(double factor) const { return TextPainter(font_, scale_ * factor, thickness_); }

int TextPainter::width(const std::string& text) const {
  if (text.empty()) return 0;
  int baseline = 0;
  return cv::getTextSize(text, font_, scale_, thickness_, &baseline).width;
}

std::string TextPainter::elide_end(const std::string& text, int max_width) const {
  if (width(text) <= max_width) return text;
  // Longest prefix p with width(p + "...") <= max_width (width grows with length).
  size_t lo = 0, hi = text.size();
  while (lo < hi) {
    const size_t mid = (lo + hi + 1) / 2;
    if (width(text.substr(0, mid) + "...") <= max_width) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  if (lo == 0) return width("...") <= max_width ? "..." : "";
  return text.substr(0, lo) + "...";
}

std::string TextPainter::elide_middle(const std::string& text, int max_width) const {
  if (width(text) <= max_width) return text;
  // Keep k characters in all, the tail slightly longer than the head (names differ
  // most at their ends: "model.layers.11.attn.out").
  auto candidate = [&](size_t keep) {
    const size_t tail = (keep + 1) / 2;
    const size_t head = keep - tail;
    return text.substr(0, head) + "..." + text.substr(text.size() - tail);
  };
  size_t lo = 0, hi = text.size();
  while (lo < hi) {
    const size_t mid = (lo + hi + 1) / 2;
    if (width(candidate(mid)) <= max_width) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  if (lo == 0) return width("...") <= max_width ? "..." : "";
  return candidate(lo);
}

int TextPainter::draw(cv::Mat& image, const std::string& text, int x, int baseline_y, const cv::Scalar& color) const {
  if (text.empty()) return x;
  cv::putText(image, text, cv::Point(x, baseline_y), font_, scale_, color, thickness_, cv::LINE_AA);
  return x + width(text);
}

int TextPainter::draw_right(cv::Mat& image, const std::string& text, int right_x, int baseline_y,
                            const cv::Scalar& color) const {
  const int x = right_x - width(text);
  draw(image, text, x, baseline_y, color);
  return x;
}

}  // namespace tensorscope::plotting::internal
