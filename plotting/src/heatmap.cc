// heatmap.cc — block reduction of a matrix view, force2d layout, and the heatmap frame.
#include "tensorscope/plotting/heatmap.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <string>

#include <opencv2/imgproc.hpp>

#include "tensorscope/tensor/element_blocks.h"
#include "plot_canvas.h"
#include "tensorscope/plotting/histogram_range.h"
#include "tensorscope/plotting/value_sketch.h"
#include "tensorscope/plotting/axis_ticks.h"
#include "tensorscope/shared/stacked_calls.h"

namespace tensorscope::plotting {
namespace {

using internal::PlotMetrics;
using internal::PlotRect;
using internal::TextPainter;
using internal::TextRun;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

int64_t split(int64_t i, int64_t total, int64_t parts) {
  return parts <= 0 ? 0 : static_cast<int64_t>(static_cast<__int128>(i) * total / parts);
}

// Accumulators of the cells of one output row.
struct CellRow {
  std::vector<double> sum, mn, mx;
  std::vector<uint64_t> count;
  std::vector<uint8_t> flags;
  explicit CellRow(int cols) : sum(cols, 0.0), mn(cols, kInf), mx(cols, -kInf), count(cols, 0), flags(cols, 0) {}
};

// Streams values (in element order) of a rows x cols matrix into block cells.
class BlockReducer {
 public:
  explicit BlockReducer(Heatmap* h) : h_(h), row_(h->out_cols), unit_cols_(h->out_cols == h->cols) {
    col_ends_.resize(static_cast<size_t>(h_->out_cols));
    for (int c = 0; c < h_->out_cols; ++c) col_ends_[static_cast<size_t>(c)] = h_->col_start(c + 1);
    col_end_ = col_ends_.empty() ? 0 : col_ends_[0];
    row_end_ = h_->row_start(1);
  }

  void feed(const double* v, size_t n) {
    size_t pos = 0;
    while (pos < n && r_ < h_->out_rows) {
      if (unit_cols_) {  // a cell per source column (a narrow matrix): along the row at once
        const size_t len = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(n - pos), h_->cols - j_));
        accumulate_each(v + pos, len, static_cast<size_t>(j_));
        pos += len;
        j_ += static_cast<int64_t>(len);
      } else {
        const size_t len = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(n - pos), col_end_ - j_));
        accumulate(v + pos, len, static_cast<size_t>(c_));
        pos += len;
        j_ += static_cast<int64_t>(len);
        if (j_ == col_end_ && ++c_ < h_->out_cols) col_end_ = col_ends_[static_cast<size_t>(c_)];
      }
      if (j_ == h_->cols) {  // end of a source row
        j_ = 0;
        c_ = 0;
        col_end_ = col_ends_[0];
        if (++i_ == row_end_) finish_row();
      }
    }
  }

 private:
  // A value that is not finite: counted and flagged in cell `c`, not accumulated.
  void note_non_finite(double x, size_t c) {
    if (x != x) {
      ++h_->nan_count;
      row_.flags[c] |= kCellNaN;
    } else if (x > 0) {
      ++h_->pos_inf_count;
      row_.flags[c] |= kCellPosInf;
    } else {
      ++h_->neg_inf_count;
      row_.flags[c] |= kCellNegInf;
    }
  }

  // Values v[k] into cells c0 + k.
  void accumulate_each(const double* v, size_t n, size_t c0) {
    double* sum = row_.sum.data() + c0;
    double* mn = row_.mn.data() + c0;
    double* mx = row_.mx.data() + c0;
    uint64_t* count = row_.count.data() + c0;
    for (size_t k = 0; k < n; ++k) {
      const double x = v[k];
      if (__builtin_expect(x - x == 0.0, 1)) {
        sum[k] += x;
        mn[k] = x < mn[k] ? x : mn[k];
        mx[k] = x > mx[k] ? x : mx[k];
        ++count[k];
      } else {
        note_non_finite(x, c0 + k);
      }
    }
  }

  // Values v[0..n) into cell `c`.
  void accumulate(const double* v, size_t n, size_t c) {
    double s = 0, a = row_.mn[c], b = row_.mx[c];
    uint64_t poison = 0;
    for (size_t k = 0; k < n; ++k) {
      const double x = v[k];
      s += x;
      a = x < a ? x : a;
      b = x > b ? x : b;
      poison |= std::bit_cast<uint64_t>(x - x);
    }
    uint64_t kept = n;
    if (__builtin_expect(poison != 0, 0)) {
      s = 0;
      a = row_.mn[c];
      b = row_.mx[c];
      kept = 0;
      for (size_t k = 0; k < n; ++k) {
        const double x = v[k];
        if (x - x == 0.0) {
          s += x;
          a = x < a ? x : a;
          b = x > b ? x : b;
          ++kept;
        } else {
          note_non_finite(x, c);
        }
      }
    }
    row_.sum[c] += s;
    row_.mn[c] = a;
    row_.mx[c] = b;
    row_.count[c] += kept;
  }

  void finish_row() {
    const size_t base = static_cast<size_t>(r_) * static_cast<size_t>(h_->out_cols);
    for (int c = 0; c < h_->out_cols; ++c) {
      const size_t k = static_cast<size_t>(c);
      double value = kNaN;
      if (row_.count[k] > 0) {
        if (h_->reduction == HeatmapReduction::kMaxAbs) {
          value = std::abs(row_.mn[k]) > std::abs(row_.mx[k]) ? row_.mn[k] : row_.mx[k];
        } else {
          value = row_.sum[k] / static_cast<double>(row_.count[k]);
          // A float64 block whose sum overflowed: the mean lies between min and max.
          if (!std::isfinite(value)) value = std::clamp(value, row_.mn[k], row_.mx[k]);
        }
        h_->value_min = std::min(h_->value_min, value);
        h_->value_max = std::max(h_->value_max, value);
      }
      h_->values[base + k] = value;
      h_->flags[base + k] = row_.flags[k];
      row_.sum[k] = 0;
      row_.mn[k] = kInf;
      row_.mx[k] = -kInf;
      row_.count[k] = 0;
      row_.flags[k] = 0;
    }
    ++r_;
    row_end_ = h_->row_start(r_ + 1);
  }

  Heatmap* h_;
  CellRow row_;
  const bool unit_cols_;
  std::vector<int64_t> col_ends_;  // source column where each cell column ends
  int64_t i_ = 0, j_ = 0;          // source row and column of the next value
  int r_ = 0, c_ = 0;              // cell row and column
  int64_t col_end_ = 0, row_end_ = 0;
};

