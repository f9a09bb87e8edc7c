// frame_painter.cc — the frame header, the histogram plot and message frames.
#include "tensorscope/plotting/frame_painter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

#include <opencv2/imgproc.hpp>

#include "tensorscope/plotting/axis_ticks.h"
#include "tensorscope/plotting/histogram_range.h"
#include "plot_canvas.h"
#include "text_painter.h"

namespace tensorscope::plotting {
namespace {

using internal::printable_ascii;
using internal::TextPainter;

// Sizes are designed at 640x480 and scaled by `unit` (shared with the other painters).
using Metrics = internal::PlotMetrics;
using internal::mix;

Metrics metrics_for(const cv::Mat& image) { return internal::plot_metrics(image); }

// cv::Mat::setTo with a 3-channel Scalar is slow: plot_canvas fills by rows.
void fill(cv::Mat& image, const cv::Scalar& color) { internal::fill_background(image, color); }

cv::Size clamped_size(const FrameStyle& style) { return internal::frame_size(style); }

// Pieces of text in different colours drawn as one line; shrunk to fit max_width.
struct Run {
  std::string text;
  cv::Scalar color;
};

void draw_runs(cv::Mat& image, const TextPainter& font, int x, int baseline, const std::vector<Run>& runs,
               int max_width) {
  int total = 0;
  for (const Run& r : runs) total += font.width(r.text);
  if (total <= 0 || max_width <= 0) return;
  const TextPainter fitted = total > max_width ? font.scaled(double(max_width) / total) : font;
  for (const Run& r : runs) x = fitted.draw(image, r.text, x, baseline, r.color);
}

std::vector<std::string> wrap_words(const std::string& text, const TextPainter& font, int max_width) {
  std::vector<std::string> lines;
  std::string line, word;
  auto flush_word = [&]() {
    if (word.empty()) return;
    const std::string joined = line.empty() ? word : line + " " + word;
    if (font.width(joined) <= max_width) {
      line = joined;
    } else {
      if (!line.empty()) lines.push_back(line);
      line = font.elide_end(word, max_width);
    }
    word.clear();
  };
  for (char c : text) {
    if (c == ' ') {
      flush_word();
    } else {
      word.push_back(c);
    }
  }
  flush_word();
  if (!line.empty()) lines.push_back(line);
  return lines;
}

std::vector<std::string> count_tick_labels(const AxisTicks& ticks) {
  std::vector<std::string> labels;
  for (double v : ticks.values) {
    labels.push_back(format_count(v >= 0x1p64 ? UINT64_MAX : static_cast<uint64_t>(std::round(v))));
  }
  return labels;
}

// Count axis from 0 to a little above the tallest bar, integer ticks only.
AxisTicks count_ticks(double top, int max_ticks) {
  AxisTicks ticks = nice_ticks(0, top, max_ticks);
  if (ticks.step < 1) {
    ticks.step = 1;
    ticks.values.clear();
    for (int v = 0; v <= static_cast<int>(top) && v < max_ticks; ++v) ticks.values.push_back(v);
  }
  return ticks;
}

std::string percent(uint64_t part, uint64_t whole) {
  if (whole == 0) return "0%";
  char buf[32];
  const double p = 100.0 * static_cast<double>(part) / static_cast<double>(whole);
  if (p > 0 && p < 0.1) return "<0.1%";
  std::snprintf(buf, sizeof buf, p >= 10 || p == 0 ? "%.0f%%" : "%.1f%%", p);
  return buf;
}

void draw_histogram_plot(cv::Mat& image, const cv::Rect& area, const tensor::TensorStats& stats, const Histogram& hist,
                         const HistogramDisplay& display, const FrameStyle& style, const Metrics& m) {
  const cv::Scalar dim = mix(style.foreground, style.background, 0.4);
  const cv::Scalar axis = display.range_changed ? style.accent : mix(style.foreground, style.background, 0.55);
  const TextPainter& font = m.small;
  const int right = area.x + area.width - m.pad;
  const HistogramRange range = sanitize_range(hist.range);
  const bool symlog_axis = range.axis == HistogramAxis::kSymlog;
  const bool log_scale = display.log_counts;
  uint64_t finite = hist.underflow + hist.overflow;
  for (uint64_t c : hist.counts) finite += c;

  // Bottom row: what the bars do not show, and how the axes are scaled.
  const int bottom_baseline = area.y + area.height - m.pad - font.descent();
  auto counted = [&](const char* name, uint64_t n, bool first, bool share) {
    std::vector<Run> runs;
    runs.push_back({std::string(first ? "" : "   ") + name + " ", dim});
    runs.push_back({std::to_string(n), n > 0 ? style.accent : style.foreground});
    if (share && n > 0) runs.push_back({" (" + percent(n, finite) + ")", dim});
    return runs;
  };
  std::vector<Run> bottom;
  for (auto& part : {counted("underflow", hist.underflow, true, true), counted("overflow", hist.overflow, false, true),
                     counted("NaN", hist.nan, false, false), counted("+Inf", hist.pos_inf, false, false),
                     counted("-Inf", hist.neg_inf, false, false)}) {
    bottom.insert(bottom.end(), part.begin(), part.end());
  }
  std::string scale_text = std::to_string(hist.counts.size()) + " bins";
  if (symlog_axis) scale_text += ", symlog x";
  if (log_scale) scale_text += ", log counts";
  const int scale_width = font.width(scale_text);
  draw_runs(image, font, area.x + m.pad, bottom_baseline, bottom, right - (area.x + m.pad) - scale_width - 2 * m.gap);
  font.draw_right(image, scale_text, right, bottom_baseline, symlog_axis || log_scale ? style.foreground : dim);

  // Plot box; a range note takes a row above it.
  const int x_label_baseline = bottom_baseline - font.descent() - m.gap - font.ascent() - m.gap / 2;
  const int y1 = x_label_baseline - font.ascent() - m.tick - m.gap / 2;
  int y0 = area.y + m.pad + font.ascent() / 2;
  if (!display.range_note.empty()) {
    const std::string note = font.elide_end(printable_ascii(display.range_note), right - area.x - 2 * m.pad);
    font.draw(image, note, area.x + m.pad, area.y + m.pad + font.ascent(), style.accent);
    y0 += font.line_height() + m.gap;
  }
  if (y1 - y0 < 8) return;

  // A spike (on a linear count axis) is cut so the other bars keep their height.
  const int spike = log_scale ? -1 : spike_bin(hist);
  uint64_t tallest = 0, second = 0;
  for (uint64_t c : hist.counts) {
    if (c > tallest) {
      second = tallest;
      tallest = c;
    } else if (c > second) {
      second = c;
    }
  }
  const uint64_t scale_to = spike >= 0 ? second : tallest;
  const int max_y_ticks = std::max(2, (y1 - y0) / std::max(1, 3 * font.line_height()));
  // Linear: 0 to a little above the tallest bar. Log: log10(1 + count), ticks at powers
  // of ten (thinned to fit).
  const double top = log_scale ? std::log10(1.0 + std::max(1.0, static_cast<double>(tallest))) * 1.08
                               : std::max(1.0, static_cast<double>(scale_to) * (spike >= 0 ? 1.25 : 1.08));
  AxisTicks yticks;
  if (log_scale) {
    const int decades = static_cast<int>(std::floor(top)) + 1;
    const int every = std::max(1, (decades + max_y_ticks - 1) / max_y_ticks);
    yticks.values.push_back(0);
    for (int d = 0; d < decades; d += every) yticks.values.push_back(std::pow(10.0, d));
  } else {
    yticks = count_ticks(top, max_y_ticks);
  }
  const std::vector<std::string> ylabels = count_tick_labels(yticks);
  int ylabel_width = 0;
  for (const auto& s : ylabels) ylabel_width = std::max(ylabel_width, font.width(s));
  const int x0 = area.x + m.pad + ylabel_width + m.tick + m.gap / 2;
  const int x1 = right;
  if (x1 - x0 < 16) return;
  const double pw = x1 - x0, ph = y1 - y0;
  auto y_of = [&](double count) {
    const double h = log_scale ? std::log10(1.0 + count) : count;
    return y1 - static_cast<int>(std::lround(std::min(h / top, 1.0) * ph));
  };

  // Horizontal grid and count labels.
  for (size_t i = 0; i < yticks.values.size(); ++i) {
    const int y = y_of(yticks.values[i]);
    if (i > 0) cv::line(image, {x0, y}, {x1, y}, style.grid, 1);
    font.draw_right(image, ylabels[i], x0 - m.tick - m.gap / 2, y + font.ascent() / 2, dim);
    cv::line(image, {x0 - m.tick, y}, {x0, y}, axis, m.line);
  }

  // Bars: at least 1 px tall when non-empty, with a small gap when bins are wide enough.
  const int bins = static_cast<int>(hist.counts.size());
  const double bin_width = bins > 0 ? pw / bins : 0;
  const int bar_gap = bin_width >= 5 ? std::max(1, static_cast<int>(bin_width * 0.06)) : 0;
  auto bar_left = [&](int i) { return x0 + static_cast<int>(std::lround(i * pw / bins)); };
  auto bar_right = [&](int i) { return std::max(bar_left(i) + 1, bar_left(i + 1) - bar_gap); };
  for (int i = 0; i < bins; ++i) {
    const uint64_t c = hist.counts[static_cast<size_t>(i)];
    if (c == 0) continue;
    const int yt = std::min(y_of(static_cast<double>(c)), y1 - 1);
    cv::rectangle(image, cv::Point(bar_left(i), yt), cv::Point(bar_right(i) - 1, y1 - 1), style.bar, cv::FILLED);
  }
  if (spike >= 0) {
    // Two slanted cuts near the top, and the spike's count and share beside it.
    const int xa = bar_left(spike), xb = bar_right(spike);
    const int cut = y0 + static_cast<int>(ph * 0.12);
    const int slant = std::max(2, m.gap / 2);
    for (int k = 0; k < 2; ++k) {
      const int y = cut + k * (slant + m.line + 1);
      cv::line(image, {xa - 2, y + slant}, {xb + 1, y - slant}, style.background, m.line + 1);
    }
    const std::string text = format_count(hist.counts[static_cast<size_t>(spike)]) + " (" +
        percent(hist.counts[static_cast<size_t>(spike)], finite) + ")";
    const int w = font.width(text);
    const int lx = xb + m.gap / 2 + w <= x1 ? xb + m.gap / 2 : std::max(x0, xa - m.gap / 2 - w);
    font.draw(image, text, lx, y0 + font.ascent() + m.gap / 2, style.foreground);
  }

  // Value axis with as many ticks as fit without touching labels.
  auto x_of = [&](double v) { return x0 + static_cast<int>(std::lround(range.position(v) * pw)); };
  auto draw_tick = [&](double v, const std::string& label) {
    const int x = x_of(v);
    cv::line(image, {x, y1}, {x, y1 + m.tick}, axis, m.line);
    const int w = font.width(label);
    const int lx = std::clamp(x - w / 2, m.pad / 2, std::max(0, image.cols - m.pad / 2 - w));
    font.draw(image, label, lx, x_label_baseline, dim);
  };
  if (symlog_axis) {
    // Each candidate kept when its label clears the labels kept before it.
    std::vector<std::pair<int, int>> taken;
    for (double v : symlog_tick_candidates(range.lo, range.hi, range.linthresh)) {
      const std::string label = format_number(v);
      const int x = x_of(v), half = font.width(label) / 2 + m.gap;
      const bool clear = std::none_of(taken.begin(), taken.end(),
                                      [&](const auto& t) { return x - half < t.second && x + half > t.first; });
      if (!clear) continue;
      taken.emplace_back(x - half, x + half);
      draw_tick(v, label);
    }
  } else {
    for (int max_ticks = std::clamp(static_cast<int>(pw / (4 * font.width("0"))), 2, 12); max_ticks >= 2; --max_ticks) {
      const AxisTicks xt = nice_ticks(range.lo, range.hi, max_ticks);
      std::vector<std::string> labels;
      int widest = 0;
      for (double v : xt.values) {
        labels.push_back(format_tick(v, xt.step));
        widest = std::max(widest, font.width(labels.back()));
      }
      const double spacing = xt.values.size() > 1 ? (x_of(xt.values[1]) - x_of(xt.values[0])) : pw;
      if (spacing < widest + 2 * m.gap && max_ticks > 2) continue;
      for (size_t i = 0; i < xt.values.size(); ++i) draw_tick(xt.values[i], labels[i]);
      break;
    }
  }
  cv::line(image, {x0, y1}, {x1, y1}, axis, m.line);
  cv::line(image, {x0, y0}, {x0, y1}, axis, m.line);

  // Mean marker: a dashed accent line labelled "mean".
  if (std::isfinite(stats.mean) && stats.mean >= range.lo && stats.mean <= range.hi) {
    const int x = x_of(stats.mean);
    const int dash = std::max(2, m.gap);
    for (int y = y1; y > y0; y -= 2 * dash) {
      cv::line(image, {x, y}, {x, std::max(y0, y - dash)}, style.accent, m.line);
    }
    const std::string text = "mean";
    const int w = font.width(text);
    const int lx = x + m.gap / 2 + w <= x1 ? x + m.gap / 2 : x - m.gap / 2 - w;
    font.draw(image, text, lx, y0 + font.ascent() + (spike >= 0 ? font.line_height() + m.gap : 0), style.accent);
  }

  // Say why the plot is empty.
  std::string empty;
  if (hist.total() == 0) {
    empty = "no values";
  } else if (tallest == 0 && hist.underflow + hist.overflow == 0) {
    empty = "no finite values";
  } else if (tallest == 0) {
    empty = "all finite values outside the range";
  }
  if (!empty.empty()) {
    const TextPainter& big = m.body;
    const std::string text = big.elide_end(empty, x1 - x0 - 2 * m.gap);
    big.draw(image, text, (x0 + x1 - big.width(text)) / 2, (y0 + y1 + big.ascent()) / 2, dim);
  }
}

}  // namespace

std::string format_shape(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

cv::Rect draw_frame_header(cv::Mat& image, const FrameInfo& info, const tensor::TensorStats* stats,
                           const FrameStyle& style) {
  fill(image, style.background);
  const Metrics m = metrics_for(image);
  const cv::Scalar dim = mix(style.foreground, style.background, 0.4);
  const int left = m.pad, right = image.cols - m.pad, avail = right - left;
  int y = m.pad;

  // Row 1: "stream | device | rank N" ... "step S".
  y += m.title.ascent();
  const std::string step = "step " + std::to_string(info.step);
  const int step_x = m.title.draw_right(image, step, right, y, style.foreground);
  const int title_room = step_x - left - 2 * m.gap;
  const std::string device =
      m.title.elide_end(printable_ascii(info.device.empty() ? "?" : info.device), std::max(0, title_room / 4));
  const std::string rest = " | " + device + " | rank " + std::to_string(info.rank);
  const int rest_width = m.title.width(rest);
  const std::string stream = printable_ascii(info.stream.empty() ? "(unnamed)" : info.stream);
  if (title_room >= rest_width + m.title.width("...")) {
    const int x = m.title.draw(image, m.title.elide_middle(stream, title_room - rest_width), left, y, style.foreground);
    m.title.draw(image, rest, x, y, dim);
  } else {
    m.title.draw(image, m.title.elide_middle(stream, title_room), left, y, style.foreground);
  }
  y += m.title.descent() + m.gap;

  // Row 2: label ... kind.
  y += m.body.ascent();
  int label_right = right;
  if (!info.kind.empty()) {
    const std::string kind = m.body.elide_end(printable_ascii(info.kind), avail / 3);
    label_right = m.body.draw_right(image, kind, right, y, style.accent) - 2 * m.gap;
  }
  if (!info.label.empty()) {
    m.body.draw(image, m.body.elide_end(printable_ascii(info.label), label_right - left), left, y, style.foreground);
  }
  y += m.body.descent() + m.gap;

  // Row 3: shape, dtype, element count.
  y += m.body.ascent();
  {
    tensor::TensorView view{nullptr, info.type, info.shape};
    const int64_t numel = view.numel();
    const std::string tail = std::string("  ") + tensor::element_type_name(info.type) + "  (" +
        format_count(static_cast<uint64_t>(numel)) + (numel == 1 ? " element)" : " elements)");
    const int label_width = m.body.width("shape ");
    const int x = m.body.draw(image, "shape ", left, y, dim);
    const std::string shape = m.body.elide_end(format_shape(info.shape), avail - label_width - m.body.width(tail));
    const int x2 = m.body.draw(image, shape, x, y, style.foreground);
    m.body.draw(image, m.body.elide_end(tail, right - x2), x2, y, dim);
  }
  y += m.body.descent() + m.gap;

  // Row 4: statistics.
  if (stats != nullptr) {
    y += m.body.ascent();
    const uint64_t infs = stats->pos_inf_count + stats->neg_inf_count;
    const std::vector<Run> runs = {
        {"mean ", dim},   {format_number(stats->mean), style.foreground},
        {"   std ", dim}, {format_number(stats->std), style.foreground},
        {"   min ", dim}, {format_number(stats->min), style.foreground},
        {"   max ", dim}, {format_number(stats->max), style.foreground},
        {"   NaN ", dim}, {std::to_string(stats->nan_count), stats->nan_count ? style.accent : style.foreground},
        {"   Inf ", dim}, {std::to_string(infs), infs ? style.accent : style.foreground},
    };
    draw_runs(image, m.body, left, y, runs, avail);
    y += m.body.descent() + m.gap;
  }

  y += m.gap / 2;
  cv::line(image, {left, y}, {right, y}, style.grid, 1);
  y += 1;
  return cv::Rect(0, y, image.cols, std::max(0, image.rows - y));
}

cv::Mat draw_histogram_frame(const FrameInfo& info, const tensor::TensorStats& stats, const Histogram& hist,
                             const HistogramDisplay& display, const FrameStyle& style) {
  cv::Mat image(clamped_size(style), CV_8UC3);
  try {
    const cv::Rect area = draw_frame_header(image, info, &stats, style);
    draw_histogram_plot(image, area, stats, hist, display, style, metrics_for(image));
  } catch (...) {
    fill(image, style.background);
  }
  return image;
}

cv::Mat draw_message_frame(const FrameInfo& info, const std::string& message, const FrameStyle& style,
                           const tensor::TensorStats* stats) {
  cv::Mat image(clamped_size(style), CV_8UC3);
  try {
    const cv::Rect area = draw_frame_header(image, info, stats, style);
    const Metrics m = metrics_for(image);
    const TextPainter font = m.body.scaled(1.2);
    const std::vector<std::string> lines = wrap_words(printable_ascii(message), font, image.cols - 4 * m.pad);
    const int line_height = font.line_height() + m.gap;
    const int max_lines = std::max(1, (area.height - 2 * m.pad) / line_height);
    const int shown = std::min(static_cast<int>(lines.size()), max_lines);
    int y = area.y + (area.height - shown * line_height) / 2 + font.ascent();
    const cv::Scalar color = mix(style.foreground, style.background, 0.2);
    for (int i = 0; i < shown; ++i, y += line_height) {
      std::string text = lines[static_cast<size_t>(i)];
      if (i == shown - 1 && shown < static_cast<int>(lines.size())) {
        text = font.elide_end(text + " ...", image.cols - 4 * m.pad);
      }
      font.draw(image, text, (image.cols - font.width(text)) / 2, y, color);
    }
  } catch (...) {
    fill(image, style.background);
  }
  return image;
}

std::string degenerate_description(const tensor::TensorStats& s) {
  if (s.count == 0) return "empty tensor: nothing to plot";
  const uint64_t non_finite = s.nan_count + s.pos_inf_count + s.neg_inf_count;
  const std::string all = s.count == 1 ? "the only value" : "all " + format_count(s.count) + " values";
  if (s.finite_count == 0) {
    if (s.nan_count == s.count) return s.count == 1 ? "single element: NaN" : all + " are NaN";
    if (s.pos_inf_count == s.count) return s.count == 1 ? "single element: +Inf" : all + " are +Inf";
    if (s.neg_inf_count == s.count) return s.count == 1 ? "single element: -Inf" : all + " are -Inf";
    return "no finite values: " + format_count(s.nan_count) + " NaN, " + format_count(s.pos_inf_count) + " +Inf, " +
        format_count(s.neg_inf_count) + " -Inf";
  }
  if (s.count == 1) return "single element: " + format_number(s.min);
  if (s.min < s.max) return "";
  const std::string besides = non_finite == 0 ? "" : " (besides " + format_count(non_finite) + " NaN/Inf)";
  const std::string finite = non_finite == 0 ? all : "all " + format_count(s.finite_count) + " finite values";
  if (s.min == 0) return finite + " are 0" + besides;
  return "constant: " + finite + " are " + format_number(s.min) + besides;
}

}  // namespace tensorscope::plotting
