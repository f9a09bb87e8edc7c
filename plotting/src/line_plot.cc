// line_plot.cc — min/max-per-column reduction of a flattened tensor and its line frame.
#include "tensorscope/plotting/line_plot.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include <opencv2/imgproc.hpp>

#include "tensorscope/tensor/element_blocks.h"
#include "plot_canvas.h"
#include "tensorscope/plotting/axis_ticks.h"

namespace tensorscope::plotting {
namespace {

using internal::PlotMetrics;
using internal::PlotRect;
using internal::TextRun;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Min/max of v[0, n) folded into *mn/*mx, NaN/Inf excluded and counted into *flags and
// the series' counters. The common all-finite case is one branch-free vectorised loop.
void scan(const double* v, size_t n, double* mn, double* mx, uint8_t* flags, LineSeries* s) {
  double a = *mn, b = *mx;
  uint64_t poison = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x = v[i];
    a = x < a ? x : a;
    b = x > b ? x : b;
    poison |= std::bit_cast<uint64_t>(x - x);
  }
  if (__builtin_expect(poison != 0, 0)) {
    a = *mn;
    b = *mx;
    for (size_t i = 0; i < n; ++i) {
      const double x = v[i];
      if (x - x == 0.0) {
        a = x < a ? x : a;
        b = x > b ? x : b;
      } else if (x != x) {
        ++s->nan_count;
        *flags |= kHasNaN;
      } else if (x > 0) {
        ++s->pos_inf_count;
        *flags |= kHasPosInf;
      } else {
        ++s->neg_inf_count;
        *flags |= kHasNegInf;
      }
    }
  }
  *mn = a;
  *mx = b;
}

int64_t column_start(int64_t c, int64_t n, int64_t points) {
  return static_cast<int64_t>(static_cast<__int128>(c) * n / points);
}

}  // namespace

LineSeries reduce_line(const tensor::TensorView& view, int columns) {
  LineSeries s;
  s.finite_min = s.finite_max = kNaN;
  try {
    if (!view.valid() || view.numel() <= 0) return s;
    const int64_t n = view.numel();
    const int64_t points = std::min<int64_t>(n, std::clamp(columns, 1, kMaxLineColumns));
    s.numel = n;
    s.reduced = n > points;
    s.first.resize(static_cast<size_t>(points));
    for (int64_t c = 0; c < points; ++c) s.first[static_cast<size_t>(c)] = column_start(c, n, points);
    s.lo.assign(static_cast<size_t>(points), kNaN);
    s.hi.assign(static_cast<size_t>(points), kNaN);
    s.flags.assign(static_cast<size_t>(points), 0);

    int64_t c = 0;
    int64_t col_end = points > 1 ? s.first[1] : n;
    double mn = kInf, mx = -kInf, gmin = kInf, gmax = -kInf;
    uint8_t fl = 0;
    tensor::for_each_ordered_block(view, [&](int64_t start, const double* v, size_t count) {
      size_t pos = 0;
      while (pos < count && c < points) {
        const size_t seg = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(count), col_end - start));
        scan(v + pos, seg - pos, &mn, &mx, &fl, &s);
        pos = seg;
        if (start + static_cast<int64_t>(pos) == col_end) {
          const size_t i = static_cast<size_t>(c);
          if (mn <= mx) {
            s.lo[i] = mn;
            s.hi[i] = mx;
            gmin = std::min(gmin, mn);
            gmax = std::max(gmax, mx);
          }
          s.flags[i] = fl;
          mn = kInf;
          mx = -kInf;
          fl = 0;
          ++c;
          col_end = c + 1 < points ? s.first[static_cast<size_t>(c + 1)] : n;
        }
      }
    });
    if (gmin <= gmax) {
      s.finite_min = gmin;
      s.finite_max = gmax;
    }
  } catch (...) {
    LineSeries empty;
    empty.finite_min = empty.finite_max = kNaN;
    return empty;
  }
  return s;
}

namespace {

void draw_series(cv::Mat& image, const PlotRect& plot, const LineSeries& s, const FrameStyle& style,
                 const PlotMetrics& m) {
  const size_t points = s.first.size();
  if (points == 0 || plot.rect.empty()) return;
  const cv::Rect clip = plot.rect;
  auto clamp_y = [&](int y) { return std::clamp(y, clip.y, clip.y + clip.height - 1); };
  auto clamp_x = [&](int x) { return std::clamp(x, clip.x, clip.x + clip.width - 1); };

  if (s.reduced) {
    // A band from min to max per column, joined to its neighbours so it never breaks.
    double prev_lo = kNaN, prev_hi = kNaN;
    for (size_t i = 0; i < points; ++i) {
      const double lo = s.lo[i], hi = s.hi[i];
      if (std::isnan(lo)) {
        prev_lo = prev_hi = kNaN;
        continue;
      }
      const int64_t last = (i + 1 < points ? s.first[i + 1] : s.numel) - 1;
      const int xa = clamp_x(plot.px(static_cast<double>(s.first[i])));
      const int xb = std::max(xa, clamp_x(plot.px(static_cast<double>(last))));
      double top = hi, bottom = lo;
      if (!std::isnan(prev_lo)) {
        top = std::max(top, prev_lo);
        bottom = std::min(bottom, prev_hi);
      }
      const int ya = clamp_y(plot.py(top)), yb = clamp_y(plot.py(bottom));
      cv::rectangle(image, cv::Point(xa, ya), cv::Point(xb, yb), style.bar, cv::FILLED);
      prev_lo = lo;
      prev_hi = hi;
    }
  } else {
    // A polyline broken at non-finite values; dots when the points are far apart.
    constexpr int kShift = 4;
    const double scale = 1 << kShift;
    std::vector<std::vector<cv::Point>> runs(1);
    std::vector<cv::Point> dots;
    const bool show_dots = static_cast<double>(points) <= plot.rect.width / 8.0;
    for (size_t i = 0; i < points; ++i) {
      if (std::isnan(s.lo[i])) {
        if (!runs.back().empty()) runs.emplace_back();
        continue;
      }
      const double x = plot.fx(static_cast<double>(s.first[i]));
      const double y = std::clamp(plot.fy(s.lo[i]), double(clip.y), double(clip.y + clip.height - 1));
      const cv::Point p(static_cast<int>(std::lround(x * scale)), static_cast<int>(std::lround(y * scale)));
      runs.back().push_back(p);
      if (show_dots) dots.push_back(p);
    }
    const int thickness = std::max(1, static_cast<int>(std::lround(1.5 * m.unit)));
    for (const auto& run : runs) {
      if (run.size() >= 2) {
        cv::polylines(image, run, false, style.bar, thickness, cv::LINE_AA, kShift);
      }
    }
    const int radius = std::max(2, static_cast<int>(std::lround(2.5 * m.unit)));
    for (const cv::Point& p : dots) {
      cv::circle(image, p, radius << kShift, style.bar, cv::FILLED, cv::LINE_AA, kShift);
    }
  }

  // Non-finite markers: NaN as red ticks on the x axis, +-Inf as accent triangles at the
  // top/bottom edge.
  const cv::Scalar alert = internal::alert_color(style);
  const int mark = std::max(4, 3 * m.tick);
  const int y0 = clip.y, y1 = clip.y + clip.height - 1;
  for (size_t i = 0; i < points; ++i) {
    const uint8_t f = s.flags[i];
    if (f == 0) continue;
    const int x = clamp_x(plot.px(static_cast<double>(s.first[i])));
    if (f & kHasNaN) cv::line(image, {x, y1}, {x, y1 - mark}, alert, m.line + 1);
    const int h = mark / 2 + 1;
    if (f & kHasPosInf) {
      const cv::Point tri[3] = {{x, y0}, {x - h / 2 - 1, y0 + h}, {x + h / 2 + 1, y0 + h}};
      cv::fillConvexPoly(image, tri, 3, style.accent, cv::LINE_AA);
    }
    if (f & kHasNegInf) {
      const int yb = y1 - ((f & kHasNaN) ? mark + 1 : 0);
      const cv::Point tri[3] = {{x, yb}, {x - h / 2 - 1, yb - h}, {x + h / 2 + 1, yb - h}};
      cv::fillConvexPoly(image, tri, 3, style.accent, cv::LINE_AA);
    }
  }
}

void draw_line_plot(cv::Mat& image, const cv::Rect& area, const LineSeries& s, const FrameStyle& style,
                    const AxisLimits* y_limits) {
  const PlotMetrics m = internal::plot_metrics(image);
  const cv::Scalar dim = internal::dim_color(style);
  if (s.numel <= 0 || s.first.empty()) {
    internal::draw_centered(image, m.body.scaled(1.2), "empty tensor: nothing to plot", area,
                            internal::mix(style.foreground, style.background, 0.2));
    return;
  }
  const bool any_finite = !std::isnan(s.finite_min);
  internal::AxesSpec spec;
  const double last = static_cast<double>(s.numel - 1);
  const double xpad = std::max(0.5, last * 0.02);
  spec.x = {-xpad, last + xpad};
  spec.x_integer = true;
  spec.y = any_finite ? internal::padded_range(s.finite_min, s.finite_max, 0.06) : internal::Range{-1, 1};
  if (any_finite && y_limits != nullptr && y_limits->lo < y_limits->hi && std::isfinite(y_limits->hi - y_limits->lo)) {
    spec.y = {y_limits->lo, y_limits->hi};
  }
  spec.x_title = "element index (flattened)";
  spec.y_title = "value";
  const PlotRect plot = internal::draw_axes(image, area, spec, style, m);
  draw_series(image, plot, s, style, m);
  if (!any_finite && !plot.rect.empty()) {
    internal::draw_centered(image, m.body, "no finite values", plot.rect, dim);
  }

  // Footer: what the reduction did, and the non-finite counts with their markers.
  const int baseline = internal::footer_baseline(area, m, 0);
  const int left = area.x + m.pad, right = area.x + area.width - m.pad;
  const cv::Scalar alert = internal::alert_color(style);
  std::vector<TextRun> counts = {
      {"NaN (red |) ", dim}, {format_count(s.nan_count), s.nan_count ? alert : style.foreground},
      {"   +Inf (^) ", dim}, {format_count(s.pos_inf_count), s.pos_inf_count ? style.accent : style.foreground},
      {"   -Inf (v) ", dim}, {format_count(s.neg_inf_count), s.neg_inf_count ? style.accent : style.foreground}};
  const int counts_width = std::min(internal::text_runs_width(m.small, counts), (right - left) * 3 / 5);
  internal::draw_text_runs(image, m.small, right - counts_width, baseline, counts, counts_width);
  std::string what = format_count(static_cast<uint64_t>(s.numel)) + " values";
  if (s.reduced) {
    const int64_t per = s.numel / static_cast<int64_t>(s.first.size());
    what += ", min/max of ~" + format_count(static_cast<uint64_t>(per)) + " per column";
  }
  m.small.draw(image, m.small.elide_end(what, right - counts_width - left - 2 * m.gap), left, baseline, dim);
}

}  // namespace

cv::Mat draw_line_frame(const FrameInfo& info, const tensor::TensorStats& stats, const LineSeries& series,
                        const FrameStyle& style, const AxisLimits* y_limits) {
  cv::Mat image(internal::frame_size(style), CV_8UC3);
  try {
    const cv::Rect area = draw_frame_header(image, info, &stats, style);
    draw_line_plot(image, area, series, style, y_limits);
  } catch (...) {
    internal::fill_background(image, style.background);
  }
  return image;
}

}  // namespace tensorscope::plotting