void init_cells(Heatmap* h, int64_t rows, int64_t cols, int max_rows, int max_cols, HeatmapReduction reduction) {
  h->rows = rows;
  h->cols = cols;
  h->reduction = reduction;
  h->out_rows = static_cast<int>(std::min<int64_t>(rows, std::clamp(max_rows, 1, kMaxHeatmapSide)));
  h->out_cols = static_cast<int>(std::min<int64_t>(cols, std::clamp(max_cols, 1, kMaxHeatmapSide)));
  const size_t cells = static_cast<size_t>(h->out_rows) * static_cast<size_t>(h->out_cols);
  h->values.assign(cells, kNaN);
  h->flags.assign(cells, 0);
  h->value_min = kInf;
  h->value_max = -kInf;
}

void finish(Heatmap* h) {
  if (!(h->value_min <= h->value_max)) {
    h->value_min = h->value_max = h->color_lo = h->color_hi = kNaN;
    return;
  }
  std::vector<double> finite;
  finite.reserve(h->values.size());
  for (double v : h->values) {
    if (!std::isnan(v)) finite.push_back(v);
  }
  ValueSketch sketch;
  sketch.add_block(finite.data(), finite.size());
  BodyRangeOptions body;
  body.bins = 256;
  body.margin = 0;
  body.axis = AxisChoice::kLinear;
  if (h->value_min == h->value_max) {
    h->color_lo = h->color_hi = h->value_min;
  } else {
    const HistogramRange r = choose_body_range(sketch, body);
    h->color_lo = std::max(r.lo, h->value_min);
    h->color_hi = std::min(r.hi, h->value_max);
  }
  for (double v : h->values) {
    h->cells_above += v > h->color_hi ? 1 : 0;
    h->cells_below += v < h->color_lo ? 1 : 0;
  }
}

Heatmap empty_heatmap() {
  Heatmap h;
  h.value_min = h.value_max = h.color_lo = h.color_hi = kNaN;
  return h;
}

}  // namespace

int64_t Heatmap::row_start(int r) const { return split(r, rows, out_rows); }
int64_t Heatmap::col_start(int c) const { return split(c, cols, out_cols); }

