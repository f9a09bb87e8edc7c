// tensor_stats.cc — compute_stats and the block-wise StatsAccumulator (tensor_stats.h).
#include "tensorscope/tensor/tensor_stats.h"

#include "summary_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tensorscope::tensor {
namespace {
constexpr int kScaleExponent = 600;
const double kScaleThreshold = std::ldexp(1.0, 400);
}  // namespace

void StatsAccumulator::add_block(const double* v, size_t n) {
  if (n == 0) return;
  // Pass 1: min, max, sum (four lanes so the compiler can pipeline/vectorise).
  double lo[4] = {v[0], v[0], v[0], v[0]};
  double hi[4] = {v[0], v[0], v[0], v[0]};
  double sum[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int k = 0; k < 4; ++k) {
      const double x = v[i + k];
      lo[k] = x < lo[k] ? x : lo[k];
      hi[k] = x > hi[k] ? x : hi[k];
      sum[k] += x;
    }
  }
  for (; i < n; ++i) {
    lo[0] = v[i] < lo[0] ? v[i] : lo[0];
    hi[0] = v[i] > hi[0] ? v[i] : hi[0];
    sum[0] += v[i];
  }
  double block_min = lo[0], block_max = hi[0];
  for (int k = 1; k < 4; ++k) {
    block_min = lo[k] < block_min ? lo[k] : block_min;
    block_max = hi[k] > block_max ? hi[k] : block_max;
  }
  min_ = block_min < min_ ? block_min : min_;
  max_ = block_max > max_ ? block_max : max_;

  if (!scaled_ && (block_max > kScaleThreshold || block_min < -kScaleThreshold)) {
    scaled_ = true;
    mean_ = std::ldexp(mean_, -kScaleExponent);
    m2_ = std::ldexp(m2_, -2 * kScaleExponent);
  }
  const double factor = scaled_ ? std::ldexp(1.0, -kScaleExponent) : 1.0;
  double block_sum;
  if (scaled_) {
    block_sum = 0;
    for (size_t j = 0; j < n; ++j) block_sum += v[j] * factor;
  } else {
    block_sum = (sum[0] + sum[1]) + (sum[2] + sum[3]);
  }
  const double nb = static_cast<double>(n);
  double block_mean = block_sum / nb;
  double block_m2 = 0;
  if (block_min == block_max) {
    block_mean = block_min * factor;  // constant block: exact
  } else {
    // Pass 2: deviations from the block mean; their sum corrects the mean's rounding
    // (the "corrected two-pass" algorithm of Chan, Golub and LeVeque).
    double dev[4] = {0, 0, 0, 0};
    double dev2[4] = {0, 0, 0, 0};
    i = 0;
    for (; i + 4 <= n; i += 4) {
      for (int k = 0; k < 4; ++k) {
        const double d = v[i + k] * factor - block_mean;
        dev[k] += d;
        dev2[k] += d * d;
      }
    }
    for (; i < n; ++i) {
      const double d = v[i] * factor - block_mean;
      dev[0] += d;
      dev2[0] += d * d;
    }
    const double sum_d = (dev[0] + dev[1]) + (dev[2] + dev[3]);
    const double sum_d2 = (dev2[0] + dev2[1]) + (dev2[2] + dev2[3]);
    block_m2 = std::max(0.0, sum_d2 - sum_d * sum_d / nb);
    block_mean += sum_d / nb;
  }

  // Chan et al.: merge (n_, mean_, m2_) with (n, block_mean, block_m2).
  const double na = static_cast<double>(n_);
  const double total = na + nb;
  const double delta = block_mean - mean_;
  mean_ += delta * (nb / total);
  m2_ += block_m2 + delta * delta * (na * nb / total);
  n_ += n;
}

TensorStats StatsAccumulator::finish(uint64_t count, const NonFiniteCounts& nf) const {
  TensorStats s;
  s.count = count;
  s.finite_count = n_;
  s.nan_count = nf.nan;
  s.pos_inf_count = nf.pos_inf;
  s.neg_inf_count = nf.neg_inf;
  if (n_ == 0) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    s.mean = s.std = s.min = s.max = nan;
    return s;
  }
  const int exponent = scaled_ ? kScaleExponent : 0;
  s.mean = std::ldexp(mean_, exponent);
  s.std = std::ldexp(std::sqrt(m2_ / static_cast<double>(n_)), exponent);
  s.min = min_;
  s.max = max_;
  // Rounding can put the mean a hair outside [min, max] for near-constant data.
  if (s.mean < s.min) s.mean = s.min;
  if (s.mean > s.max) s.mean = s.max;
  return s;
}

