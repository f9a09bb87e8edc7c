// histogram.cc — range choice, the binning hot loop, compute_histogram and summarize.
#include "tensorscope/plotting/histogram.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tensorscope/tensor/element_blocks.h"
#include "histogram_binner.h"
#include "lane_counts.h"
#include "tensorscope/tensor/tensor_stats.h"

namespace tensorscope::plotting {
namespace {
// |lo|, |hi| never exceed this so hi - lo stays finite.
constexpr double kEdgeLimit = std::numeric_limits<double>::max() / 4;
}  // namespace

bool HistogramRange::valid() const {
  if (bins < 1 || bins > kMaxHistogramBins) return false;
  if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo < hi)) return false;
  if (lo < -kEdgeLimit || hi > kEdgeLimit) return false;
  const double scale = bins / (hi - lo);
  if (!std::isfinite(scale) || !(scale > 0)) return false;
  if (axis == HistogramAxis::kLinear) return true;
  if (axis != HistogramAxis::kSymlog) return false;
  if (!std::isfinite(linthresh) || !(linthresh > 0) || linthresh > kEdgeLimit) return false;
  const double t_scale = bins / (symlog(hi, linthresh) - symlog(lo, linthresh));
  return std::isfinite(t_scale) && t_scale > 0;
}

double HistogramRange::edge(int i) const {
  if (i >= bins) return hi;
  const double f = static_cast<double>(i) / bins;
  if (axis == HistogramAxis::kSymlog) {
    const double tlo = symlog(lo, linthresh), thi = symlog(hi, linthresh);
    return std::clamp(symlog_inverse(tlo + (thi - tlo) * f, linthresh), lo, hi);
  }
  return lo + (hi - lo) * f;
}

double HistogramRange::position(double x) const {
  if (axis == HistogramAxis::kSymlog) {
    const double tlo = symlog(lo, linthresh);
    return (symlog(x, linthresh) - tlo) / (symlog(hi, linthresh) - tlo);
  }
  return (x - lo) / (hi - lo);
}

uint64_t Histogram::total() const {
  uint64_t sum = underflow + overflow + nan + pos_inf + neg_inf;
  for (uint64_t c : counts) sum += c;
  return sum;
}

HistogramRange sanitize_range(HistogramRange r) {
  r.bins = std::clamp(r.bins, 1, kMaxHistogramBins);
  if (r.valid()) return r;
  if (r.axis != HistogramAxis::kLinear) {
    // A symlog range that cannot be binned falls back to a linear one.
    r.axis = HistogramAxis::kLinear;
    r.linthresh = 1;
    if (r.valid()) return r;
  }
  double lo = std::isfinite(r.lo) ? r.lo : (std::isfinite(r.hi) ? r.hi : 0.0);
  double hi = std::isfinite(r.hi) ? r.hi : lo;
  if (hi < lo) std::swap(lo, hi);
  lo = std::clamp(lo, -kEdgeLimit, kEdgeLimit);
  hi = std::clamp(hi, -kEdgeLimit, kEdgeLimit);
  r.lo = lo;
  r.hi = hi;
  if (!r.valid()) {
    // Empty or too narrow: widen around the centre.
    const double centre = lo / 2 + hi / 2;
    const double half = std::max({std::abs(centre) * 1e-6, 1e-300, (hi - lo) / 2});
    r.lo = std::max(centre - half, -kEdgeLimit);
    r.hi = std::min(centre + half, kEdgeLimit);
  }
  if (!r.valid()) {
    r.lo = -1;
    r.hi = 1;
  }
  return r;
}

HistogramRange choose_histogram_range(const tensor::TensorStats& stats, int bins, double margin, bool integer_valued) {
  bins = std::clamp(bins, 1, kMaxHistogramBins);
  if (!std::isfinite(margin) || margin < 0) margin = 0;
  margin = std::min(margin, 10.0);
  const double mn = stats.min, mx = stats.max;
  if (stats.finite_count == 0 || !std::isfinite(mn) || !std::isfinite(mx) || mn > mx) {
    return HistogramRange{-1.0, 1.0, bins};
  }
  if (integer_valued && mx - mn < 0x1p50 && std::abs(mn) < 0x1p52 && std::abs(mx) < 0x1p52) {
    const double ext = std::floor(margin * (mx - mn));
    const double first = std::floor(mn) - ext;
    const double last = std::ceil(mx) + ext;
    const double values = last - first + 1;
    const double width = std::ceil(values / bins);
    const int used = static_cast<int>(std::ceil(values / width));
    return sanitize_range(HistogramRange{first - 0.5, first - 0.5 + width * used, used});
  }
  if (mn == mx) {
    // Centre the value in the middle bin (not on an edge, where rounding would pick a
    // side).
    const double half = mn != 0 ? std::abs(mn) * 0.05 : 0.5;
    const double width = 2 * half / bins;
    const double lo = mn - width * bins / 2.0 - (bins % 2 == 0 ? width / 2 : 0);
    return sanitize_range(HistogramRange{lo, lo + width * bins, bins});
  }
  double span = mx - mn;
  if (!std::isfinite(span)) span = std::numeric_limits<double>::max();
  const double lo = std::max(mn - margin * span, -kEdgeLimit);
  const double hi = std::min(mx + margin * span, kEdgeLimit);
  return sanitize_range(HistogramRange{lo, hi, bins});
}

