// stream_gate.h — per-stream gating: every_n, max_hz and pacing (pacer.h).
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
inline bool is_sent_step(int64_t step, int64_t every_n) { return every_n <= 1 || step % every_n == 0; }

class StreamGate {
 public:
  StreamGate(int64_t every_n, double max_hz);

  struct Admission {
    bool admitted = false;
    uint8_t render_hint = 0;  // the stream's wire::RenderHint
    bool paced = false;       // not admitted by pacing alone (the daemon is behind)
  };

  // Admitted when this call of stream `name` should be pushed: the 1st, (n+1)th, ...
  // call, and (with max_hz) not sooner than 1/max_hz after the stream's last admitted
  // call. Also returns the stream's render hint (one lookup for both).
  // With `stride16` > 16 (Pacer: the daemon is behind) only 16 in `stride16` of all the
  // calls that pass are admitted (one in 2.5 for 40), shared fairly among the streams
  // (fair_stride16s over the calls each offered lately: a stream called less often than
  // its share sends every call), at a phase set by the order in which streams were first
  // seen, so that the admitted calls of all streams spread evenly over the steps.
  Admission admit(const std::string& name, uint32_t stride16 = 16);
  // A call its track already decided to send: pacing alone, and the render hint.
  Admission pace(const std::string& name, uint32_t stride16);

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
    uint64_t offered = 0;    // calls that reached pacing
    uint64_t recent = 0;     // of those, lately, in sixteenths (halved at each refit): its demand
    uint32_t stride16 = 16;  // its fair share of the pacer's stride (refit)
    uint32_t ordinal = 0;    // order of first sight: the stream's pacing phase
    uint8_t render_hint = 0;
    std::chrono::steady_clock::time_point last_admitted{};
  };
  State& state_of(const std::string& name);  // mutex_ held
  // Whether pacing at `stride16` holds this call of `state` back: of the calls k, those
  // where (k + ordinal) * 16 mod s < 16 go, 16 in every s, s the stream's fair stride.
  bool paced_out(State& state, uint32_t stride16);  // mutex_ held
  // The streams' strides for the pacer's `stride16`, from their recent calls.
  void refit(uint32_t stride16);  // mutex_ held

  const int64_t every_n_;
  const std::chrono::nanoseconds min_interval_;
  std::mutex mutex_;
  std::unordered_map<std::string, State, StringHash, std::equal_to<>> streams_;
  uint32_t fitted_for_ = 16;  // the pacer's stride the streams' strides were fitted to
  uint64_t recent_ = 0;       // calls offered since the last refit
};

}  // namespace tensorscope
