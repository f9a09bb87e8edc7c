// plot_canvas.cc — shared axes and layout for the line, heatmap and stats painters.
#include "plot_canvas.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <opencv2/imgproc.hpp>

#include "tensorscope/plotting/axis_ticks.h"

namespace tensorscope::plotting::internal {

PlotMetrics plot_metrics(const cv::Mat& image) {
  const double unit = std::max(0.2, std::min(image.rows / 480.0, image.cols / 640.0));
  const int thickness = unit >= 1.75 ? 2 : 1;
  auto px = [&](double v) { return std::max(1, static_cast<int>(std::lround(v * unit))); };
  return PlotMetrics{unit,
                     px(12),
                     px(6),
                     px(4),
                     thickness,
                     TextPainter(cv::FONT_HERSHEY_DUPLEX, 0.62 * unit, thickness),
                     TextPainter(cv::FONT_HERSHEY_SIMPLEX, 0.5 * unit, thickness),
                     TextPainter(cv::FONT_HERSHEY_SIMPLEX, 0.42 * unit, thickness)};
}

cv::Scalar mix(const cv::Scalar& a, const cv::Scalar& b, double t) { return a * (1 - t) + b * t; }

cv::Size frame_size(const FrameStyle& style) {
  return cv::Size(std::clamp(style.width, kMinFrameSide, kMaxFrameSide),
                  std::clamp(style.height, kMinFrameSide, kMaxFrameSide));
}

const std::array<cv::Vec3b, 256>& viridis() {
  static const std::array<cv::Vec3b, 256> table = [] {
    std::array<cv::Vec3b, 256> t{};
    cv::Mat gray(1, 256, CV_8UC1), colored;
    for (int i = 0; i < 256; ++i) gray.at<uchar>(0, i) = static_cast<uchar>(i);
    cv::applyColorMap(gray, colored, cv::COLORMAP_VIRIDIS);
    for (int i = 0; i < 256; ++i) t[static_cast<size_t>(i)] = colored.at<cv::Vec3b>(0, i);
    return t;
  }();
  return table;
}

cv::Scalar dim_color(const FrameStyle& style) { return mix(style.foreground, style.background, 0.4); }
cv::Scalar axis_color(const FrameStyle& style) { return mix(style.foreground, style.background, 0.55); }
cv::Scalar alert_color(const FrameStyle&) { return cv::Scalar(80, 80, 240); }

Range padded_range(double lo, double hi, double margin) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {-1, 1};
  if (lo > hi) std::swap(lo, hi);
  const double half_span = hi / 2 - lo / 2;  // cannot overflow
  if (!(half_span > 0) || half_span < std::abs(lo / 2 + hi / 2) * 1e-12) {
    const double c = lo / 2 + hi / 2;
    const double d = c == 0 ? 1.0 : std::abs(c) * 0.1;
    return {c - d, c + d};
  }
  const double pad = std::min(half_span * 2 * margin, 1e307);
  Range r{lo - pad, hi + pad};
  if (!std::isfinite(r.lo)) r.lo = lo;
  if (!std::isfinite(r.hi)) r.hi = hi;
  return r;
}

namespace {
double fraction(double v, const Range& r) {
  if (r.linthresh > 0) {
    const double lo = symlog(r.lo, r.linthresh);
    const double den = symlog(r.hi, r.linthresh) - lo;
    if (den == 0 || !std::isfinite(den)) return 0.5;
    return (symlog(v, r.linthresh) - lo) / den;
  }
  const double den = r.hi / 2 - r.lo / 2;  // negative for an inverted axis
  if (den == 0 || !std::isfinite(den)) return 0.5;
  return (v / 2 - r.lo / 2) / den;
}
}  // namespace

double PlotRect::fx(double v) const {
  const double t = std::clamp(fraction(v, x), -2.0, 3.0);
  return rect.x + t * std::max(0, rect.width - 1);
}
double PlotRect::fy(double v) const {
  const double t = std::clamp(fraction(v, y), -2.0, 3.0);
  return rect.y + rect.height - 1 - t * std::max(0, rect.height - 1);
}
int PlotRect::px(double v) const { return static_cast<int>(std::lround(fx(v))); }
int PlotRect::py(double v) const { return static_cast<int>(std::lround(fy(v))); }

