// cost_meter.cc — see cost_meter.h.
#include "cost_meter.h"

#include <chrono>
#include <cstdio>

#include "tensorscope/base/logging.h"

namespace tensorscope {
namespace {

// This thread's open spans: how deep, and when the outermost began.
thread_local int span_depth = 0;
thread_local int64_t span_start = 0;

}  // namespace

int64_t CostMeter::steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void CostMeter::enter() noexcept {
  if (span_depth++ > 0) return;
  span_start = clock_();
  int64_t unset = -1;
  window_start_.compare_exchange_strong(unset, span_start, std::memory_order_relaxed);
}

void CostMeter::leave() noexcept {
  if (span_depth <= 0 || --span_depth > 0) return;  // (an unmatched leave does nothing)
  const int64_t now = clock_();
  busy_ns_.fetch_add(now - span_start, std::memory_order_relaxed);
  if (now - window_start_.load(std::memory_order_relaxed) >= kWindowNs) end_window(now);
}

void CostMeter::end_window(int64_t now) noexcept {
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread ends it
  const int64_t start = window_start_.load(std::memory_order_relaxed);
  if (now - start < kWindowNs) return;  // (ended meanwhile)
  const double fraction =
      static_cast<double>(busy_ns_.exchange(0, std::memory_order_relaxed)) / static_cast<double>(now - start);
  window_start_.store(now, std::memory_order_relaxed);
  last_fraction_.store(fraction, std::memory_order_relaxed);
  if (fraction <= kWarnFraction || noted_.load(std::memory_order_relaxed)) return;
  std::snprintf(note_, sizeof note_,
                "tracking took %.0f%% of the wall time over %.0f s (the tracks' hooks, summaries and copies): "
                "summarize less often (stats_every), send whole tensors less often (every_n) or track fewer "
                "modules (include/exclude) to lower it",
                100.0 * fraction, static_cast<double>(now - start) / 1e9);
  noted_.store(true, std::memory_order_release);
  try {
    TS_LOG_WARN("tensorscope client: {}", note_);
  } catch (...) {  // (nothing said)
  }
}

std::string CostMeter::note() const { return noted_.load(std::memory_order_acquire) ? note_ : ""; }

CostMeter& own_cost() {
  static CostMeter* meter = new CostMeter();  // (never destroyed: hooks may run at exit)
  return *meter;
}

}  // namespace tensorscope
