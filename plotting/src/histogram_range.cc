// histogram_range.cc — body ranges (linear and symlog candidates), spread and spikes.
#include "tensorscope/plotting/histogram_range.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tensorscope/plotting/axis_ticks.h"

namespace tensorscope::plotting {
namespace {

constexpr double kLowQuantile = 0.01;        // the body: 1st to 99th percentile
constexpr double kFullRangeSpread = 0.3;     // keep [min, max] while the central 90 % spans this
constexpr double kSymmetricRatio = 1.0 / 3;  // sides of a body around 0 this comparable
constexpr double kSnapDivisions = 20;        // edges on a grid of width / 20
constexpr double kLinearEnough = 0.25;       // central 90 % over this much of a linear axis
constexpr double kSymlogGain = 1.5;          // symlog must spread the body this much wider
constexpr double kSpikeFactor = 4;           // a bar this many times the next is a spike
constexpr double kVisibleBar = 0.02;         // of the tallest bar: visible on a linear axis

// The nice number (1, 2 or 5 times a power of ten) at or beyond |x| away from 0 when
// `outward`, else at or before it, with x's sign. 0 stays 0.
double snap_magnitude(double x, bool outward) {
  const double mag = std::abs(x);
  if (!(mag > 0) || !std::isfinite(mag)) return x;
  const double p = std::pow(10.0, std::floor(std::log10(mag)));
  double best = outward ? 10 * p : p;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    const double v = m * p;
    if (outward && v >= mag * (1 - 1e-12)) {
      best = v;
      break;
    }
    if (!outward && v <= mag * (1 + 1e-12)) best = v;
  }
  return std::copysign(best, x);
}

struct Candidate {
  HistogramRange range;
  double spread = 0;  // predicted central_spread at 90 %
};

// The range [lo, hi] (on the axis) made a histogram range: kept on one side of 0 when
// the values are (symlog), symmetric around 0 when the body's sides are comparable,
// edges rounded outward; with the central spread it gives the values.
Candidate finish_candidate(const ValueSketch& s, const BodyRangeOptions& o, HistogramAxis axis, double linthresh,
                           double lo, double hi) {
  const bool log_axis = axis == HistogramAxis::kSymlog;
  auto from_axis = [&](double t) { return log_axis ? symlog_inverse(t, linthresh) : t; };
  if (log_axis) {
    // A margin never takes a symlog axis across 0 when every value is on one side.
    if (s.min() >= 0) lo = std::max(lo, 0.0);
    if (s.max() <= 0) hi = std::min(hi, 0.0);
  }
  const double q_lo = s.quantile(kLowQuantile), q_hi = s.quantile(1 - kLowQuantile);
  if (q_lo < 0 && q_hi > 0 && std::min(-q_lo, q_hi) >= kSymmetricRatio * std::max(-q_lo, q_hi)) {
    const double a = std::max(-lo, hi);
    lo = -a;
    hi = a;
  }
  HistogramRange r{from_axis(lo), from_axis(hi), o.bins, axis, linthresh};
  if (log_axis) {
    r.lo = snap_magnitude(r.lo, r.lo < 0);
    r.hi = snap_magnitude(r.hi, r.hi > 0);
  } else {
    const double step = nice_ticks(r.lo, r.hi, static_cast<int>(kSnapDivisions)).step;
    if (step > 0 && std::isfinite(step)) {
      r.lo = std::floor(r.lo / step) * step;
      r.hi = std::ceil(r.hi / step) * step;
    }
  }
  r = sanitize_range(r);
  const double p05 = std::clamp(r.position(s.quantile(0.05)), 0.0, 1.0);
  const double p95 = std::clamp(r.position(s.quantile(0.95)), 0.0, 1.0);
  return Candidate{r, p95 - p05};
}

// The range on `axis` (values mapped by symlog with `linthresh` when kSymlog): all the
// values when that spreads the central 90 % over kFullRangeSpread of it, else the body.
Candidate body_candidate(const ValueSketch& s, const BodyRangeOptions& o, HistogramAxis axis, double linthresh) {
  const bool log_axis = axis == HistogramAxis::kSymlog;
  auto to_axis = [&](double x) { return log_axis ? symlog(x, linthresh) : x; };
  const double margin = std::clamp(std::isfinite(o.margin) ? o.margin : 0.0, 0.0, 10.0);
  const double t_min = to_axis(s.min()), t_max = to_axis(s.max());
  const double full = t_max - t_min;
  const Candidate all = finish_candidate(s, o, axis, linthresh, t_min - margin * full, t_max + margin * full);
  const double t_lo = to_axis(s.quantile(kLowQuantile)), t_hi = to_axis(s.quantile(1 - kLowQuantile));
  const double body = t_hi - t_lo;
  if (all.spread >= kFullRangeSpread || !(body > 0)) return all;
  return finish_candidate(s, o, axis, linthresh, std::max(t_lo - margin * body, t_min),
                          std::min(t_hi + margin * body, t_max));
}

// Non-zero counts of a histogram's bins, largest first.
std::vector<uint64_t> bar_heights(const Histogram& hist) {
  std::vector<uint64_t> bars;
  for (uint64_t c : hist.counts) {
    if (c > 0) bars.push_back(c);
  }
  std::sort(bars.begin(), bars.end(), std::greater<>());
  return bars;
}

}  // namespace