int footer_baseline(const cv::Rect& area, const PlotMetrics& m, int row_from_bottom) {
  const int row = m.small.line_height() + m.gap;
  return area.y + area.height - m.pad - m.small.descent() - row_from_bottom * row;
}

namespace {

// Ticks for [lo, hi] with labels, at most max_ticks; integer axes keep whole steps.
struct LabelledTicks {
  std::vector<double> values;
  std::vector<std::string> labels;
};

LabelledTicks make_ticks(Range r, int max_ticks, bool integer) {
  LabelledTicks t;
  if (r.lo > r.hi) std::swap(r.lo, r.hi);
  AxisTicks ticks = nice_ticks(r.lo, r.hi, std::max(1, max_ticks));
  if (integer && ticks.step > 0 && ticks.step < 1) {
    ticks.step = 1;
    ticks.values.clear();
    for (double v = std::ceil(r.lo); v <= r.hi && ticks.values.size() < 50; v += 1) {
      ticks.values.push_back(v);
    }
  }
  if (ticks.values.empty()) {  // a range nice_ticks cannot split: label both ends
    t.values = {r.lo, r.hi};
    t.labels = {format_number(r.lo), format_number(r.hi)};
    return t;
  }
  for (double v : ticks.values) {
    t.values.push_back(v);
    t.labels.push_back(integer && std::abs(v) < 1e15 ? std::to_string(static_cast<int64_t>(v))
                                                     : format_tick(v, ticks.step));
  }
  return t;
}

}  // namespace

PlotRect draw_axes(cv::Mat& image, const cv::Rect& area, const AxesSpec& spec, const FrameStyle& style,
                   const PlotMetrics& m, bool dry_run) {
  PlotRect plot;
  plot.x = spec.x;
  plot.y = spec.y;
  const TextPainter& font = m.small;
  const cv::Scalar dim = dim_color(style), axis = axis_color(style);
  const int right = area.x + area.width - m.pad;

  // Vertical layout, bottom up: footer rows, x title, x tick labels, ticks, plot.
  const int x_title_baseline = footer_baseline(area, m, spec.footer_rows);
  const int x_label_baseline =
      x_title_baseline - font.descent() - m.gap / 2 - font.ascent() - (spec.x_title.empty() ? -font.line_height() : 0);
  const int y1 = x_label_baseline - font.ascent() - m.tick - m.gap / 2;
  const int y_title_baseline = area.y + m.pad / 2 + font.ascent();
  const int y0 = spec.y_title.empty() ? area.y + m.pad : y_title_baseline + font.descent() + m.gap;
  if (y1 - y0 < 12) return plot;

  const int max_y_ticks = std::clamp((y1 - y0) / std::max(1, 3 * font.line_height()), 2, 10);
  LabelledTicks yt;
  if (spec.y.linthresh > 0) {
    // Decades, each kept when it clears those kept before (by y alone: the plot's height
    // is known from the layout above).
    std::vector<std::pair<int, int>> taken;
    PlotRect probe;
    probe.rect = cv::Rect(0, y0, 1, y1 - y0);
    probe.y = spec.y;
    for (double v :
         symlog_tick_candidates(std::min(spec.y.lo, spec.y.hi), std::max(spec.y.lo, spec.y.hi), spec.y.linthresh)) {
      const int y = probe.py(v), half = font.line_height() / 2 + m.gap;
      if (std::any_of(taken.begin(), taken.end(),
                      [&](const auto& t) { return y - half < t.second && y + half > t.first; })) {
        continue;
      }
      taken.emplace_back(y - half, y + half);
      yt.values.push_back(v);
      yt.labels.push_back(format_number(v));
    }
  } else {
    yt = make_ticks(spec.y, max_y_ticks, spec.y_integer);
  }
  int ylabel_width = 0;
  for (const auto& s : yt.labels) ylabel_width = std::max(ylabel_width, font.width(s));
  const int x0 = area.x + m.pad + ylabel_width + m.tick + m.gap / 2;
  const int x1 = right;
  if (x1 - x0 < 16) return plot;
  plot.rect = cv::Rect(x0, y0, x1 - x0, y1 - y0);
  if (dry_run) return plot;

  // Horizontal grid and value labels.
  for (size_t i = 0; i < yt.values.size(); ++i) {
    const int y = plot.py(yt.values[i]);
    if (y < y0 || y > y1) continue;
    cv::line(image, {x0 + 1, y}, {x1 - 1, y}, style.grid, 1);
    cv::line(image, {x0 - m.tick, y}, {x0, y}, axis, m.line);
    font.draw_right(image, yt.labels[i], x0 - m.tick - m.gap / 2, y + font.ascent() / 2, dim);
  }

  // x ticks: as many as fit without labels touching.
  for (int max_ticks = std::clamp((x1 - x0) / (4 * font.width("0")), 2, 12); max_ticks >= 1; --max_ticks) {
    const LabelledTicks xt = make_ticks(spec.x, max_ticks, spec.x_integer);
    int widest = 0;
    for (const auto& s : xt.labels) widest = std::max(widest, font.width(s));
    const double spacing = xt.values.size() > 1 ? std::abs(plot.fx(xt.values[1]) - plot.fx(xt.values[0])) : (x1 - x0);
    if (spacing < widest + 2 * m.gap && max_ticks > 1) continue;
    for (size_t i = 0; i < xt.values.size(); ++i) {
      const int x = plot.px(xt.values[i]);
      if (x < x0 - 1 || x > x1 + 1) continue;
      cv::line(image, {x, y0 + 1}, {x, y1 - 1}, style.grid, 1);
      cv::line(image, {x, y1}, {x, y1 + m.tick}, axis, m.line);
      const int w = font.width(xt.labels[i]);
      const int lx = std::clamp(x - w / 2, m.pad / 2, std::max(0, image.cols - m.pad / 2 - w));
      font.draw(image, xt.labels[i], lx, x_label_baseline, dim);
    }
    break;
  }
  cv::line(image, {x0, y1}, {x1, y1}, axis, m.line);
  cv::line(image, {x0, y0}, {x0, y1}, axis, m.line);

  if (!spec.x_title.empty()) {
    const std::string t = font.elide_end(spec.x_title, x1 - x0);
    font.draw(image, t, x0 + (x1 - x0 - font.width(t)) / 2, x_title_baseline, dim);
  }
  if (!spec.y_title.empty()) {
    font.draw(image, font.elide_end(spec.y_title, x1 - area.x - m.pad), area.x + m.pad, y_title_baseline, dim);
  }
  return plot;
}

