// torch_pickle_calls.h — what the pickled calls of a PyTorch file are: the
// torch._utils rebuild calls that make tensors, a call's arguments, and the clipping of
// untrusted text quoted in messages.
//
// Internal to tools/compare/ (the tensor walk and the tensor describer of
// torch_file_source.cc). Thread safety: pure functions over a PickleMachine read by one
// thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "compare/pickle_machine.h"

namespace tensorscope::compare {

// Longest piece of a key, location or type quoted in a message.
inline constexpr size_t kMaxQuotedBytes = 64;

// `callable` is the global torch._utils.<name>.
bool is_torch_utils(const PickleMachine& m, PickleValue callable, const char* name);
// A call that rebuilds a tensor from a storage.
bool is_tensor_rebuild(const PickleMachine& m, PickleValue callable);
// Any torch._utils._rebuild_* call that makes a tensor (supported or not), except the
// wrappers handled by the walk.
bool is_other_tensor_call(const PickleMachine& m, PickleValue callable);
// args[i] of a kObject, or kNone.
PickleValue arg_of(const PickleMachine& m, const PickleObject& o, size_t i);
// `text`, or its first kMaxQuotedBytes bytes and "...".
std::string clip(std::string_view text);

}  // namespace tensorscope::compare
