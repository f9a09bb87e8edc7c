// cost_meter.h — what tracking costs the training process, measured by the client itself:
// the time the process's threads spend inside tensorscope (the tracks' hooks and their
// summaries and copies, next_step, push) against the wall time, per window of kWindowNs.
// The first window over kWarnFraction is said once, in the log and in stats()
// (own_time_note), with what lowers it: a configuration that cannot keep the step cheap
// (thousands of tensors summarized every step of a tiny model) says so rather than
// silently slowing training. stats() also gives the last window's share (own_time).
//
// What a span misses: work queued on a GPU by a hook runs later, on the device (its host
// time, the launches, is in the span); the time a hook keeps a tensor alive.
//
// One meter per process (own_cost()): several clients in one process share it, their
// hooks being that process's time. Used by both clients' hooks and entry points and by
// ClientCore::stats. Thread safety: all methods are thread safe; a span is two clock
// reads and, outermost, one atomic add (a window's end takes a lock, never waited for).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace tensorscope {

class CostMeter {
 public:
  static constexpr int64_t kWindowNs = 5'000'000'000;  // 5 s of wall time
  static constexpr double kWarnFraction = 0.05;

  using Clock = int64_t (*)();  // nanoseconds, monotonic
  static int64_t steady_ns();

  explicit CostMeter(Clock clock = &steady_ns) : clock_(clock) {}

  // A span of tensorscope's work on this thread, from enter() to the matching leave().
  // Spans within one (a native hook calling the track's Python hook) are part of it, of
  // whichever meter: a thread's nesting is counted once for all meters (tests make their
  // own meters, never nested in the process's).
  void enter() noexcept;
  void leave() noexcept;

  // The share of the wall time spent in tensorscope over the last complete window: its
  // spans' time / its length (-1 before the first window ends).
  double last_fraction() const noexcept { return last_fraction_.load(std::memory_order_relaxed); }
  // "" until a window went over kWarnFraction; from then on what was said of it.
  std::string note() const;

 private:
  void end_window(int64_t now) noexcept;

  const Clock clock_;
  std::atomic<int64_t> busy_ns_{0};        // of the window now
  std::atomic<int64_t> window_start_{-1};  // -1: no span yet
  std::atomic<double> last_fraction_{-1};
  std::mutex mutex_;  // ends a window (only tried: never waited for, a forked child included)
  char note_[320] = {};
  std::atomic<bool> noted_{false};  // note_ is written, once
};

// The process's meter.
CostMeter& own_cost();

// A span of own_cost() for a scope (never throws).
class CostSpan {
 public:
  CostSpan() noexcept { own_cost().enter(); }
  ~CostSpan() { own_cost().leave(); }
  CostSpan(const CostSpan&) = delete;
  CostSpan& operator=(const CostSpan&) = delete;
};

}  // namespace tensorscope
