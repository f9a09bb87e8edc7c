// track_policy.h — the bookkeeping of module tracks, once for both clients: which steps a
// track sends and summarizes, what becomes of a module's k-th call in a step (a stream of
// its own, a row of the module's stacked calls, or refused), the stacked calls' hold
// budget and row limit, and the words of every refusal. No tensors: the C++ tracks
// (client/src/module_track.cc, call_stacks.cc) and, through the extension, the Python
// tracks (python/tensorscope/_tracks.py, _call_stacks.py) hold the tensors and ask here.
//
// The front ends differ only where their frameworks do: C++ sees a call as the ops of a
// module and counts calls per op thread; Python sees forward hooks and counts them per
// stream, and before the first next_step() keeps two readings of the steps
// (_step_zero.py).
// Thread safety: the functions are pure; StackLedger's methods are thread safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tensorscope/call_stacking.h"

namespace tensorscope {

// Separate calls of one module in one step beyond this are refused (counted once per
// call); stacked calls are limited by kMaxStackedRows instead.
inline constexpr int kMaxCallsPerStep = 1024;

// Whether step `step` sends whole tensors (a multiple of every_n, or the client captures
// it after a NaN) and whether it summarizes them (a multiple of stats_every; 0: never).
struct StepGates {
  bool full = false;
  bool summarize = false;
};
StepGates step_gates(int64_t step, int64_t every_n, int64_t stats_every, bool capturing);

// What becomes of call `call` (0 first) of a module in a step, under `mode`, on a sent
// step. `stacks` says whether the module's calls are stacked already (it was seen with
// many calls: StackLedger::wants).
struct CallRoute {
  bool own_stream = false;  // sent (and summarized) as "<stream>" or "<stream>#<call>"
  bool stack_row = false;   // a row of "<stream>#calls"
  bool refused() const { return !own_stream && !stack_row; }
};
CallRoute route_call(CallStacking mode, int call, bool stacks);

// The stacked calls of one track: per stacked stream, the step's rows. A row is held
// (the call's tensor kept, reduced with the others when the step ends) while the track's
// held bytes stay within kStackedHoldBytes, else reduced at once; past kMaxStackedRows a
// call is dropped and counted.
class StackLedger {
 public:
  enum class Row : uint8_t { kHold, kReduceNow, kDrop };
  // A stack complete: its step ended.
  struct Closed {
    std::string name;
    int64_t step = 0;
    size_t rows = 0;       // rows kept
    uint64_t dropped = 0;  // calls past kMaxStackedRows
  };
  struct Taken {
    Row row = Row::kDrop;
    std::vector<Closed> closed;  // stacks of `name` of an earlier step, complete now
  };

  explicit StackLedger(CallStacking mode) : separate_(separate_calls(mode)) {}

  bool stacking() const { return separate_ >= 0; }
  // Whether call `call` of a step gets a stream of its own (before kMaxCallsPerStep).
  bool alone(int call) const { return separate_ < 0 || call < separate_; }
  // Whether call `call` can be a row of some stack (cheap: no name needed).
  bool may_take(int call) const {
    return separate_ >= 0 && (call >= separate_ || any_many_.load(std::memory_order_relaxed));
  }
  // Whether call `call` of stacked stream `name` is to be stacked.
  bool wants(const std::string& name, int call) const;
  // Call `call` of stacked stream `name` at `step`, of `bytes` bytes: what to do with its
  // row. Its stacks of an earlier step are closed (there are none when every step change
  // calls take_all()).
  Taken take(const std::string& name, int64_t step, int call, size_t bytes);
  // Every stack still open (the step ended, or the track).
  std::vector<Closed> take_all();
  // The stacked streams of modules seen with many calls so far, in name order.
  std::vector<std::string> seen() const;

 private:
  struct Open {
    int64_t step = 0;
    size_t rows = 0;
    size_t held_bytes = 0;
    uint64_t dropped = 0;
  };
  static Closed close(const std::string& name, const Open& open) { return {name, open.step, open.rows, open.dropped}; }

  const int separate_;  // calls with a stream of their own; -1: all (no stacking)
  mutable std::mutex mutex_;
  std::map<std::string, Open> open_;
  std::set<std::string> many_;
  std::atomic<bool> any_many_{false};  // !many_.empty()
  size_t held_ = 0;
};

// Every reason a track refuses a value, with its words ("{0}", "{1}": the counts).
// clang-format off
#define TENSORSCOPE_TRACK_REFUSALS(X)                                                       \
  X(kOverCalls, over_calls, "more calls of this module in one step than are tracked")       \
  X(kStackDropped, stack_dropped, "{0} calls past the {1} stacked in one step")             \
  X(kStackChanged, stack_changed,                                                           \
    "{0} calls' tensors were written in place after the call (their rows are NaN)")         \
  X(kStackFailed, stack_failed, "stacking the calls failed: {0}")                           \
  X(kNoSummary, no_summary, "no summary: {0}")                                               \
  X(kSummaryNotKept, summary_not_kept, "summary not kept: too many waiting for their GPU copies")   \
  X(kWrittenBeforeSummary, written_before_summary,                                          \
    "written in place before its gathered summary was taken: summarized at once from now on") \
  X(kTrackingFailed, tracking_failed, "tracking failed: {0}")
// clang-format on

enum class TrackRefusal : uint8_t {
#define TENSORSCOPE_TRACK_REFUSAL_VALUE(value, name, words) value,
  TENSORSCOPE_TRACK_REFUSALS(TENSORSCOPE_TRACK_REFUSAL_VALUE)
#undef TENSORSCOPE_TRACK_REFUSAL_VALUE
};

struct TrackRefusalWords {
  std::string_view name;
  std::string_view words;
};
inline constexpr TrackRefusalWords kTrackRefusals[] = {
#define TENSORSCOPE_TRACK_REFUSAL_WORDS(value, name, words) {#name, words},
    TENSORSCOPE_TRACK_REFUSALS(TENSORSCOPE_TRACK_REFUSAL_WORDS)
#undef TENSORSCOPE_TRACK_REFUSAL_WORDS
};

// The words of `why`, "{0}" and "{1}" replaced by `first` and `second`.
std::string track_refusal(TrackRefusal why, std::string_view first = {}, std::string_view second = {});

}  // namespace tensorscope
