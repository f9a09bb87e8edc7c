// monotonic_clock.h — milliseconds of the steady clock, the daemon's one time base for
// deadlines, heartbeats and retry intervals (never the wall clock, which jumps).
//
// Used by the supervisor, the workers and OutputHealth. Thread safety: a pure function.
#pragma once

#include <chrono>
#include <cstdint>

namespace tensorscope::daemon {

inline int64_t monotonic_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace tensorscope::daemon
