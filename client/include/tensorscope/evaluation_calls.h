// evaluation_calls.h — what a module track does with an evaluation forward (validation
// between steps, inference, a metric computed under no_grad): the vocabulary, for C++
// and the Python package.
//
//   kSkip (default): evaluation forwards are not tracked. They take none of the step's
//     call numbers ("<stream>#k"), so the next training forward keeps the step's first
//     call, its summaries and its gradients, and the overview gets no rows of them.
//   kTrack: they are tracked as training forwards are: calls of the step in progress
//     (a model that is only ever evaluated: an inference program).
// An evaluation forward: in C++, one run with gradients off (torch::NoGradGuard,
// c10::InferenceMode); in Python also one of a model in eval() mode.
// Thread safety: constants.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace tensorscope {

enum class EvaluationCalls : uint8_t { kSkip = 0, kTrack = 1 };

inline constexpr std::array<const char*, 2> kEvaluationCallsNames = {"skip", "track"};
static_assert(kEvaluationCallsNames.size() == static_cast<size_t>(EvaluationCalls::kTrack) + 1,
              "every EvaluationCalls value has a name");

inline const char* to_string(EvaluationCalls mode) { return kEvaluationCallsNames[static_cast<size_t>(mode)]; }

}  // namespace tensorscope
