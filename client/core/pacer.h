// pacer.h — how much of what its gates admit a producer sends while the daemon falls
// behind: every stream at the same reduced rate, one call in `stride` (a fraction, in
// sixteenths: 2.5 sends 2 calls in 5), instead of the ring
// filling up, the first tensors of each step taking all of it, and copies made only to be
// dropped.
//
// It watches the ring at each tensor push: the age of the oldest record the daemon has
// not read yet (the backlog), how full the ring is, whether it was full, and how many
// records the daemon has read. Per window of kWindowMs (cut short, at most every
// kFullGapMs, by a full ring):
//   - behind (a full ring, or all window long a ring kBehindFill full or a backlog older
//     than kBehindMs): the stride becomes at least kMargin x the calls offered / the
//     records the daemon takes in that time, so what is sent fits what the daemon takes
//     (in one step, not by doubling). What it takes is the larger of what it read in the
//     window and its recent rate (an average over windows, kRateWeight the newest's): a
//     daemon that stalls for a moment (finalizing a video of every stream at once) does
//     not throttle the training for seconds after. A window in which it read nothing, with
//     no recent rate either (a daemon that has not read yet, or stalled since it last
//     read: starting a stream's work, a disk that blocks), says nothing of its rate: the
//     stride at most doubles, and at most once per kWindowMs (a full ring closes a window
//     every kFullGapMs). A burst the ring can hold, or a daemon busy for a moment,
//     is not behind: the ring is there to absorb those.
//   - nearly caught up (the backlog fell under kLowBacklogMs), kHoldMs after the last raise
//     and kLowerGapMs after the last change down: the stride shrinks by a quarter (at
//     least 1/16), to find out whether the daemon now takes more (a daemon slow only
//     while it opened its videos is back to full use within seconds). Lowering before
//     the ring is empty keeps work queued for the daemon: it draws as many frames as it
//     would with every call sent, without the copies a full ring drops.
//   - waiting for work (all window long the ring under kIdleFill and no record older than
//     kIdleBacklogMs: read as soon as written), kHoldMs after the last raise: the stride
//     halves every window. A daemon that stalled once is back to every
//     call within seconds, not after a minute of 1-in-1000 (what it cannot take fills
//     the ring again, and the next window fits the stride to it).
// A new connection starts over at 1 (no pacing).
//
// The stride is shared fairly (fair_stride16s): the daemon's capacity (the calls offered
// / stride) goes first to the streams called least often, so that a scalar pushed every
// step does not thin the snapshots of layers sent every 100 steps: streams called less
// often than their fair share send every call, the others share the rest (the same calls
// in all as one stride for every stream).
//
// Used by ClientCore (stage: observe; the gates: offer, stride). Thread safety: all
// methods are thread safe; stride() and offer() are single relaxed atomics.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace tensorscope {

// Each stream's stride (in sixteenths) when `offered[i]` calls of stream i came in a
// while and the daemon takes one in stride16 / 16 of all of them. Water-filling: the
// streams offering at most the level L (where they and L for each of the others add up to
// what the daemon takes) send every call; the others share the rest at one stride
// (stride16 itself when no stream is below L). 16 for every stream when stride16 <= 16.
std::vector<uint32_t> fair_stride16s(const std::vector<uint64_t>& offered, uint32_t stride16);

class Pacer {
 public:
  static constexpr uint32_t kOne = 16;  // stride16() of no pacing: strides are in sixteenths
  static constexpr uint32_t kMaxStride16 = 4096 * kOne;
  static constexpr int64_t kWindowMs = 200;
  static constexpr int64_t kFullGapMs = 20;
  static constexpr int64_t kBehindMs = 2000;
  static constexpr double kBehindFill = 0.75;
  static constexpr int64_t kLowBacklogMs = 500;
  static constexpr double kRateWeight = 0.3;
  static constexpr int64_t kHoldMs = 1000;
  static constexpr int64_t kLowerGapMs = 500;
  static constexpr double kIdleFill = 0.05;
  static constexpr int64_t kIdleBacklogMs = 50;
  static constexpr double kMargin = 1.05;  // sent at most 1/kMargin of what the daemon read

  // One call in stride16() / 16 of each stream is sent (16: every call the gates admit).
  uint32_t stride16() const { return stride16_.load(std::memory_order_relaxed); }
  // A tensor call reached pacing (sent or held back): the demand.
  void offer() { offers_.fetch_add(1, std::memory_order_relaxed); }

  // Connection `serial` is the one pushes go to now: a new one starts over at stride 1.
  void use_connection(uint64_t serial);
  // A tensor push to an attached daemon: the age of the oldest unread record then (0:
  // none), how full the ring is (0..1), whether it was full, and the records the daemon
  // has read so far.
  void observe(int64_t backlog_ms, double fill, bool full, uint64_t read, int64_t now_ms);

 private:
  std::atomic<uint32_t> stride16_{kOne};
  std::atomic<uint64_t> offers_{0};
  std::atomic<uint64_t> serial_{0};
  std::mutex mutex_;
  int64_t window_start_ms_ = -1;
  uint64_t window_offers_ = 0, window_read_ = 0;
  int64_t window_min_backlog_ms_ = 0, window_max_backlog_ms_ = 0;
  double window_min_fill_ = 0, window_max_fill_ = 0;
  bool window_full_ = false;
  double read_per_ms_ = -1;  // the daemon's recent rate (records per ms; < 0: none yet)
  int64_t last_raise_ms_ = INT64_MIN / 2;
  int64_t last_lower_ms_ = INT64_MIN / 2;
};

}  // namespace tensorscope
