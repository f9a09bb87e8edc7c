// clock.h — the two clocks every part reads: wall-clock time since the Unix epoch (for
// times other processes compare or people read: push times, file and frame times) and the
// monotonic clock (for intervals, rates and deadlines, which must not jump).
//
// Used by the client, the daemon, the live view and the tools. Thread safety: free
// functions without shared state.
#pragma once

#include <chrono>
#include <cstdint>

namespace tensorscope {

inline uint64_t unix_time_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

inline int64_t unix_time_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline int64_t steady_time_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline int64_t steady_time_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace tensorscope
