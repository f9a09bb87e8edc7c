// scatter_plot.cc — the scatter painter (axes, density splatting, index colours,
// legend) and the PCA frame built on it.
#include "tensorscope/plotting/scatter_plot.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdio>
#include <vector>

#include <opencv2/imgproc.hpp>

#include "tensorscope/plotting/axis_ticks.h"
#include "plot_canvas.h"
#include "text_painter.h"

namespace tensorscope::plotting {
namespace {

using internal::printable_ascii;
using internal::TextPainter;

// Same proportions as the other painters: designed at 640x480, scaled by `unit`.
using Metrics = internal::PlotMetrics;
using internal::mix;

Metrics metrics_for(const cv::Mat& image) { return internal::plot_metrics(image); }

cv::Size clamped_size(const FrameStyle& style) { return internal::frame_size(style); }

using internal::viridis;

// Index colour for t in [0, 1]: viridis from 0.18 up (its darkest purples vanish on a
// dark background).
cv::Vec3f index_color(double t) {
  const double u = 0.18 + 0.82 * std::clamp(t, 0.0, 1.0);
  const cv::Vec3b c = viridis()[static_cast<size_t>(std::lround(u * 255))];
  return cv::Vec3f(c[0], c[1], c[2]);
}

// Axis range around [lo, hi] with a 5% margin; a usable range when all values are
// equal.
void axis_range(double lo, double hi, double* out_lo, double* out_hi) {
  if (!(hi > lo)) {
    const double v = std::isfinite(lo) ? lo : 0.0;
    const double half = v != 0 ? std::abs(v) * 0.1 : 1.0;
    *out_lo = v - half;
    *out_hi = v + half;
    return;
  }
  const double m = (hi - lo) * 0.05;
  *out_lo = lo - m;
  *out_hi = hi + m;
}

struct Point {
  double x;
  double y;
  int64_t index;
};

cv::Scalar scalar_of(const cv::Vec3b& c) { return cv::Scalar(c[0], c[1], c[2]); }

// The classes' legend in rows from `top` between left and right: a swatch and the name
// of each class; at most 3 rows (the classes left over are counted in the last entry).
// Returns the height it took.
int draw_class_legend(cv::Mat& image, const PointClasses& classes, int left, int right, int top, const Metrics& m,
                      const FrameStyle& style, ScatterLegend* legend) {
  const TextPainter& font = m.small;
  const cv::Scalar dim = mix(style.foreground, style.background, 0.25);
  const int row_h = font.line_height() + m.gap / 2;
  const int swatch = std::max(4, font.ascent() - 1);
  const int max_name = std::max(8, static_cast<int>(std::lround(110 * m.unit)));
  constexpr int kMaxRows = 3;
  int x = left, row = 0;
  for (size_t i = 0; i < classes.classes.size(); ++i) {
    const PointClasses::Class& c = classes.classes[i];
    const std::string name = font.elide_end(printable_ascii(c.name), max_name);
    const int width = swatch + m.gap / 2 + font.width(name) + m.gap * 2;
    if (x + width > right && x > left) {
      if (row + 1 == kMaxRows) {
        const std::string more = "+" + std::to_string(classes.classes.size() - i) + " more";
        font.draw(image, more, std::max(left, right - font.width(more)), top + row * row_h + font.ascent(), dim);
        break;
      }
      ++row;
      x = left;
    }
    const int baseline = top + row * row_h + font.ascent();
    const cv::Rect box(x, baseline - swatch, swatch, swatch);
    cv::rectangle(image, box, scalar_of(c.color), cv::FILLED);
    font.draw(image, name, x + swatch + m.gap / 2, baseline, dim);
    if (legend != nullptr) {
      legend->entries.push_back({c.name, c.color, cv::Rect(x, top + row * row_h, width - m.gap, row_h)});
    }
    x += width;
  }
  return (row + 1) * row_h;
}

// The classes' trails (their centroids over the last frames, older parts fainter) and
// this frame's centroids, ringed, in the plot box `box` (data mapped by to_box).
template <typename ToBox>
void draw_centroids(cv::Mat& image, const cv::Rect& box, const PointClasses& classes, const ToBox& to_box,
                    const Metrics& m, const FrameStyle& style) {
  cv::Mat plot = image(box);  // drawing clipped to the box
  const int thick = std::max(1, static_cast<int>(std::lround(1.6 * m.unit)));
  const int radius = std::max(3, static_cast<int>(std::lround(5 * m.unit)));
  for (const PointClasses::Class& c : classes.classes) {
    if (c.other || c.trail.empty()) continue;
    for (size_t k = 0; k + 1 < c.trail.size(); ++k) {
      const double age = static_cast<double>(k + 1) / static_cast<double>(c.trail.size());
      const cv::Scalar color = mix(scalar_of(c.color), style.background, 0.15 + 0.85 * age);
      cv::line(plot, to_box(c.trail[k]), to_box(c.trail[k + 1]), color, thick, cv::LINE_AA);
    }
  }
  for (const PointClasses::Class& c : classes.classes) {
    if (c.other || c.trail.empty()) continue;
    const cv::Point at = to_box(c.trail.back());
    cv::circle(plot, at, radius + thick, style.background, cv::FILLED, cv::LINE_AA);
    cv::circle(plot, at, radius, scalar_of(c.color), cv::FILLED, cv::LINE_AA);
    cv::circle(plot, at, radius + thick, style.foreground, 1, cv::LINE_AA);
  }
}

void draw_plot(cv::Mat& image, const cv::Rect& area, const Eigen::MatrixXf& points, const ScatterLabels& labels,
               const FrameStyle& style, const Metrics& m, const ScatterLimits* limits, ScatterLegend* legend) {
  const cv::Scalar dim = mix(style.foreground, style.background, 0.4);
  const cv::Scalar axis = mix(style.foreground, style.background, 0.55);
  const TextPainter& font = m.small;
  const int left = area.x + m.pad, right = area.x + area.width - m.pad;

  // Finite points.
  const int64_t n = points.rows();
  const bool has_y = points.cols() >= 2;
  std::vector<Point> pts;
  pts.reserve(static_cast<size_t>(n));
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  if (points.cols() >= 1) {
    for (int64_t i = 0; i < n; ++i) {
      const double x = points(i, 0), y = has_y ? points(i, 1) : 0.0;
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      pts.push_back({x, y, i});
      xmin = std::min(xmin, x);
      xmax = std::max(xmax, x);
      ymin = std::min(ymin, y);
      ymax = std::max(ymax, y);
    }
  }
  const int64_t dropped = n - static_cast<int64_t>(pts.size());

  // Bottom: note line, x title, x tick labels.
  const int note_baseline = area.y + area.height - m.pad - font.descent();
  std::string note = printable_ascii(labels.note);
  const PointClasses* classes = labels.classes;  // the separation first: what the frame is about
  if (classes != nullptr) note = separation_text(*classes) + (note.empty() ? "" : "   " + note);
  if (dropped > 0) {
    note += std::string(note.empty() ? "" : "   ") + format_count(static_cast<uint64_t>(dropped)) +
        (dropped == 1 ? " point" : " points") + " with NaN/Inf not shown";
  }
  font.draw(image, font.elide_end(note, right - left), left, note_baseline, dim);
  const int xtitle_baseline = note_baseline - font.descent() - m.gap - m.body.descent();
  const int xtick_baseline = xtitle_baseline - m.body.ascent() - m.gap - font.descent();
  const int y1 = xtick_baseline - font.ascent() - m.tick - m.gap / 2;

  // Top: y title at the left, legend at the right.
  const int top_baseline = area.y + m.pad + m.body.ascent();
  int y0 = top_baseline + m.body.descent() + m.gap + font.ascent() / 2;
  if (classes != nullptr && !classes->classes.empty()) {
    y0 +=
        draw_class_legend(image, *classes, left, right, top_baseline + m.body.descent() + m.gap / 2, m, style, legend);
  }
  if (y1 - y0 < 8) return;

  int legend_left = right;
  const bool index_legend = classes == nullptr && labels.color_by_index && n >= 2;
  if (index_legend) {
    const std::string name = printable_ascii(labels.index_name);
    const std::string first = name + " 0";
    const std::string last = name + " " + std::to_string(n - 1);
    const int bar_w = std::max(8, static_cast<int>(std::lround(70 * m.unit)));
    const int bar_h = std::max(3, static_cast<int>(std::lround(7 * m.unit)));
    const int x_last = right - font.width(last);
    const int bar_x1 = x_last - m.gap;
    const int bar_x0 = bar_x1 - bar_w;
    const int x_first = bar_x0 - m.gap - font.width(first);
    if (x_first > left + (right - left) / 2) {
      font.draw(image, first, x_first, top_baseline, dim);
      font.draw(image, last, x_last, top_baseline, dim);
      const int by = top_baseline - font.ascent() / 2 - bar_h / 2;
      for (int x = bar_x0; x < bar_x1; ++x) {
        const cv::Vec3f c = index_color(double(x - bar_x0) / std::max(1, bar_w - 1));
        cv::line(image, {x, by}, {x, by + bar_h - 1}, cv::Scalar(c[0], c[1], c[2]), 1);
      }
      legend_left = x_first;
    }
  }
  if (!labels.y_title.empty()) {
    m.body.draw(image, m.body.elide_end(printable_ascii(labels.y_title), legend_left - left - 2 * m.gap), left,
                top_baseline, style.foreground);
  }

  double xlo, xhi, ylo, yhi;
  if (limits != nullptr && limits->x.lo < limits->x.hi && limits->y.lo < limits->y.hi &&
      std::isfinite(limits->x.hi - limits->x.lo) && std::isfinite(limits->y.hi - limits->y.lo)) {
    xlo = limits->x.lo;
    xhi = limits->x.hi;
    ylo = limits->y.lo;
    yhi = limits->y.hi;
  } else {
    axis_range(xmin, xmax, &xlo, &xhi);
    axis_range(ymin, ymax, &ylo, &yhi);
  }

  // Y ticks decide the left edge of the box.
  const int max_y_ticks = std::clamp((y1 - y0) / std::max(1, 3 * font.line_height()), 2, 10);
  const AxisTicks yticks = nice_ticks(ylo, yhi, max_y_ticks);
  std::vector<std::string> ylabels;
  int ylabel_width = 0;
  for (double v : yticks.values) {
    ylabels.push_back(format_tick(v, yticks.step));
    ylabel_width = std::max(ylabel_width, font.width(ylabels.back()));
  }
  const int x0 = left + ylabel_width + m.tick + m.gap / 2;
  const int x1 = right;
  if (x1 - x0 < 16) return;
  const double pw = x1 - x0, ph = y1 - y0;
  auto px_of = [&](double v) { return (v - xlo) / (xhi - xlo) * pw; };  // from x0
  auto py_of = [&](double v) { return (yhi - v) / (yhi - ylo) * ph; };  // from y0

  for (size_t i = 0; i < yticks.values.size(); ++i) {
    const int y = y0 + static_cast<int>(std::lround(py_of(yticks.values[i])));
    cv::line(image, {x0 + 1, y}, {x1, y}, style.grid, 1);
    cv::line(image, {x0 - m.tick, y}, {x0, y}, axis, m.line);
    font.draw_right(image, ylabels[i], x0 - m.tick - m.gap / 2, y + font.ascent() / 2, dim);
  }
  for (int max_ticks = std::clamp(static_cast<int>(pw / (4 * font.width("0"))), 2, 12); max_ticks >= 2; --max_ticks) {
    const AxisTicks xt = nice_ticks(xlo, xhi, max_ticks);
    std::vector<std::string> xl;
    int widest = 0;
    for (double v : xt.values) {
      xl.push_back(format_tick(v, xt.step));
      widest = std::max(widest, font.width(xl.back()));
    }
    const double spacing = xt.values.size() > 1 ? px_of(xt.values[1]) - px_of(xt.values[0]) : pw;
    if (spacing < widest + 2 * m.gap && max_ticks > 2) continue;
    for (size_t i = 0; i < xt.values.size(); ++i) {
      const int x = x0 + static_cast<int>(std::lround(px_of(xt.values[i])));
      cv::line(image, {x, y0}, {x, y1 - 1}, style.grid, 1);
      cv::line(image, {x, y1}, {x, y1 + m.tick}, axis, m.line);
      const int w = font.width(xl[i]);
      const int lx = std::clamp(x - w / 2, m.pad / 2, std::max(0, image.cols - m.pad / 2 - w));
      font.draw(image, xl[i], lx, xtick_baseline, dim);
    }
    break;
  }
  cv::line(image, {x0, y1}, {x1, y1}, axis, m.line);
  cv::line(image, {x0, y0}, {x0, y1}, axis, m.line);
  if (!labels.x_title.empty()) {
    const std::string t = m.body.elide_end(printable_ascii(labels.x_title), x1 - x0);
    m.body.draw(image, t, x0 + (x1 - x0 - m.body.width(t)) / 2, xtitle_baseline, style.foreground);
  }

  if (pts.empty()) {
    const std::string text = n == 0 ? "no points" : "no finite points";
    m.body.draw(image, text, (x0 + x1 - m.body.width(text)) / 2, (y0 + y1 + m.body.ascent()) / 2, dim);
    return;
  }

  // Splat: anti-aliased discs into coverage and colour sums, inside the box only.
  const int w = x1 - x0 - 1, h = y1 - y0;  // pixels right of the y axis, above the x axis
  if (w < 1 || h < 1) return;
  const size_t count = pts.size();
  const double radius = m.unit * (count <= 300 ? 3.2 : count <= 3000 ? 2.3 : count <= 30000 ? 1.6 : 1.1);
  const double opacity = std::clamp(3000.0 / static_cast<double>(count), 0.1, 0.85);
  const int r_int = static_cast<int>(std::ceil(radius + 0.5));
  std::vector<float> cover(static_cast<size_t>(w) * h, 0.0f);
  std::vector<cv::Vec3f> color(static_cast<size_t>(w) * h, cv::Vec3f(0, 0, 0));
  const cv::Vec3f plain(static_cast<float>(style.bar[0]), static_cast<float>(style.bar[1]),
                        static_cast<float>(style.bar[2]));
  const double inv_last = n > 1 ? 1.0 / static_cast<double>(n - 1) : 0.0;
  for (const Point& p : pts) {
    // Pixel centres are at integer + 0.5 of the box's continuous coordinates.
    const double cx = px_of(p.x) * (w - 1) / pw + 0.5;
    const double cy = py_of(p.y) * (h - 1) / ph + 0.5;
    cv::Vec3f c = plain;
    if (classes != nullptr) {
      const int k = static_cast<size_t>(p.index) < classes->of_point.size() ? classes->of_point[p.index] : -1;
      if (k >= 0) c = classes->classes[static_cast<size_t>(k)].color;
    } else if (labels.color_by_index) {
      c = index_color(p.index * inv_last);
    }
    const int ix = static_cast<int>(cx), iy = static_cast<int>(cy);
    for (int yy = std::max(0, iy - r_int); yy <= std::min(h - 1, iy + r_int); ++yy) {
      for (int xx = std::max(0, ix - r_int); xx <= std::min(w - 1, ix + r_int); ++xx) {
        const double dx = xx + 0.5 - cx, dy = yy + 0.5 - cy;
        const double wgt = std::clamp(radius + 0.5 - std::sqrt(dx * dx + dy * dy), 0.0, 1.0);
        if (wgt <= 0) continue;
        const size_t k = static_cast<size_t>(yy) * w + xx;
        cover[k] += static_cast<float>(wgt);
        color[k] += c * static_cast<float>(wgt);
      }
    }
  }
  const double log_keep = std::log1p(-opacity);
  for (int yy = 0; yy < h; ++yy) {
    cv::Vec3b* row = image.ptr<cv::Vec3b>(y0 + yy) + x0 + 1;
    for (int xx = 0; xx < w; ++xx) {
      const size_t k = static_cast<size_t>(yy) * w + xx;
      const float cv_ = cover[k];
      if (cv_ <= 0) continue;
      const float alpha = static_cast<float>(1.0 - std::exp(log_keep * cv_));
      const cv::Vec3f c = color[k] / cv_;
      for (int ch = 0; ch < 3; ++ch) {
        row[xx][ch] = cv::saturate_cast<uchar>(row[xx][ch] * (1 - alpha) + c[ch] * alpha);
      }
    }
  }
  if (classes != nullptr) {
    if (legend != nullptr) legend->plot = cv::Rect(x0 + 1, y0, w, h);
    const auto to_box = [&](const cv::Point2d& p) {
      return cv::Point(static_cast<int>(std::lround(px_of(p.x) * (w - 1) / pw + 0.5)),
                       static_cast<int>(std::lround(py_of(p.y) * (h - 1) / ph + 0.5)));
    };
    draw_centroids(image, cv::Rect(x0 + 1, y0, w, h), *classes, to_box, m, style);
  }
}

std::string percent(float ratio) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", static_cast<double>(ratio) * 100);
  return buf;
}

}  // namespace

