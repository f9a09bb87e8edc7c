// steady_axis.cc — widen at once, narrow after `patience` frames, edges on a nice grid.
#include "tensorscope/plotting/steady_axis.h"

#include <algorithm>
#include <cmath>

#include "tensorscope/plotting/axis_ticks.h"

namespace tensorscope::plotting {
namespace {

// [lo, hi] with `margin` of its width each side, edges rounded outward to a tenth of
// the width; all-equal data get +-10% (+-1 around 0).
AxisLimits snapped(double lo, double hi, double margin) {
  if (!(hi - lo > std::abs(lo / 2 + hi / 2) * 1e-12)) {
    const double c = lo / 2 + hi / 2;
    const double d = c == 0 ? 1.0 : std::abs(c) * 0.1;
    lo = c - d;
    hi = c + d;
  }
  const double pad = std::min((hi - lo) * margin, 1e307);
  AxisLimits r{lo - pad, hi + pad};
  const double step = nice_ticks(r.lo, r.hi, 10).step;
  if (step > 0 && std::isfinite(step)) {
    const double a = std::floor(r.lo / step) * step, b = std::ceil(r.hi / step) * step;
    if (std::isfinite(a) && std::isfinite(b) && a < b) r = {a, b};
  }
  if (!std::isfinite(r.lo) || !std::isfinite(r.hi) || !(r.lo < r.hi)) r = {lo, hi};
  return r;
}

}  // namespace

SteadyAxis::SteadyAxis(int patience, double margin)
    : patience_(std::max(1, patience)), margin_(std::clamp(margin, 0.0, 1.0)) {}

AxisLimits SteadyAxis::update(double lo, double hi) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return limits_;
  if (lo > hi) std::swap(lo, hi);
  const bool outside = lo < limits_.lo || hi > limits_.hi;
  const bool narrow = (hi / 2 - lo / 2) < (limits_.hi / 2 - limits_.lo / 2) / 2;
  narrow_frames_ = narrow ? narrow_frames_ + 1 : 0;
  if (!any_ || outside || narrow_frames_ >= patience_) {
    const AxisLimits next = snapped(lo, hi, margin_);
    if (!any_ || !(next == limits_)) ++changes_;
    limits_ = next;
    any_ = true;
    narrow_frames_ = 0;
  }
  return limits_;
}

}  // namespace tensorscope::plotting