Heatmap reduce_heatmap(const tensor::TensorView& view, int max_rows, int max_cols, HeatmapReduction reduction) {
  try {
    if (!view.valid() || view.numel() <= 0) return empty_heatmap();
    const int64_t n = view.numel();
    const int64_t rows = view.shape.size() >= 2 ? view.shape[0] : 1;
    Heatmap h;
    init_cells(&h, rows, n / rows, max_rows, max_cols, reduction);
    BlockReducer reducer(&h);
    tensor::for_each_ordered_block(view, [&](int64_t, const double* v, size_t count) { reducer.feed(v, count); });
    finish(&h);
    return h;
  } catch (...) {
    return empty_heatmap();
  }
}

Heatmap force2d(const tensor::TensorView& view, int max_side, HeatmapReduction reduction) {
  try {
    if (!view.valid() || view.numel() <= 0) return empty_heatmap();
    const int64_t n = view.numel();
    int64_t side = static_cast<int64_t>(std::sqrt(static_cast<double>(n)));
    while (side > 0 && side * side >= n) --side;  // exact ceil(sqrt(n)), no float error
    while (side * side < n) ++side;
    Heatmap h;
    init_cells(&h, side, side, max_side, max_side, reduction);
    h.square = true;
    h.padded_zeros = side * side - n;
    BlockReducer reducer(&h);
    tensor::for_each_ordered_block(view, [&](int64_t, const double* v, size_t count) { reducer.feed(v, count); });
    static constexpr std::array<double, 1024> kZeros{};
    for (int64_t left = h.padded_zeros; left > 0;) {
      const size_t k = static_cast<size_t>(std::min<int64_t>(left, kZeros.size()));
      reducer.feed(kZeros.data(), k);
      left -= static_cast<int64_t>(k);
    }
    finish(&h);
    return h;
  } catch (...) {
    return empty_heatmap();
  }
}