namespace {

// float32 in blocks of detail::float32_block (vectorised float sums), each block's sums
// added into doubles; a block whose float sums overflow is summed again in double. The
// variance is taken around the first finite value, so |mean| >> std loses nothing.
SummaryStats float32_summary(const float* data, size_t n) {
  constexpr size_t kBlock = 4096;
  float shift = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isfinite(data[i])) {
      shift = data[i];
      break;
    }
  }
  double total = 0, total_centred = 0, total_squares = 0;
  float largest = 0;
  uint64_t zeros = 0, finite = 0;
  for (size_t at = 0; at < n; at += kBlock) {
    const float* p = data + at;
    const size_t m = std::min(kBlock, n - at);
    const detail::Float32Block b = detail::float32_block(p, m, shift);
    double sum = b.sum, centred = b.centred, squares = b.squares;
    if (!std::isfinite(b.squares) || !std::isfinite(b.centred)) {  // beyond float range
      sum = centred = squares = 0;
      for (size_t k = 0; k < m; ++k) {
        if (!std::isfinite(p[k])) continue;
        const double v = p[k], d = v - static_cast<double>(shift);
        sum += d;
        centred += d * d;
        squares += v * v;
      }
    }
    total += sum;
    total_centred += centred;
    total_squares += squares;
    largest = std::max(largest, b.max_abs);
    zeros += b.zeros;
    finite += b.finite;
  }
  SummaryStats out;
  out.count = n;
  out.finite_count = finite;
  out.zero_count = zeros;
  out.max_abs = largest;
  if (finite < n) {
    for (size_t k = 0; k < n; ++k) out.nan_count += std::isnan(data[k]) ? 1 : 0;
    out.inf_count = n - finite - out.nan_count;
  }
  if (finite > 0) {
    const double count = static_cast<double>(finite);
    const double offset = total / count;
    out.mean = static_cast<double>(shift) + offset;
    out.std = std::sqrt(std::max(0.0, total_centred / count - offset * offset));
    out.l2 = std::sqrt(total_squares);
  }
  return out;
}

int32_t float_bits(float f) {
  int32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

// `cast` on float32 values, in blocks of detail::float32_cast_block: the limits as the
// bits of the largest float at most the underflow limit and of the smallest float at
// least the overflow limit (+Inf's bits when none: nothing overflows).
void float32_cast_counts(const float* data, size_t n, const CastLimits& cast, SummaryStats* out) {
  float under = static_cast<float>(cast.underflow_at_most);
  if (static_cast<double>(under) > cast.underflow_at_most) under = std::nextafter(under, 0.0f);
  float over = static_cast<float>(cast.overflow_from);
  if (static_cast<double>(over) < cast.overflow_from)
    over = std::nextafter(over, std::numeric_limits<float>::infinity());
  const int32_t under_bits = under > 0 ? float_bits(under) : 0;
  const int32_t over_bits = float_bits(std::fabs(over));
  int32_t smallest = std::numeric_limits<int32_t>::max();
  constexpr size_t kBlock = 1 << 20;
  for (size_t at = 0; at < n; at += kBlock) {
    const detail::Float32CastBlock b =
        detail::float32_cast_block(data + at, std::min(kBlock, n - at), under_bits, over_bits);
    smallest = std::min(smallest, b.min_nonzero);
    out->underflow_count += b.underflow;
    out->overflow_count += b.overflow;
  }
  if (smallest != std::numeric_limits<int32_t>::max()) {
    float f;
    std::memcpy(&f, &smallest, sizeof(f));
    out->min_abs_nonzero = f;
  }
}

}  // namespace

SummaryStats compute_summary_stats(const TensorView& view, const CastLimits* cast) {
  if (view.valid() && view.type == ElementType::kFloat32) {
    // Shared memory or a tensor of the training process: aligned float32 as allocators give it.
    const auto* data = static_cast<const float*>(view.data);
    const auto n = static_cast<size_t>(view.numel());
    SummaryStats out = float32_summary(data, n);
    if (cast != nullptr) float32_cast_counts(data, n, *cast, &out);
    return out;
  }
  NonFiniteCounts nf;
  StatsAccumulator acc;
  uint64_t zeros = 0, under = 0, over = 0;
  double smallest = std::numeric_limits<double>::infinity();
  for_each_finite_block(view, &nf, [&](const double* v, size_t n) {
    acc.add_block(v, n);
    uint64_t block_zeros = 0;
    for (size_t i = 0; i < n; ++i) block_zeros += v[i] == 0.0 ? 1 : 0;
    zeros += block_zeros;
    if (cast == nullptr) return;
    for (size_t i = 0; i < n; ++i) {
      const double a = std::fabs(v[i]);
      if (a != 0 && a < smallest) smallest = a;
      under += a != 0 && a <= cast->underflow_at_most ? 1 : 0;
      over += a >= cast->overflow_from ? 1 : 0;
    }
  });
  const TensorStats s = acc.finish(view.valid() ? static_cast<uint64_t>(view.numel()) : 0, nf);
  SummaryStats out;
  out.count = s.count;
  out.finite_count = s.finite_count;
  out.nan_count = s.nan_count;
  out.inf_count = s.pos_inf_count + s.neg_inf_count;
  out.zero_count = zeros;
  out.underflow_count = under;
  out.overflow_count = over;
  out.min_abs_nonzero = std::isfinite(smallest) ? smallest : 0.0;
  if (s.finite_count > 0) {
    out.mean = s.mean;
    out.std = s.std;
    // Sum of squares = n (var + mean^2), taken as sqrt(n) hypot(std, mean): finite
    // whenever the norm itself is (float64 values near 1e300 included).
    out.l2 = std::sqrt(static_cast<double>(s.finite_count)) * std::hypot(s.std, s.mean);
    out.max_abs = std::max(std::fabs(s.min), std::fabs(s.max));
  }
  return out;
}

TensorStats compute_stats(const TensorView& view) {
  NonFiniteCounts nf;
  StatsAccumulator acc;
  for_each_finite_block(view, &nf, [&](const double* v, size_t n) { acc.add_block(v, n); });
  const uint64_t count = view.valid() ? static_cast<uint64_t>(view.numel()) : 0;
  return acc.finish(count, nf);
}

}  // namespace tensorscope::tensor
