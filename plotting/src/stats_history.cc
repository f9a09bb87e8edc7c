// stats_history.cc — bounded per-step statistics and the `stats` frame.
#include "tensorscope/plotting/stats_history.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <opencv2/imgproc.hpp>

#include "plot_canvas.h"
#include "tensorscope/plotting/axis_ticks.h"

namespace tensorscope::plotting {
namespace {

using internal::PlotMetrics;
using internal::PlotRect;
using internal::TextPainter;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

StatsPoint merge(const StatsPoint& a, const StatsPoint& b) {
  StatsPoint p;
  p.first_step = std::min(a.first_step, b.first_step);
  p.last_step = std::max(a.last_step, b.last_step);
  p.merged = a.merged + b.merged;
  p.nan_count = a.nan_count + b.nan_count;
  p.inf_count = a.inf_count + b.inf_count;
  p.min = std::fmin(a.min, b.min);  // fmin/fmax ignore a NaN side
  p.max = std::fmax(a.max, b.max);
  const bool fa = std::isfinite(a.mean) && std::isfinite(a.std);
  const bool fb = std::isfinite(b.mean) && std::isfinite(b.std);
  if (fa && fb) {
    const double wa = double(a.merged) / p.merged, wb = double(b.merged) / p.merged;
    p.mean = wa * a.mean + wb * b.mean;
    // Pooled variance: within-point variance plus the spread of the means.
    const double da = a.mean - p.mean, db = b.mean - p.mean;
    const double var = wa * (a.std * a.std + da * da) + wb * (b.std * b.std + db * db);
    p.std = std::isfinite(var) ? std::sqrt(var) : std::fmax(a.std, b.std);
  } else {
    p.mean = fa ? a.mean : b.mean;
    p.std = fa ? a.std : b.std;
  }
  return p;
}

}  // namespace

StatsHistory::StatsHistory(size_t max_points) : max_points_(std::max<size_t>(max_points, 8)) {}

void StatsHistory::add(int64_t step, const tensor::TensorStats& stats) {
  StatsPoint p;
  p.first_step = p.last_step = step;
  p.mean = stats.finite_count > 0 ? stats.mean : kNaN;
  p.std = stats.finite_count > 0 ? stats.std : kNaN;
  p.min = stats.finite_count > 0 ? stats.min : kNaN;
  p.max = stats.finite_count > 0 ? stats.max : kNaN;
  p.nan_count = stats.nan_count;
  p.inf_count = stats.pos_inf_count + stats.neg_inf_count;
  try {
    points_.push_back(p);
    ++added_;
    if (points_.size() > max_points_) compact();
  } catch (...) {
    // Out of memory: keep the history as it was.
  }
}

void StatsHistory::compact() {
  // Merge neighbouring pairs in the older half; the recent half keeps full resolution.
  const size_t half = (points_.size() / 2) & ~size_t{1};
  std::vector<StatsPoint> out;
  out.reserve(points_.size());
  for (size_t i = 0; i < half; i += 2) out.push_back(merge(points_[i], points_[i + 1]));
  out.insert(out.end(), points_.begin() + static_cast<std::ptrdiff_t>(half), points_.end());
  points_.swap(out);
}

namespace {

const cv::Scalar kMinColor(150, 200, 110);  // teal-green
const cv::Scalar kMaxColor(200, 120, 220);  // violet

double mid_step(const StatsPoint& p) {
  return static_cast<double>(p.first_step) / 2 + static_cast<double>(p.last_step) / 2;
}

void draw_polyline_runs(cv::Mat& image, const PlotRect& plot, const std::vector<StatsPoint>& pts,
                        double StatsPoint::*field, const cv::Scalar& color, int thickness) {
  constexpr int kShift = 3;
  std::vector<cv::Point> run;
  auto flush = [&]() {
    if (run.size() >= 2) cv::polylines(image, run, false, color, thickness, cv::LINE_AA, kShift);
    if (run.size() == 1) cv::circle(image, run[0], (thickness + 1) << kShift, color, cv::FILLED, cv::LINE_AA, kShift);
    run.clear();
  };
  for (const StatsPoint& p : pts) {
    const double v = p.*field;
    if (!std::isfinite(v)) {
      flush();
      continue;
    }
    run.emplace_back(static_cast<int>(std::lround(plot.fx(mid_step(p)) * (1 << kShift))),
                     static_cast<int>(std::lround(plot.fy(v) * (1 << kShift))));
  }
  flush();
}

void draw_band(cv::Mat& image, const PlotRect& plot, const std::vector<StatsPoint>& pts, const cv::Scalar& color) {
  std::vector<std::vector<cv::Point>> polys;
  std::vector<cv::Point> upper, lower;
  auto flush = [&]() {
    if (upper.size() >= 2) {
      std::vector<cv::Point> poly(upper);
      poly.insert(poly.end(), lower.rbegin(), lower.rend());
      polys.push_back(std::move(poly));
    }
    upper.clear();
    lower.clear();
  };
  for (const StatsPoint& p : pts) {
    if (!std::isfinite(p.mean) || !std::isfinite(p.std)) {
      flush();
      continue;
    }
    const int x = plot.px(mid_step(p));
    upper.emplace_back(x, plot.py(p.mean + p.std));
    lower.emplace_back(x, plot.py(p.mean - p.std));
  }
  flush();
  for (const auto& poly : polys) {
    const cv::Point* ptr = poly.data();
    const int n = static_cast<int>(poly.size());
    cv::fillPoly(image, &ptr, &n, 1, color, cv::LINE_8);
  }
}

// Beyond this ratio of the whole history's largest |value| to the recent ones', the
// value axis is symlog.
constexpr double kSymlogRange = 20;

// The largest finite |min|, |max|, |mean +- std| over the last tenth of the points.
double recent_extent(const std::vector<StatsPoint>& pts) {
  double extent = 0;
  const size_t from = pts.size() - std::max<size_t>(1, pts.size() / 10);
  for (size_t i = from; i < pts.size(); ++i) {
    const StatsPoint& p = pts[i];
    for (double v : {p.min, p.max, p.mean - p.std, p.mean + p.std}) {
      if (std::isfinite(v)) extent = std::max(extent, std::abs(v));
    }
  }
  return extent;
}

void draw_stats_plot(cv::Mat& image, const cv::Rect& area, const StatsHistory& history, const FrameStyle& style) {
  const PlotMetrics m = internal::plot_metrics(image);
  const cv::Scalar dim = internal::dim_color(style), alert = internal::alert_color(style);
  const std::vector<StatsPoint>& pts = history.points();
  if (pts.empty()) {
    internal::draw_centered(image, m.body.scaled(1.2), "no steps recorded yet", area,
                            internal::mix(style.foreground, style.background, 0.2));
    return;
  }
  int64_t s0 = pts.front().first_step, s1 = pts.front().last_step;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  auto include = [&](double v) {
    if (std::isfinite(v)) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  };
  for (const StatsPoint& p : pts) {
    s0 = std::min(s0, p.first_step);
    s1 = std::max(s1, p.last_step);
    include(p.min);
    include(p.max);
    if (std::isfinite(p.mean) && std::isfinite(p.std)) {
      include(p.mean - p.std);
      include(p.mean + p.std);
    }
  }
  const bool any_finite = lo <= hi;
  internal::AxesSpec spec;
  const double span = static_cast<double>(s1) / 2 - static_cast<double>(s0) / 2;
  const double xpad = std::max(0.5, span * 2 * 0.02);
  spec.x = {static_cast<double>(s0) - xpad, static_cast<double>(s1) + xpad};
  spec.x_integer = true;
  spec.y = any_finite ? internal::padded_range(lo, hi, 0.06) : internal::Range{-1, 1};
  spec.x_title = "step";
  spec.y_title = "value";
  // Values that shrank (or grew) 20x or more over the run: a symlog axis keeps the recent steps
  // readable beside the early ones.
  const double recent = recent_extent(pts);
  if (any_finite && recent > 0 && std::max(std::abs(lo), std::abs(hi)) >= kSymlogRange * recent) {
    spec.y.linthresh = recent / 10;
    spec.y_title = "value (symlog axis)";
  }
  const PlotRect plot = internal::draw_axes(image, area, spec, style, m);
  if (plot.rect.empty()) return;

  // Steps recorded, right-aligned on the title row.
  {
    std::string text = format_count(history.added()) + (history.added() == 1 ? " step" : " steps");
    if (pts.size() < history.added()) text += " (older ones merged in pairs)";
    m.small.draw_right(image, m.small.elide_end(text, plot.rect.width / 2), plot.rect.x + plot.rect.width,
                       area.y + m.pad / 2 + m.small.ascent(), dim);
  }

  cv::Mat roi = image(plot.rect);
  const PlotRect local{cv::Rect(0, 0, plot.rect.width, plot.rect.height), plot.x, plot.y};
  draw_band(roi, local, pts, internal::mix(style.bar, style.background, 0.62));
  const int thin = std::max(1, static_cast<int>(std::lround(m.unit)));
  const int thick = std::max(2, static_cast<int>(std::lround(2 * m.unit)));
  draw_polyline_runs(roi, local, pts, &StatsPoint::min, kMinColor, thin);
  draw_polyline_runs(roi, local, pts, &StatsPoint::max, kMaxColor, thin);
  draw_polyline_runs(roi, local, pts, &StatsPoint::mean, style.bar, thick);

  // NaN/Inf steps: red ticks on the x axis.
  const int y1 = plot.rect.y + plot.rect.height - 1;
  const int mark = std::max(3, 2 * m.tick);
  uint64_t bad_steps = 0;
  for (const StatsPoint& p : pts) {
    if (p.nan_count + p.inf_count == 0) continue;
    bad_steps += p.merged;
    const int x = std::clamp(plot.px(mid_step(p)), plot.rect.x, plot.rect.x + plot.rect.width - 1);
    cv::line(image, {x, y1}, {x, y1 - mark}, alert, std::max(1, thin));
  }
  if (!any_finite) internal::draw_centered(image, m.body, "no finite values yet", plot.rect, dim);

  // Legend in the footer.
  const TextPainter& font = m.small;
  const int baseline = internal::footer_baseline(area, m, 0);
  const int sample = std::max(10, static_cast<int>(std::lround(18 * m.unit)));
  int x = plot.rect.x;
  auto entry = [&](const std::string& text, const cv::Scalar& color, int kind) {
    const int yc = baseline - font.ascent() / 2;
    if (kind == 0) cv::line(image, {x, yc}, {x + sample, yc}, color, thick, cv::LINE_AA);
    if (kind == 1) cv::line(image, {x, yc}, {x + sample, yc}, color, thin, cv::LINE_AA);
    if (kind == 2)
      cv::rectangle(image, cv::Point(x, yc - font.ascent() / 2), cv::Point(x + sample, yc + font.ascent() / 2), color,
                    cv::FILLED);
    if (kind == 3)
      cv::line(image, {x + sample / 2, yc + font.ascent() / 2}, {x + sample / 2, yc - font.ascent() / 2}, color, thin);
    x += sample + m.gap;
    x = font.draw(image, text, x, baseline, dim) + 3 * m.gap;
  };
  entry("mean", style.bar, 0);
  entry("+-1 std", internal::mix(style.bar, style.background, 0.62), 2);
  entry("min", kMinColor, 1);
  entry("max", kMaxColor, 1);
  entry("NaN/Inf at step (" + format_count(bad_steps) + ")", alert, 3);
}

}  // namespace

cv::Mat draw_stats_frame(const FrameInfo& info, const tensor::TensorStats& current, const StatsHistory& history,
                         const FrameStyle& style) {
  cv::Mat image(internal::frame_size(style), CV_8UC3);
  try {
    const cv::Rect area = draw_frame_header(image, info, &current, style);
    draw_stats_plot(image, area, history, style);
  } catch (...) {
    internal::fill_background(image, style.background);
  }
  return image;
}

}  // namespace tensorscope::plotting