int text_runs_width(const TextPainter& font, const std::vector<TextRun>& runs) {
  int total = 0;
  for (const TextRun& r : runs) total += font.width(r.text);
  return total;
}

void draw_text_runs(cv::Mat& image, const TextPainter& font, int x, int baseline, const std::vector<TextRun>& runs,
                    int max_width) {
  const int total = text_runs_width(font, runs);
  if (total <= 0 || max_width <= 0) return;
  const TextPainter fitted = total > max_width ? font.scaled(double(max_width) / total) : font;
  for (const TextRun& r : runs) x = fitted.draw(image, r.text, x, baseline, r.color);
}

void draw_centered(cv::Mat& image, const TextPainter& font, const std::string& text, const cv::Rect& rect,
                   const cv::Scalar& color) {
  const std::string t = font.elide_end(text, rect.width - 4);
  font.draw(image, t, rect.x + (rect.width - font.width(t)) / 2, rect.y + (rect.height + font.ascent()) / 2, color);
}

void fill_background(cv::Mat& image, const cv::Scalar& color) {
  if (image.empty() || image.type() != CV_8UC3) {
    image.setTo(color);
    return;
  }
  const cv::Vec3b pixel(cv::saturate_cast<uchar>(color[0]), cv::saturate_cast<uchar>(color[1]),
                        cv::saturate_cast<uchar>(color[2]));
  cv::Vec3b* first = image.ptr<cv::Vec3b>(0);
  for (int x = 0; x < image.cols; ++x) first[x] = pixel;
  const size_t row_bytes = static_cast<size_t>(image.cols) * 3;
  for (int y = 1; y < image.rows; ++y) std::memcpy(image.ptr(y), first, row_bytes);
}

}  // namespace tensorscope::plotting::internal