namespace {

using internal::viridis;

cv::Vec3b to_vec(const cv::Scalar& s) {
  return cv::Vec3b(cv::saturate_cast<uchar>(s[0]), cv::saturate_cast<uchar>(s[1]), cv::saturate_cast<uchar>(s[2]));
}

// Colour index of v in [lo, hi]; 128 when the range is a single value.
int color_index(double v, double lo, double hi) {
  const double den = hi / 2 - lo / 2;
  if (!(den > 0)) return 128;
  const double t = (v / 2 - lo / 2) / den;
  return std::clamp(static_cast<int>(t * 255.0 + 0.5), 0, 255);
}

// Cells beyond the colour limits: white above, black below (the colorbar's end caps).
const cv::Vec3b kAboveColor(255, 255, 255);
const cv::Vec3b kBelowColor(0, 0, 0);

cv::Mat cell_image(const Heatmap& h, const cv::Vec3b& missing) {
  cv::Mat cells(h.out_rows, h.out_cols, CV_8UC3);
  const auto& lut = viridis();
  for (int r = 0; r < h.out_rows; ++r) {
    auto* row = cells.ptr<cv::Vec3b>(r);
    const size_t base = static_cast<size_t>(r) * static_cast<size_t>(h.out_cols);
    for (int c = 0; c < h.out_cols; ++c) {
      const double v = h.values[base + static_cast<size_t>(c)];
      const uint8_t f = h.flags[base + static_cast<size_t>(c)];
      if (v > h.color_hi) {
        row[c] = kAboveColor;
      } else if (v < h.color_lo) {
        row[c] = kBelowColor;
      } else if (!std::isnan(v)) {
        row[c] = lut[static_cast<size_t>(color_index(v, h.color_lo, h.color_hi))];
      } else if (f & kCellNaN || f == 0) {
        row[c] = missing;
      } else {
        row[c] = (f & kCellPosInf) ? lut[255] : lut[0];
      }
    }
  }
  return cells;
}

// "200 above": cells beyond an end of the colour range.
std::string cap_label(int64_t cells, const char* where) {
  return format_count(static_cast<uint64_t>(cells)) + " " + where;
}

void draw_colorbar(cv::Mat& image, const cv::Rect& bar, const Heatmap& h, const FrameStyle& style,
                   const PlotMetrics& m) {
  const auto& lut = viridis();
  const double lo = h.color_lo, hi = h.color_hi;
  const bool any = !std::isnan(lo);
  for (int y = 0; y < bar.height; ++y) {
    const int idx = bar.height > 1 ? 255 - y * 255 / (bar.height - 1) : 128;
    const cv::Vec3b color = any ? lut[static_cast<size_t>(lo == hi ? 128 : idx)] : to_vec(style.grid);
    cv::line(image, {bar.x, bar.y + y}, {bar.x + bar.width - 1, bar.y + y}, cv::Scalar(color), 1);
  }
  const cv::Scalar axis = internal::axis_color(style), dim = internal::dim_color(style);
  cv::rectangle(image, bar, axis, 1);
  if (!any) return;
  // End caps (triangles) in the colours of the cells beyond the limits.
  const int cap = std::min(bar.width, std::max(4, m.gap * 2));
  auto end_cap = [&](int base_y, int tip_y, const cv::Vec3b& color) {
    const std::vector<cv::Point> tri = {
        {bar.x, base_y}, {bar.x + bar.width - 1, base_y}, {bar.x + (bar.width - 1) / 2, tip_y}};
    cv::fillConvexPoly(image, tri, cv::Scalar(color), cv::LINE_AA);
    cv::polylines(image, tri, true, axis, 1, cv::LINE_AA);
  };
  const TextPainter& font = m.small;
  const int lx = bar.x + bar.width + m.tick + m.gap / 2;
  if (h.cells_above > 0) {
    end_cap(bar.y - 2, bar.y - 2 - cap, kAboveColor);
    font.draw(image, font.elide_end(cap_label(h.cells_above, "above"), image.cols - lx - 2), lx,
              bar.y - 2 - cap / 2 + font.ascent() / 2, style.foreground);
  }
  if (h.cells_below > 0) {
    end_cap(bar.y + bar.height + 1, bar.y + bar.height + 1 + cap, kBelowColor);
    font.draw(image, font.elide_end(cap_label(h.cells_below, "below"), image.cols - lx - 2), lx,
              bar.y + bar.height + 1 + cap / 2 + font.ascent() / 2, style.foreground);
  }
  auto mark = [&](double v, const std::string& label) {
    const double t = hi == lo ? 0.5 : (v / 2 - lo / 2) / (hi / 2 - lo / 2);
    const int y = bar.y + bar.height - 1 - static_cast<int>(std::lround(t * (bar.height - 1)));
    cv::line(image, {bar.x + bar.width, y}, {bar.x + bar.width + m.tick, y}, axis, m.line);
    font.draw(image, font.elide_end(label, image.cols - lx - 2), lx, y + font.ascent() / 2, dim);
  };
  if (lo == hi) {
    mark(lo, format_number(lo));
    return;
  }
  const int max_ticks = std::clamp(bar.height / std::max(1, 3 * font.line_height()), 2, 10);
  const AxisTicks ticks = nice_ticks(lo, hi, max_ticks);
  if (ticks.values.size() < 2) {
    mark(lo, format_number(lo));
    mark(hi, format_number(hi));
    return;
  }
  for (double v : ticks.values) mark(v, format_tick(v, ticks.step));
}

std::string reduction_text(const Heatmap& h) {
  std::string s = std::to_string(h.rows) + " x " + std::to_string(h.cols);
  if (h.out_rows != h.rows || h.out_cols != h.cols) {
    s += " -> " + std::to_string(h.out_rows) + " x " + std::to_string(h.out_cols) +
        (h.reduction == HeatmapReduction::kMaxAbs ? ", block max |x|" : ", block mean");
  }
  if (h.square && h.padded_zeros > 0)
    s += ", padded with " + format_count(static_cast<uint64_t>(h.padded_zeros)) + " zeros";
  return s;
}

int widest_label(const TextPainter& font, const Heatmap& h) {
  int w = font.width("-0.000");
  if (!std::isnan(h.color_lo)) {
    w = std::max({w, font.width(format_number(h.color_lo)), font.width(format_number(h.color_hi))});
    if (h.cells_above > 0) w = std::max(w, font.width(cap_label(h.cells_above, "above")));
    if (h.cells_below > 0) w = std::max(w, font.width(cap_label(h.cells_below, "below")));
  }
  return w;
}

// `rows`: what the rows are ("row"; "call" for a module's stacked calls).
void draw_heatmap_plot(cv::Mat& image, const cv::Rect& area, const Heatmap& h, const FrameStyle& style,
                       const char* rows) {
  const PlotMetrics m = internal::plot_metrics(image);
  const cv::Scalar dim = internal::dim_color(style);
  if (h.out_rows <= 0 || h.out_cols <= 0 || h.values.empty()) {
    internal::draw_centered(image, m.body.scaled(1.2), "empty tensor: nothing to plot", area,
                            internal::mix(style.foreground, style.background, 0.2));
    return;
  }
  const cv::Scalar alert = internal::alert_color(style);
  const int bar_w = std::max(8, static_cast<int>(std::lround(14 * m.unit)));
  const int reserve_right = 3 * m.gap + bar_w + m.tick + m.gap / 2 + widest_label(m.small, h);

  internal::AxesSpec spec;
  spec.x = {-0.5, static_cast<double>(h.cols) - 0.5};
  spec.y = {static_cast<double>(h.rows) - 0.5, -0.5};
  spec.x_integer = spec.y_integer = true;
  spec.x_title = h.square ? "column   (index = row*" + std::to_string(h.cols) + " + column)" : "column";
  spec.y_title = rows;
  spec.footer_rows = 1;
  cv::Rect plot_area = area;
  plot_area.width = std::max(0, area.width - reserve_right);
  const PlotRect dry = internal::draw_axes(image, plot_area, spec, style, m, true);
  if (dry.rect.empty()) return;
  // Square cells when the matrix is not too elongated (like imshow); else fill the area.
  const double aspect = static_cast<double>(h.cols) / static_cast<double>(h.rows);
  if (aspect >= 1.0 / 3 && aspect <= 3) {
    const int w = std::min(dry.rect.width, static_cast<int>(std::lround(dry.rect.height * aspect)));
    const int hh = std::min(dry.rect.height, static_cast<int>(std::lround(dry.rect.width / aspect)));
    const int dw = dry.rect.width - std::max(w, 16), dh = dry.rect.height - std::max(hh, 16);
    plot_area.x += std::max(0, dw) / 2;
    plot_area.width -= std::max(0, dw);
    plot_area.y += std::max(0, dh) / 2;
    plot_area.height -= std::max(0, dh);
  }
  const PlotRect plot = internal::draw_axes(image, plot_area, spec, style, m);
  if (plot.rect.empty()) return;

  cv::Mat cells = cell_image(h, to_vec(alert));
  cv::Mat roi = image(plot.rect);
  cv::resize(cells, roi, plot.rect.size(), 0, 0, cv::INTER_NEAREST);
  cv::rectangle(image, plot.rect, internal::axis_color(style), 1);

  const cv::Rect bar(plot.rect.x + plot.rect.width + 3 * m.gap, plot.rect.y, bar_w, plot.rect.height);
  if (bar.x + bar.width < image.cols) draw_colorbar(image, bar, h, style, m);
  if (std::isnan(h.value_min)) internal::draw_centered(image, m.body, "no finite values", plot.rect, style.foreground);

  // Footer: shape and reduction on the left, non-finite counts on the right.
  const int baseline = internal::footer_baseline(area, m, 0);
  const int left = area.x + m.pad, right = area.x + area.width - m.pad;
  const std::vector<TextRun> counts = {
      {h.nan_count ? "NaN (red cells) " : "NaN ", dim},
      {format_count(h.nan_count), h.nan_count ? alert : style.foreground},
      {"   +Inf ", dim},
      {format_count(h.pos_inf_count), h.pos_inf_count ? style.accent : style.foreground},
      {"   -Inf ", dim},
      {format_count(h.neg_inf_count), h.neg_inf_count ? style.accent : style.foreground}};
  const int counts_width = std::min(internal::text_runs_width(m.small, counts), (right - left) / 2);
  internal::draw_text_runs(image, m.small, right - counts_width, baseline, counts, counts_width);
  const std::string what = reduction_text(h);
  m.small.draw(image, m.small.elide_end(what, right - counts_width - left - 2 * m.gap), left, baseline,
               h.padded_zeros > 0 ? style.foreground : dim);
}

}  // namespace

cv::Mat draw_heatmap_frame(const FrameInfo& info, const tensor::TensorStats& stats, const Heatmap& heatmap,
                           const FrameStyle& style) {
  cv::Mat image(internal::frame_size(style), CV_8UC3);
  try {
    const cv::Rect area = draw_frame_header(image, info, &stats, style);
    draw_heatmap_plot(image, area, heatmap, style, is_stacked_calls_stream(info.stream) ? "call" : "row");
  } catch (...) {
    internal::fill_background(image, style.background);
  }
  return image;
}

}  // namespace tensorscope::plotting
