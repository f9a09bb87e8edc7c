// overview_scale.cc — see overview_scale.h.
#include "tensorscope/recording/overview_scale.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace tensorscope::recording {

double OverviewScale::position(double v) const {
  if (!log) return (v - lo) / (hi - lo);
  if (!(v > 0)) return -1;
  return (std::log10(v) - lo) / (hi - lo);
}

OverviewScale overview_scale(size_t metric, const std::vector<float>& values) {
  OverviewScale s;
  s.log = metric < kOverviewMetrics.size() && kOverviewMetrics[metric].log_scale;
  std::vector<float> finite;
  finite.reserve(values.size());
  for (const float v : values) {
    if (std::isfinite(v) && (!s.log || v > 0)) finite.push_back(v);
  }
  if (!s.log) {  // a fraction: 0..1 always, so frames compare
    s.lo = 0;
    s.hi = 1;
    s.valid = !finite.empty();
    if (s.valid) s.hi = std::max(1.0, static_cast<double>(*std::max_element(finite.begin(), finite.end())));
    return s;
  }
  if (finite.empty()) return s;
  // From the smallest value, unless it lies far below the rest (then 2 decades below the
  // 1st percentile: a few tiny values do not squeeze the others into one shade).
  const size_t p1 = finite.size() / 100;
  std::nth_element(finite.begin(), finite.begin() + static_cast<std::ptrdiff_t>(p1), finite.end());
  const double low = finite[p1];
  const double smallest = *std::min_element(finite.begin(), finite.begin() + static_cast<std::ptrdiff_t>(p1) + 1);
  const double high = *std::max_element(finite.begin(), finite.end());
  s.lo = std::max(std::floor(std::log10(smallest)), std::floor(std::log10(low)) - 2);
  s.hi = std::ceil(std::log10(high));
  if (s.hi <= s.lo) s.hi = s.lo + 1;
  s.valid = true;
  return s;
}

}  // namespace tensorscope::recording