HistogramRange choose_body_range(const ValueSketch& s, const BodyRangeOptions& o) {
  const int bins = std::clamp(o.bins, 1, kMaxHistogramBins);
  tensor::TensorStats extremes;
  extremes.finite_count = s.count();
  extremes.min = s.min();
  extremes.max = s.max();
  if (s.count() == 0 || !(s.min() < s.max())) {
    return choose_histogram_range(extremes, bins, o.margin, o.integer_valued);
  }
  BodyRangeOptions opts = o;
  opts.bins = bins;
  if (o.integer_valued) {
    // Whole-number bins over the body (or everything, when there are no long tails).
    const Candidate c = body_candidate(s, opts, HistogramAxis::kLinear, 1);
    extremes.min = std::max(c.range.lo, s.min());
    extremes.max = std::min(c.range.hi, s.max());
    return choose_histogram_range(extremes, bins, o.margin, true);
  }
  const Candidate linear = body_candidate(s, opts, HistogramAxis::kLinear, 1);
  if (o.axis == AxisChoice::kLinear || (o.axis == AxisChoice::kAuto && linear.spread >= kLinearEnough)) {
    return linear.range;
  }
  // Linear within the smallest magnitudes the body holds (the 5th percentile of |x|).
  const double largest = std::max(std::abs(s.min()), std::abs(s.max()));
  double linthresh = s.nonzero_abs_quantile(0.05);
  if (!(linthresh > largest * 1e-9)) linthresh = largest * 1e-9;
  if (!(linthresh > 0) || !std::isfinite(linthresh)) return linear.range;
  const Candidate log_axis = body_candidate(s, opts, HistogramAxis::kSymlog, linthresh);
  if (log_axis.range.axis != HistogramAxis::kSymlog) return linear.range;
  if (o.axis == AxisChoice::kSymlog || log_axis.spread >= kSymlogGain * linear.spread) {
    return log_axis.range;
  }
  return linear.range;
}

double central_spread(const Histogram& hist, double mass) {
  const int bins = static_cast<int>(hist.counts.size());
  double finite = static_cast<double>(hist.underflow + hist.overflow);
  for (uint64_t c : hist.counts) finite += static_cast<double>(c);
  if (bins == 0 || !(finite > 0)) return 0;
  mass = std::clamp(mass, 0.0, 1.0);
  // The point (in bins from the range's start) below which `rank` values lie.
  auto point = [&](double rank) {
    double before = static_cast<double>(hist.underflow);
    if (rank <= before) return 0.0;
    for (int b = 0; b < bins; ++b) {
      const double c = static_cast<double>(hist.counts[static_cast<size_t>(b)]);
      if (rank <= before + c) return b + (rank - before) / c;
      before += c;
    }
    return static_cast<double>(bins);
  };
  return (point((1 + mass) / 2 * finite) - point((1 - mass) / 2 * finite)) / bins;
}

double outside_fraction(const Histogram& hist) {
  double finite = static_cast<double>(hist.underflow + hist.overflow);
  for (uint64_t c : hist.counts) finite += static_cast<double>(c);
  return finite > 0 ? static_cast<double>(hist.underflow + hist.overflow) / finite : 0;
}

int spike_bin(const Histogram& hist) {
  const std::vector<uint64_t> bars = bar_heights(hist);
  if (bars.size() < 2 || static_cast<double>(bars[0]) <= kSpikeFactor * static_cast<double>(bars[1])) {
    return -1;
  }
  const auto it = std::max_element(hist.counts.begin(), hist.counts.end());
  return static_cast<int>(it - hist.counts.begin());
}

bool prefers_log_counts(const Histogram& hist) {
  std::vector<uint64_t> bars = bar_heights(hist);
  if (spike_bin(hist) >= 0) bars.erase(bars.begin());
  if (bars.size() < 4) return false;
  const double visible = kVisibleBar * static_cast<double>(bars[0]);
  const auto hidden =
      std::count_if(bars.begin(), bars.end(), [&](uint64_t c) { return static_cast<double>(c) < visible; });
  return 2 * static_cast<size_t>(hidden) > bars.size();
}

}  // namespace tensorscope::plotting
