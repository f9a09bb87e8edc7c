// push_result.h — what happened to one Client::push, and the client's counters.
//
// Used in the training process. Thread safety: value types.
#pragma once

#include <cstdint>

namespace tensorscope {

enum class PushResult : uint8_t {
  kPushed,        // copied into shared memory; the daemon will receive it
  kGated,         // skipped by every_n / max_hz, or tracking is disabled
  kDroppedFull,   // the ring had no room (daemon slow); nothing was waited for
  kNotConnected,  // no daemon for this session right now
  kRefused,       // bad input: complex or unknown dtype, too large, bad name, transform failed
};

const char* to_string(PushResult result);

struct ClientStats {
  uint64_t pushed = 0;
  uint64_t gated = 0;
  uint64_t dropped_full = 0;
  uint64_t not_connected = 0;
  uint64_t refused = 0;
  uint64_t bytes = 0;          // payload bytes pushed
  bool connected = false;      // a daemon holds our segment right now
  uint64_t connections = 0;    // successful registrations so far (reconnects included)
};

}  // namespace tensorscope
