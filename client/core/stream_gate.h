// stream_gate.h — per-stream gating: every_n and max_hz.
//
// Used by the Client on the training thread for every push; a gated-out call costs one
// hash lookup under an uncontended mutex and no copy. Thread safety: all methods are
// thread safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace tensorscope {

// Whether a module track sends step `step`: the multiples of every_n, counted in the
// client's steps, so tracks with the same every_n send the same steps however late they
// were made, and a run resumed with set_step() sends the steps it would have sent.
inline bool is_sent_step(int64_t step, int64_t every_n) {
  return every_n <= 1 || step % every_n == 0;
}

class StreamGate {
 public:
  StreamGate(int64_t every_n, double max_hz);

  struct Admission {
    bool admitted = false;
    uint8_t render_hint = 0;  // the stream's wire::RenderHint
  };

  // Admitted when this call of stream `name` should be pushed: the 1st, (n+1)th, ...
  // call, and (with max_hz) not sooner than 1/max_hz after the stream's last admitted
  // call. Also returns the stream's render hint (one lookup for both).
  Admission admit(const std::string& name);

  void set_render_hint(const std::string& name, uint8_t hint);
  // The hint set for `name` (0 when none); does not count a call.
  uint8_t render_hint(const std::string& name);

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct State {
    int64_t calls = 0;
    uint8_t render_hint = 0;
    std::chrono::steady_clock::time_point last_admitted{};
  };

  const int64_t every_n_;
  const std::chrono::nanoseconds min_interval_;
  std::mutex mutex_;
  std::unordered_map<std::string, State, StringHash, std::equal_to<>> streams_;
};

}  // namespace tensorscope
