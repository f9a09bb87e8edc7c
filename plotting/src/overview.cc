// overview.cc — see overview.h.
#include "tensorscope/plotting/overview.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <opencv2/imgproc.hpp>

#include "plot_canvas.h"
#include "tensorscope/plotting/axis_ticks.h"
#include "tensorscope/recording/overview_scale.h"

namespace tensorscope::plotting {
namespace {

using internal::PlotMetrics;
using internal::TextPainter;
using internal::TextRun;
using recording::first_nonfinite_cell;
using recording::fit_overview_grid;
using recording::overview_scale;
using recording::OverviewGrid;
using recording::OverviewScale;

const cv::Vec3b kNonFinite(255, 0, 255);  // magenta: in no colormap, on no background
const cv::Vec3b kBelow(0, 0, 0);          // below the scale (0 on a log scale): black
const cv::Vec3b kAbove(255, 255, 255);

cv::Vec3b to_vec(const cv::Scalar& s) {
  return cv::Vec3b(cv::saturate_cast<uchar>(s[0]), cv::saturate_cast<uchar>(s[1]), cv::saturate_cast<uchar>(s[2]));
}

cv::Vec3b cell_color(const OverviewGrid& g, const OverviewScale& scale, size_t r, size_t c, const cv::Vec3b& none) {
  if (g.is_nonfinite(r, c)) return kNonFinite;
  const float v = g.value(r, c);
  if (std::isnan(v) || !scale.valid) return none;
  const double t = scale.position(v);
  if (t < 0) return kBelow;
  if (t > 1) return kAbove;
  return internal::viridis()[static_cast<size_t>(std::lround(t * 255))];
}

// "0.01", "1", "1000", "1e-5", "1e6": a decade's label.
std::string decade_label(int e) {
  if (e >= -2 && e <= 3) return format_number(std::pow(10.0, e));
  return "1e" + std::to_string(e);
}

std::vector<std::pair<double, std::string>> scale_ticks(const OverviewScale& s, int max_ticks) {
  std::vector<std::pair<double, std::string>> ticks;
  if (!s.valid) return ticks;
  if (s.log) {
    const int lo = static_cast<int>(s.lo), hi = static_cast<int>(s.hi);
    const int every = std::max(1, (hi - lo + max_ticks - 1) / std::max(1, max_ticks));
    for (int e = lo; e <= hi; e += every) ticks.emplace_back((e - s.lo) / (s.hi - s.lo), decade_label(e));
    return ticks;
  }
  const AxisTicks t = nice_ticks(s.lo, s.hi, max_ticks);
  for (double v : t.values) ticks.emplace_back((v - s.lo) / (s.hi - s.lo), format_tick(v, t.step));
  return ticks;
}

void draw_colorbar(cv::Mat& image, const cv::Rect& bar, const OverviewScale& scale, const FrameStyle& style,
                   const PlotMetrics& m) {
  const auto& lut = internal::viridis();
  for (int y = 0; y < bar.height; ++y) {
    const int idx = bar.height > 1 ? 255 - y * 255 / (bar.height - 1) : 128;
    cv::line(image, {bar.x, bar.y + y}, {bar.x + bar.width - 1, bar.y + y}, cv::Scalar(lut[static_cast<size_t>(idx)]),
             1);
  }
  const cv::Scalar axis = internal::axis_color(style), dim = internal::dim_color(style);
  cv::rectangle(image, bar, axis, 1);
  const TextPainter& font = m.small;
  const int max_ticks = std::clamp(bar.height / std::max(1, 2 * font.line_height()), 2, 10);
  const int lx = bar.x + bar.width + m.tick + m.gap / 2;
  for (const auto& [t, label] : scale_ticks(scale, max_ticks)) {
    const int y = bar.y + bar.height - 1 - static_cast<int>(std::lround(t * (bar.height - 1)));
    cv::line(image, {bar.x + bar.width, y}, {bar.x + bar.width + m.tick, y}, axis, m.line);
    font.draw(image, font.elide_end(label, image.cols - lx - 2), lx, y + font.ascent() / 2, dim);
  }
}

// A small square of `color` and its label; returns the x after it.
int legend_item(cv::Mat& image, const TextPainter& font, int x, int baseline, const cv::Vec3b& color,
                const std::string& label, const FrameStyle& style) {
  const int side = std::max(4, font.ascent());
  cv::rectangle(image, cv::Rect(x, baseline - side, side, side), cv::Scalar(color), cv::FILLED);
  cv::rectangle(image, cv::Rect(x, baseline - side, side, side), internal::axis_color(style), 1);
  x += side + side / 2;
  return font.draw(image, label, x, baseline, internal::dim_color(style)) + 2 * side;
}

std::string steps_text(const OverviewGrid& g) {
  if (g.columns() == 0) return "no steps yet";
  std::string s = "steps " + std::to_string(g.first_steps.front()) + "-" + std::to_string(g.last_steps.back());
  if (g.steps_per_column > 1) s += ", a column = " + std::to_string(g.steps_per_column) + " steps (max)";
  return s;
}

// The column of `grid` that holds `step`; false when none does.
bool column_of(const OverviewGrid& grid, int64_t step, size_t* column) {
  for (size_t c = 0; c < grid.first_steps.size(); ++c) {
    if (grid.first_steps[c] <= step && step <= grid.last_steps[c]) {
      *column = c;
      return true;
    }
  }
  return false;
}

void draw_overview(cv::Mat& image, const OverviewGrid& full, const std::string& where, const std::string& span,
                   const FrameStyle& style, const std::vector<OverviewMark>& marks) {
  internal::fill_background(image, style.background);
  const PlotMetrics m = internal::plot_metrics(image);
  const cv::Scalar dim = internal::dim_color(style), alert = internal::alert_color(style);
  const recording::OverviewMetric& metric =
      recording::kOverviewMetrics[std::min(full.metric, recording::kOverviewMetrics.size() - 1)];

  // Header: the metric and where, then what the columns are.
  int y = m.pad + m.title.ascent();
  const int right = image.cols - m.pad;
  draw_text_runs(image, m.title, m.pad, y, {{metric.title, style.foreground}, {"   " + where, dim}}, right - m.pad);
  y += m.title.descent() + m.gap + m.small.ascent();
  std::string sub = span + " | " + steps_text(full) + " | " + std::to_string(full.rows.size()) + " tensors" +
      (metric.log_scale ? " | log colour" : "");
  if (full.summaries_left_out > 0)
    sub += " | " + format_count(static_cast<uint64_t>(full.summaries_left_out)) + " summaries left out (row limit)";
  m.small.draw(image, m.small.elide_end(sub, right - m.pad), m.pad, y, dim);
  const int top = y + m.small.descent() + 2 * m.gap;

  // Footer: legend, the first non-finite cell.
  const int footer_base = image.rows - m.pad;
  const int legend_base = footer_base - m.small.line_height() - m.gap;
  const int axis_h = m.tick + m.small.line_height() + m.gap + m.small.line_height();
  const int bottom = legend_base - m.small.line_height() - m.gap - axis_h;

  if (full.empty()) {
    internal::draw_centered(image, m.body.scaled(1.2),
                            full.rows.empty() ? "no tensor of this kind is summarised" : "no summarised step yet",
                            cv::Rect(0, top, image.cols, std::max(1, bottom - top)), dim);
    return;
  }
  const OverviewScale scale = overview_scale(full);
  const int bar_w = std::max(8, static_cast<int>(std::lround(14 * m.unit)));
  const int bar_labels = m.small.width(scale.log ? "1e-10" : "0.75");
  const int reserve_right = 2 * m.gap + bar_w + m.tick + m.gap / 2 + bar_labels;
  int widest = 0;
  for (const std::string& r : full.rows) widest = std::max(widest, m.small.width(internal::printable_ascii(r)));
  const int label_w = std::min(widest + m.gap, image.cols * 2 / 5);
  const cv::Rect plot(m.pad + label_w + m.tick, top, std::max(1, right - reserve_right - (m.pad + label_w + m.tick)),
                      std::max(1, bottom - top));

  const OverviewGrid g = fit_overview_grid(full, static_cast<size_t>(plot.height), static_cast<size_t>(plot.width));
  const size_t rows = g.rows.size(), cols = g.columns();
  cv::Mat cells(static_cast<int>(rows), static_cast<int>(cols), CV_8UC3);
  const cv::Vec3b none = to_vec(style.grid);
  for (size_t r = 0; r < rows; ++r) {
    auto* line = cells.ptr<cv::Vec3b>(static_cast<int>(r));
    for (size_t c = 0; c < cols; ++c) line[c] = cell_color(g, scale, r, c, none);
  }
  cv::Mat roi = image(plot);
  cv::resize(cells, roi, plot.size(), 0, 0, cv::INTER_NEAREST);
  cv::rectangle(image, plot, internal::axis_color(style), 1);
  const double row_h = static_cast<double>(plot.height) / static_cast<double>(rows);
  const double col_w = static_cast<double>(plot.width) / static_cast<double>(cols);

  // Row labels: every row when they fit, else every k-th.
  const int every = std::max(1, static_cast<int>(std::ceil((m.small.line_height() + 1) / row_h)));
  for (size_t r = 0; r < rows; r += static_cast<size_t>(every)) {
    const int cy = plot.y + static_cast<int>((static_cast<double>(r) + 0.5) * row_h);
    m.small.draw_right(image, m.small.elide_middle(internal::printable_ascii(g.rows[r]), label_w), plot.x - m.tick,
                       cy + m.small.ascent() / 2, style.foreground);
  }
  // Step axis: a few columns, labelled with their first step.
  const int label_w_steps = m.small.width(std::to_string(g.last_steps.back())) + 2 * m.gap;
  const size_t ticks = std::clamp<size_t>(static_cast<size_t>(plot.width / std::max(1, label_w_steps * 2)), 1,
                                          std::min<size_t>(cols, 8));
  int last_end = -1;
  for (size_t i = 0; i < ticks; ++i) {
    const size_t c = ticks == 1 ? 0 : i * (cols - 1) / (ticks - 1);
    const int x = plot.x + static_cast<int>((static_cast<double>(c) + 0.5) * col_w);
    const std::string label = std::to_string(g.first_steps[c]);
    const int lw = m.small.width(label);
    const int lx = std::clamp(x - lw / 2, 0, image.cols - lw - 1);
    if (lx <= last_end) continue;
    cv::line(image, {x, plot.y + plot.height}, {x, plot.y + plot.height + m.tick}, internal::axis_color(style), m.line);
    m.small.draw(image, label, lx, plot.y + plot.height + m.tick + m.small.ascent() + 2, dim);
    last_end = lx + lw + m.gap;
  }
  const std::string x_title = "step";
  m.small.draw(image, x_title, plot.x + (plot.width - m.small.width(x_title)) / 2,
               plot.y + plot.height + m.tick + m.small.line_height() + m.gap + m.small.ascent(), dim);

  const cv::Rect bar(plot.x + plot.width + 2 * m.gap, plot.y, bar_w, plot.height);
  if (scale.valid && bar.x + bar.width < image.cols) draw_colorbar(image, bar, scale, style, m);

  // Legend, and the first non-finite cell and the other anomalies framed and named.
  int x = m.pad;
  x = legend_item(image, m.small, x, legend_base, kNonFinite, "NaN/Inf", style);
  x = legend_item(image, m.small, x, legend_base, none, "no value", style);
  if (scale.log) legend_item(image, m.small, x, legend_base, kBelow, "0 / below scale", style);
  const auto frame_cell = [&](size_t gr, size_t gc) {
    const int side = std::max(6, m.gap * 2);
    const int cx = plot.x + static_cast<int>((static_cast<double>(gc) + 0.5) * col_w);
    const int cy = plot.y + static_cast<int>((static_cast<double>(gr) + 0.5) * row_h);
    const int hw = std::max(side, static_cast<int>(col_w / 2) + 2),
              hh = std::max(side, static_cast<int>(row_h / 2) + 2);
    cv::rectangle(image, cv::Rect(cx - hw, cy - hh, 2 * hw, 2 * hh), style.foreground, std::max(1, m.line + 1));
  };
  std::string named;
  size_t fr = 0, fc = 0;
  if (first_nonfinite_cell(full, &fr, &fc)) {
    size_t gr = 0, gc = 0;
    first_nonfinite_cell(g, &gr, &gc);
    frame_cell(gr, gc);
    named = "first NaN/Inf: step " + std::to_string(full.first_steps[fc]) +
        (full.steps_per_column > 1 ? "-" + std::to_string(full.last_steps[fc]) : "") + ", " +
        internal::printable_ascii(full.rows[fr]);
  }
  // Every mark framed; the first of each kind named, the others counted.
  std::vector<std::string> kinds_named;
  size_t unnamed = 0;
  for (const OverviewMark& mark : marks) {
    const auto row = std::find(g.rows.begin(), g.rows.end(), mark.row);
    size_t gc = 0;
    if (row != g.rows.end() && column_of(g, mark.step, &gc)) frame_cell(static_cast<size_t>(row - g.rows.begin()), gc);
    if (std::find(kinds_named.begin(), kinds_named.end(), mark.what) != kinds_named.end()) {
      ++unnamed;
      continue;
    }
    kinds_named.push_back(mark.what);
    named += (named.empty() ? "" : " | ") + ("first " + mark.what) + ": step " + std::to_string(mark.step) + ", " +
        internal::printable_ascii(mark.row);
  }
  if (unnamed > 0) named += " | " + std::to_string(unnamed) + " more";
  if (!named.empty()) {
    m.small.draw(image, m.small.elide_end(named, right - m.pad), m.pad, footer_base, alert);
  } else {
    m.small.draw(image, "no NaN/Inf, no anomaly", m.pad, footer_base, dim);
  }
}

}  // namespace

cv::Mat draw_overview_frame(const OverviewGrid& grid, const std::string& where, const std::string& span,
                            const FrameStyle& style, const std::vector<OverviewMark>& marks) {
  cv::Mat image(internal::frame_size(style), CV_8UC3);
  try {
    draw_overview(image, grid, where, span, style, marks);
  } catch (...) {
    internal::fill_background(image, style.background);
  }
  return image;
}

cv::Vec3b overview_nonfinite_color() { return kNonFinite; }

}  // namespace tensorscope::plotting
