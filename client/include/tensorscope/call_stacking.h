// call_stacking.h — what a module track does with a module called many times a step (an
// RNN cell stepped over a thousand timesteps, a block applied per token, a closure that
// runs the model twenty times a step): the vocabulary, for C++ and the Python package.
//
//   kAuto (default): the first kSeparateCalls calls of a step keep their own streams
//     ("<stream>", "<stream>#1", ...); once a module is called more often, each of its
//     calls in a step also becomes one row of a calls x features matrix, sent when the
//     step ends as "<stream>#calls" (drawn as a heatmap). Calls past kSeparateCalls are
//     only in it. A module's first step with many calls starts its matrix at call
//     kSeparateCalls; from its next step on, every call is in it.
//   kStacked: every call only in "<stream>#calls".
//   kSeparate: a stream per call, as many as the track allows.
// A row is the call's tensor averaged over its first (batch) dimension and flattened, at
// most kStackedRowLength features (averaged down). Gradients at the outputs stack the
// same way ("<stream>#calls.grad").
// Thread safety: constants.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tensorscope/shared/stacked_calls.h"  // kStackedCallsSuffix: "#calls"

namespace tensorscope {

enum class CallStacking : uint8_t { kAuto = 0, kStacked = 1, kSeparate = 2 };

inline constexpr std::array<const char*, 3> kCallStackingNames = {"auto", "stacked", "separate"};
inline constexpr int kSeparateCalls = 4;                // kAuto: calls of a step with streams of their own
inline constexpr int64_t kStackedRowLength = 1024;      // features per row, at most
inline constexpr size_t kMaxStackedRows = 4096;         // calls stacked per step; more are counted refused
inline constexpr size_t kStackedHoldBytes = 32u << 20;  // per track: call tensors held to reduce at the step's end

inline const char* to_string(CallStacking mode) { return kCallStackingNames[static_cast<size_t>(mode)]; }

// Calls of a step that get a stream of their own under `mode` (-1: all of them).
inline int separate_calls(CallStacking mode) {
  return mode == CallStacking::kAuto ? kSeparateCalls : mode == CallStacking::kStacked ? 0 : -1;
}

}  // namespace tensorscope