ScatterLimits point_extent(const Eigen::MatrixXf& points) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ScatterLimits e{{INFINITY, -INFINITY}, {INFINITY, -INFINITY}};
  const bool has_y = points.cols() >= 2;
  for (int64_t i = 0; points.cols() >= 1 && i < points.rows(); ++i) {
    const double x = points(i, 0), y = has_y ? points(i, 1) : 0.0;
    if (!std::isfinite(x) || !std::isfinite(y)) continue;
    e.x = {std::min(e.x.lo, x), std::max(e.x.hi, x)};
    e.y = {std::min(e.y.lo, y), std::max(e.y.hi, y)};
  }
  if (!(e.x.lo <= e.x.hi)) e = {{nan, nan}, {nan, nan}};
  return e;
}

cv::Mat draw_scatter_frame(const FrameInfo& info, const tensor::TensorStats* stats, const Eigen::MatrixXf& points,
                           const ScatterLabels& labels, const FrameStyle& style, const ScatterLimits* limits,
                           ScatterLegend* legend) {
  cv::Mat image(clamped_size(style), CV_8UC3);
  if (legend != nullptr) *legend = ScatterLegend{image.size(), {}, {}};
  try {
    const cv::Rect area = draw_frame_header(image, info, stats, style);
    draw_plot(image, area, points, labels, style, metrics_for(image), limits, legend);
  } catch (...) {
    image.setTo(style.background);
    if (legend != nullptr) legend->entries.clear();
  }
  if (legend != nullptr && legend->plot.area() == 0) legend->entries.clear();  // no plot drawn: nothing to point at
  return image;
}

