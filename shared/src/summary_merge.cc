// summary_merge.cc — see summary_merge.h.
#include "tensorscope/shared/summary_merge.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tensorscope {

TensorSummary merge_summaries(const TensorSummary& a, const TensorSummary& b) {
  TensorSummary out = a;
  out.has_update_ratio = false;
  out.update_ratio = 0;
  out.numel = a.numel + b.numel;
  out.nan_count = a.nan_count + b.nan_count;
  out.inf_count = a.inf_count + b.inf_count;
  out.zero_count = a.zero_count + b.zero_count;
  out.max_abs = std::max(a.max_abs, b.max_abs);
  out.l2 = std::hypot(a.l2, b.l2);
  if (a.has_numerics() && b.has_numerics() && a.cast_format == b.cast_format) {
    out.underflow_count = a.underflow_count + b.underflow_count;
    out.overflow_count = a.overflow_count + b.overflow_count;
    out.min_abs_nonzero = a.min_abs_nonzero == 0 ? b.min_abs_nonzero
        : b.min_abs_nonzero == 0                 ? a.min_abs_nonzero
                                                 : std::min(a.min_abs_nonzero, b.min_abs_nonzero);
  } else {
    out.cast_format = CastFormat::kNone;
    out.underflow_count = out.overflow_count = 0;
    out.min_abs_nonzero = 0;
  }
  const uint64_t finite_a = a.numel - a.nan_count - a.inf_count, finite_b = b.numel - b.nan_count - b.inf_count;
  if (finite_a == 0 || finite_b == 0) {
    const TensorSummary& only = finite_a > 0 ? a : b;
    out.mean = finite_a + finite_b > 0 ? only.mean : 0.0;
    out.std = finite_a + finite_b > 0 ? only.std : 0.0;
    return out;
  }
  const double na = static_cast<double>(finite_a), nb = static_cast<double>(finite_b);
  const double n = na + nb, delta = b.mean - a.mean;
  out.mean = a.mean + delta * (nb / n);
  // The sums of squared deviations in units of the largest spread (no overflow near 1e300).
  const double unit = std::max({a.std, b.std, std::fabs(delta), std::numeric_limits<double>::min()});
  const double sa = a.std / unit, sb = b.std / unit, d = delta / unit;
  const double m2 = na * sa * sa + nb * sb * sb + d * d * (na * nb / n);
  out.std = std::sqrt(std::max(0.0, m2 / n)) * unit;
  return out;
}

double merged_update_ratio(const std::vector<RatioPart>& parts) {
  double change = 0, before = 0;
  for (const RatioPart& p : parts) {
    if (std::isnan(p.ratio) || std::isnan(p.before_l2)) return std::numeric_limits<double>::quiet_NaN();
    change = std::hypot(change, p.before_l2 == 0 ? p.now_l2 : p.ratio * p.before_l2);  // |now - before| of the part
    before = std::hypot(before, p.before_l2);
  }
  if (std::isnan(change)) return change;
  if (before == 0) return change == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return change / before;
}

}  // namespace tensorscope
