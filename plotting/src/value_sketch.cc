// value_sketch.cc — the bucket key of a value, quantiles from bucket counts.
#include "tensorscope/plotting/value_sketch.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>

#include "lane_counts.h"
#include "tensorscope/tensor/element_blocks.h"

namespace tensorscope::plotting {
namespace {

constexpr int kKeyShift = 20;  // 32-bit key, 12-bit bucket
constexpr double kBucketKeys = 1 << kKeyShift;
constexpr uint32_t kSignBit = 0x80000000u;
constexpr int kZeroBucket = ValueSketch::kBuckets / 2;  // +0 (and -0 at kZeroBucket - 1)

constexpr double kFloatMax = FLT_MAX;

double value_of_key(uint32_t key) {
  const uint32_t bits = (key & kSignBit) != 0 ? key & ~kSignBit : ~key;
  return static_cast<double>(std::bit_cast<float>(bits));
}

// The key at fraction `frac` of bucket `b`.
uint32_t key_inside(int b, double frac) {
  const double k = static_cast<double>(b) * kBucketKeys + std::clamp(frac, 0.0, 1.0) * (kBucketKeys - 1);
  return static_cast<uint32_t>(std::min(k, 4294967295.0));
}

// Index and in-bucket fraction of the value of rank `rank` (0-based, fractional) among
// `counts` summing to at least rank + 1.
template <size_t N>
std::pair<int, double> locate(const std::array<uint64_t, N>& counts, double rank) {
  double before = 0;
  for (size_t b = 0; b < N; ++b) {
    const double c = static_cast<double>(counts[b]);
    if (c > 0 && rank < before + c) return {static_cast<int>(b), (rank - before + 0.5) / c};
    before += c;
  }
  for (size_t b = N; b-- > 0;) {
    if (counts[b] > 0) return {static_cast<int>(b), 1.0};
  }
  return {0, 0.0};
}

}  // namespace

void ValueSketch::add_block(const double* v, size_t n) {
  if (n == 0) return;
  double mn = count_ == 0 ? v[0] : min_, mx = count_ == 0 ? v[0] : max_;
  uint64_t zeros = 0;
  // Bucket indices first (a vectorisable loop), then the increments over four lanes so
  // that neighbouring values in one bucket do not wait on each other's stores.
  constexpr size_t kChunk = 256;
  uint16_t slots[kChunk];
  for (size_t start = 0; start < n; start += kChunk) {
    const size_t m = std::min(n - start, kChunk);
    const double* x = v + start;
    for (size_t i = 0; i < m; ++i) {
      const double d = x[i];
      const double c = d < -kFloatMax ? -kFloatMax : (d > kFloatMax ? kFloatMax : d);
      const uint32_t bits = std::bit_cast<uint32_t>(static_cast<float>(c));
      // Sign-magnitude order: negative values flip every bit, others set the sign bit.
      const uint32_t key = bits ^ (static_cast<uint32_t>(static_cast<int32_t>(bits) >> 31) | kSignBit);
      slots[i] = static_cast<uint16_t>(key >> kKeyShift);
      mn = d < mn ? d : mn;
      mx = d > mx ? d : mx;
      zeros += d == 0.0 ? 1 : 0;
    }
    internal::count_slots(slots, m, lanes_.data(), kBuckets);
  }
  min_ = mn;
  max_ = mx;
  zeros_ += zeros;
  count_ += n;
  merged_ = false;
}

const std::array<uint64_t, ValueSketch::kBuckets>& ValueSketch::buckets() const {
  if (!merged_) {
    for (size_t b = 0; b < kBuckets; ++b) {
      uint64_t sum = 0;
      for (int lane = 0; lane < internal::kCountLanes; ++lane) sum += lanes_[lane * kBuckets + b];
      buckets_[b] = sum;
    }
    merged_ = true;
  }
  return buckets_;
}

double ValueSketch::quantile(double p) const {
  if (count_ == 0) return std::numeric_limits<double>::quiet_NaN();
  if (!(p > 0)) return min_;
  if (p >= 1) return max_;
  const auto [b, frac] = locate(buckets(), p * static_cast<double>(count_ - 1));
  return std::clamp(value_of_key(key_inside(b, frac)), min_, max_);
}

double ValueSketch::nonzero_abs_quantile(double p) const {
  if (count_ <= zeros_) return std::numeric_limits<double>::quiet_NaN();
  // Fold the negative buckets onto the positive ones: -x lands in kZeroBucket - 1 - h
  // where x lands in kZeroBucket + h.
  const std::array<uint64_t, kBuckets>& all = buckets();
  std::array<uint64_t, kBuckets / 2> magnitude{};
  for (int h = 0; h < kBuckets / 2; ++h) {
    magnitude[static_cast<size_t>(h)] =
        all[static_cast<size_t>(kZeroBucket + h)] + all[static_cast<size_t>(kZeroBucket - 1 - h)];
  }
  magnitude[0] -= zeros_;
  const uint64_t n = count_ - zeros_;
  const double largest = std::max(std::abs(min_), std::abs(max_));
  const double rank = std::clamp(p, 0.0, 1.0) * static_cast<double>(n - 1);
  const auto [h, frac] = locate(magnitude, rank);
  return std::clamp(value_of_key(key_inside(kZeroBucket + h, frac)), 0.0, largest);
}

ValueSketch sketch_values(const tensor::TensorView& view) {
  ValueSketch sketch;
  tensor::NonFiniteCounts nf;
  tensor::for_each_finite_block(view, &nf, [&](const double* v, size_t n) { sketch.add_block(v, n); });
  return sketch;
}

}  // namespace tensorscope::plotting