std::string separation_text(const PointClasses& classes) {
  const std::string count = std::to_string(classes.labels) + (classes.labels == 1 ? " class" : " classes");
  if (!std::isfinite(classes.separation)) return count + ", silhouette -";
  char buf[64];
  std::snprintf(buf, sizeof buf, "silhouette %.2f (%s)", classes.separation, count.c_str());
  return buf;
}

cv::Mat draw_pca_frame(const FrameInfo& info, const tensor::TensorStats* stats, const PcaResult& result,
                       const FrameStyle& style, const ScatterLimits* limits, const PointClasses* classes,
                       ScatterLegend* legend) {
  if (legend != nullptr) *legend = ScatterLegend{};
  if (!result.ok()) return draw_message_frame(info, "PCA: " + result.message, style);
  try {
    ScatterLabels labels;
    const auto ratio = [&](size_t i) {
      return i < result.explained_variance_ratio.size() ? result.explained_variance_ratio[i] : 0.0f;
    };
    labels.x_title = "PC1 (" + percent(ratio(0)) + " of variance)";
    labels.y_title = "PC2 (" + percent(ratio(1)) + ")";
    labels.note = format_count(static_cast<uint64_t>(result.rows)) + (result.rows == 1 ? " row x " : " rows x ") +
        format_count(static_cast<uint64_t>(result.features)) + (result.features == 1 ? " feature, " : " features, ") +
        (result.randomized ? "randomized PCA" : "exact PCA");
    if (!result.note.empty()) labels.note += "; " + result.note;
    labels.classes = classes;
    return draw_scatter_frame(info, stats, result.projection, labels, style, limits, legend);
  } catch (...) {
    cv::Mat image(clamped_size(style), CV_8UC3, style.background);
    return image;
  }
}

}  // namespace tensorscope::plotting
