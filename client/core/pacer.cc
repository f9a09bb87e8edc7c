#include "pacer.h"

#include <algorithm>
#include <cmath>

namespace tensorscope {

std::vector<uint32_t> fair_stride16s(const std::vector<uint64_t>& offered, uint32_t stride16) {
  stride16 = std::min(stride16, Pacer::kMaxStride16);
  std::vector<uint32_t> strides(offered.size(), Pacer::kOne);
  if (stride16 <= Pacer::kOne || offered.empty()) return strides;
  double total = 0;
  for (uint64_t o : offered) total += static_cast<double>(o);
  if (total <= 0) return std::vector<uint32_t>(offered.size(), stride16);  // no calls seen: one stride
  // Water-filling, least offered first: the level L under which a stream sends every call.
  std::vector<uint64_t> sorted(offered);
  std::sort(sorted.begin(), sorted.end());
  double capacity = total * Pacer::kOne / stride16, above = total;
  double level = 0;
  size_t left = sorted.size();
  for (uint64_t o : sorted) {
    level = capacity / static_cast<double>(left);
    if (static_cast<double>(o) > level) break;
    capacity -= static_cast<double>(o);
    above -= static_cast<double>(o);
    --left;
  }
  if (left == 0) return strides;  // everyone fits
  // The streams above the level share what is left at one stride (the pacer's own when
  // none is below it).
  const double shared = capacity > 0 ? std::round(Pacer::kOne * above / capacity) : Pacer::kMaxStride16;
  const auto stride = static_cast<uint32_t>(
      std::clamp(shared, static_cast<double>(Pacer::kOne), static_cast<double>(Pacer::kMaxStride16)));
  for (size_t i = 0; i < offered.size(); ++i) {
    if (static_cast<double>(offered[i]) > level) strides[i] = stride;
  }
  return strides;
}

void Pacer::use_connection(uint64_t serial) {
  if (serial_.load(std::memory_order_relaxed) == serial) return;
  std::lock_guard<std::mutex> lock(mutex_);
  serial_.store(serial, std::memory_order_relaxed);
  stride16_.store(kOne, std::memory_order_relaxed);
  window_start_ms_ = -1;
  read_per_ms_ = -1;
  last_raise_ms_ = last_lower_ms_ = INT64_MIN / 2;
}

void Pacer::observe(int64_t backlog_ms, double fill, bool full, uint64_t read, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t offers = offers_.load(std::memory_order_relaxed);
  if (window_start_ms_ < 0) {
    window_start_ms_ = now_ms;
    window_offers_ = offers;
    window_read_ = read;
    window_min_backlog_ms_ = window_max_backlog_ms_ = backlog_ms;
    window_min_fill_ = window_max_fill_ = fill;
    window_full_ = full;
    return;
  }
  window_min_backlog_ms_ = std::min(window_min_backlog_ms_, backlog_ms);
  window_max_backlog_ms_ = std::max(window_max_backlog_ms_, backlog_ms);
  window_min_fill_ = std::min(window_min_fill_, fill);
  window_max_fill_ = std::max(window_max_fill_, fill);
  window_full_ = window_full_ || full;
  const int64_t length = now_ms - window_start_ms_;
  if (length < kWindowMs && !(full && length >= kFullGapMs)) return;

  const uint32_t stride = stride16_.load(std::memory_order_relaxed);
  const double read_now = static_cast<double>(read - window_read_);
  const double recent = read_per_ms_ < 0 ? read_now / static_cast<double>(std::max<int64_t>(1, length)) : read_per_ms_;
  read_per_ms_ =
      (1 - kRateWeight) * recent + kRateWeight * read_now / static_cast<double>(std::max<int64_t>(1, length));
  if (window_full_ || window_min_fill_ >= kBehindFill || window_min_backlog_ms_ > kBehindMs) {
    const double offered = static_cast<double>(offers - window_offers_);
    const double taken = std::max({1.0, read_now, recent * static_cast<double>(length)});
    const double fits = std::ceil(kOne * kMargin * offered / taken - 1e-9);
    uint32_t target = static_cast<uint32_t>(std::min<double>(kMaxStride16, std::max<double>(kOne, fits)));
    if (read_now == 0 && recent * static_cast<double>(length) < 1) {  // a stall: no rate to fit
      // At most a doubling per kWindowMs, however often a full ring closes a window: a
      // daemon still starting (600 ms here) must not leave the run at 1 in 256.
      target = now_ms - last_raise_ms_ >= kWindowMs ? std::min(target, 2 * stride) : stride;
    }
    if (target > stride) {
      stride16_.store(target, std::memory_order_relaxed);
      last_raise_ms_ = now_ms;
    }
  } else if (stride > kOne && now_ms - last_raise_ms_ >= kHoldMs) {
    if (window_max_fill_ < kIdleFill && window_max_backlog_ms_ < kIdleBacklogMs) {  // waiting for work
      stride16_.store(std::max(kOne, stride / 2), std::memory_order_relaxed);
      last_lower_ms_ = now_ms;
    } else if (window_min_backlog_ms_ < kLowBacklogMs && now_ms - last_lower_ms_ >= kLowerGapMs) {
      stride16_.store(std::max(kOne, stride - std::max<uint32_t>(1, stride / 4)), std::memory_order_relaxed);
      last_lower_ms_ = now_ms;
    }
  }
  // The next window: its own samples decide (this one's belonged to the last).
  window_start_ms_ = now_ms;
  window_offers_ = offers;
  window_read_ = read;
  window_min_backlog_ms_ = INT64_MAX;
  window_max_backlog_ms_ = 0;
  window_min_fill_ = 2.0;
  window_max_fill_ = 0;
  window_full_ = false;
}

}  // namespace tensorscope
