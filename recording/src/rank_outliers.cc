// rank_outliers.cc — see rank_outliers.h.
#include "tensorscope/recording/rank_outliers.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tensorscope::recording {
namespace {

double median(std::vector<double> v) {
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  return 0.5 * (upper + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid)));
}

}  // namespace

std::vector<RankOutlier> rank_outliers(const std::vector<float>& values, const std::vector<uint8_t>& nonfinite,
                                       size_t ranks, size_t columns, bool log_scale, double threshold) {
  std::vector<RankOutlier> out;
  if (values.size() < ranks * columns || nonfinite.size() < ranks * columns) return out;
  std::vector<double> score(ranks * columns, 0.0);
  std::vector<double> x(ranks), finite;
  for (size_t c = 0; c < columns; ++c) {
    finite.clear();
    for (size_t r = 0; r < ranks; ++r) {
      const double v = values[r * columns + c];
      x[r] = !std::isfinite(v) ? std::nan("") : log_scale ? (v > 0 ? std::log10(v) : std::nan("")) : v;
      if (!std::isnan(x[r])) finite.push_back(x[r]);
      if (nonfinite[r * columns + c] != 0) score[r * columns + c] = std::numeric_limits<double>::infinity();
    }
    if (finite.size() < kMinRanks) continue;
    const double m = median(finite);
    for (double& f : finite) f = std::fabs(f - m);
    const double floor = log_scale ? kLogFloor : std::max(kLinearFloor * std::fabs(m), kLinearAbsoluteFloor);
    const double spread = 1.4826 * std::max(median(finite), floor);
    for (size_t r = 0; r < ranks; ++r) {
      double& s = score[r * columns + c];
      if (!std::isnan(x[r]) && !std::isinf(s)) s = std::fabs(x[r] - m) / spread;
    }
  }
  for (size_t r = 0; r < ranks; ++r) {
    for (size_t c = 0; c < columns; ++c) {
      const double s = score[r * columns + c];
      if (s > threshold) out.push_back(RankOutlier{r, c, s});
    }
  }
  return out;
}

}  // namespace tensorscope::recording
