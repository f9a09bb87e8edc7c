// call_stacks.h — a module track's stacked calls (tensorscope/call_stacking.h): per
// stacked stream, the step's calls, each a reference to the call's tensor (with its
// version) held until the step ends, then reduced together, where the tensors live, into
// one calls x features matrix. Past kStackedHoldBytes held per track, a call's row is
// reduced at once.
//
// Used by ModuleTrack (inside the training process). Thread safety: every method is
// thread safe; matrix() and call_row() run torch ops (the caller pauses the op observer).
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "tensorscope/call_stacking.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope {

// One call's row: float32, the mean over the first dimension, flattened, at most
// kStackedRowLength long (averaged down).
at::Tensor call_row(const at::Tensor& tensor);

class CallStacks {
 public:
  struct Stack {
    std::string name;
    wire::TensorKind kind = wire::TensorKind::kActivation;
    int64_t step = 0;
    struct Call {
      int call = 0;
      at::Tensor tensor;  // held (version >= 0) or a reduced row (version -1)
      int64_t version = -1;
    };
    std::vector<Call> calls;
    size_t held_bytes = 0;
    uint64_t dropped = 0;  // calls past kMaxStackedRows
    uint64_t changed = 0;  // held tensors written in place after their call: NaN rows (set by matrix())

    // calls x features in call order; rows of another length than the first are
    // averaged to it.
    at::Tensor matrix();
  };

  explicit CallStacks(CallStacking mode) : separate_(separate_calls(mode)) {}

  bool stacking() const { return separate_ >= 0; }
  // Whether call `call` of a step gets a stream of its own.
  bool alone(int call) const { return separate_ < 0 || call < separate_; }
  // Whether call `call` can be a row of some stack (cheap: no name needed).
  bool may_take(int call) const {
    return separate_ >= 0 && (call >= separate_ || any_many_.load(std::memory_order_relaxed));
  }
  // Whether call `call` of stacked stream `name` is to be stacked.
  bool wants(const std::string& name, int call) const;
  // Stacks call `call`'s `tensor` in `name` at `step`; the stacks of `name` of an earlier
  // step, complete now (there are none when every step change calls take_all()).
  std::vector<Stack> take(const std::string& name, const at::Tensor& tensor, wire::TensorKind kind, int64_t step,
                          int call);
  // Every stack still open (the step ended, or the track).
  std::vector<Stack> take_all();
  // The stacked streams of modules seen with many calls so far.
  std::vector<std::string> seen() const;

 private:
  const int separate_;  // calls with a stream of their own; -1: all (no stacking)
  mutable std::mutex mutex_;
  std::map<std::string, Stack> open_;
  std::set<std::string> many_;
  std::atomic<bool> any_many_{false};  // !many_.empty()
  size_t held_ = 0;
};

}  // namespace tensorscope