namespace internal {

HistogramBinner::HistogramBinner(const HistogramRange& range)
    : range_(range),
      symlog_(range.axis == HistogramAxis::kSymlog),
      lo_(symlog_ ? symlog(range.lo, range.linthresh) : range.lo),
      hi_(symlog_ ? symlog(range.hi, range.linthresh) : range.hi),
      scale_(range.bins / (hi_ - lo_)),
      stride_(static_cast<size_t>(range.bins) + 2),
      lanes_(internal::kCountLanes * stride_, 0) {}

void HistogramBinner::add_block(const double* v, size_t n) {
  if (!symlog_) return add_axis_block(v, n);
  // Symlog is monotonic: binning symlog(x) over [symlog(lo), symlog(hi)] is binning x.
  double t[tensor::kBlockElements];
  for (size_t start = 0; start < n; start += tensor::kBlockElements) {
    const size_t m = std::min(n - start, tensor::kBlockElements);
    for (size_t i = 0; i < m; ++i) t[i] = symlog(v[start + i], range_.linthresh);
    add_axis_block(t, m);
  }
}

void HistogramBinner::add_axis_block(const double* v, size_t n) {
  const double lo = lo_, hi = hi_, scale = scale_;
  const double last = static_cast<double>(range_.bins - 1);
  const int overflow_slot = range_.bins + 1;
  // Slot of a finite x: 0 below lo, bins+1 above hi, else 1 + bin (x == hi -> last).
  auto slot = [=](double x) -> int {
    double t = (x - lo) * scale;
    t = t < last ? t : last;  // also catches +Inf from x - lo overflowing
    t = t > 0.0 ? t : 0.0;
    int s = static_cast<int>(t) + 1;
    s = x < lo ? 0 : s;
    s = x > hi ? overflow_slot : s;
    return s;
  };
  // Slots first (a vectorisable loop), then the increments, 256 elements at a time.
  constexpr size_t kChunk = 256;
  int32_t slots[kChunk];
  for (size_t start = 0; start < n; start += kChunk) {
    const size_t m = n - start < kChunk ? n - start : kChunk;
    const double* x = v + start;
    for (size_t i = 0; i < m; ++i) slots[i] = slot(x[i]);
    count_slots(slots, m, lanes_.data(), stride_);
  }
}

Histogram HistogramBinner::finish(const tensor::NonFiniteCounts& nf) const {
  Histogram h;
  h.range = range_;
  h.counts.assign(static_cast<size_t>(range_.bins), 0);
  for (int lane = 0; lane < kCountLanes; ++lane) {
    const uint64_t* c = lanes_.data() + lane * stride_;
    h.underflow += c[0];
    h.overflow += c[stride_ - 1];
    for (size_t b = 0; b < h.counts.size(); ++b) h.counts[b] += c[b + 1];
  }
  h.nan = nf.nan;
  h.pos_inf = nf.pos_inf;
  h.neg_inf = nf.neg_inf;
  return h;
}

}  // namespace internal

Histogram compute_histogram(const tensor::TensorView& view, const HistogramRange& range) {
  internal::HistogramBinner binner(sanitize_range(range));
  tensor::NonFiniteCounts nf;
  tensor::for_each_finite_block(view, &nf, [&](const double* v, size_t n) { binner.add_block(v, n); });
  return binner.finish(nf);
}

void summarize(const tensor::TensorView& view, const HistogramRange* fixed_range, int bins, double margin_fraction,
               tensor::TensorStats* stats, Histogram* hist) {
  if (fixed_range == nullptr) {
    const tensor::TensorStats s = tensor::compute_stats(view);
    if (hist != nullptr) {
      *hist =
          compute_histogram(view, choose_histogram_range(s, bins, margin_fraction, !tensor::is_floating(view.type)));
    }
    if (stats != nullptr) *stats = s;
    return;
  }
  if (stats == nullptr || hist == nullptr) {
    if (stats != nullptr) *stats = tensor::compute_stats(view);
    if (hist != nullptr) *hist = compute_histogram(view, *fixed_range);
    return;
  }
  tensor::StatsAccumulator acc;
  internal::HistogramBinner binner(sanitize_range(*fixed_range));
  tensor::NonFiniteCounts nf;
  tensor::for_each_finite_block(view, &nf, [&](const double* v, size_t n) {
    acc.add_block(v, n);
    binner.add_block(v, n);
  });
  *stats = acc.finish(view.valid() ? static_cast<uint64_t>(view.numel()) : 0, nf);
  *hist = binner.finish(nf);
}

}  // namespace tensorscope::plotting
