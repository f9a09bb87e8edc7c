// call_stacks.h — a module track's stacked calls (tensorscope/call_stacking.h): per
// stacked stream, the step's calls, each a reference to the call's tensor (with its
// version) held until the step ends, then reduced together, where the tensors live, into
// one calls x features matrix. Which rows are held, reduced at once or dropped is the
// shared policy's (StackLedger, client/core/track_policy.h).
//
// Used by ModuleTrack (inside the training process). Thread safety: every method is
// thread safe; matrix() and call_row() run torch ops (the caller pauses the op observer).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tensorscope/call_stacking.h"
#include "track_policy.h"
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
    uint64_t dropped = 0;  // calls past kMaxStackedRows
    uint64_t changed = 0;  // held tensors written in place after their call: NaN rows (set by matrix())

    // calls x features in call order; rows of another length than the first are
    // averaged to it.
    at::Tensor matrix();
  };

  explicit CallStacks(CallStacking mode) : ledger_(mode) {}

  bool stacking() const { return ledger_.stacking(); }
  bool alone(int call) const { return ledger_.alone(call); }
  bool may_take(int call) const { return ledger_.may_take(call); }
  bool wants(const std::string& name, int call) const { return ledger_.wants(name, call); }
  // Stacks call `call`'s `tensor` in `name` at `step` as the ledger says; the stacks of
  // `name` of an earlier step, complete now (there are none when every step change calls
  // take_all()).
  std::vector<Stack> take(const std::string& name, const at::Tensor& tensor, wire::TensorKind kind, int64_t step,
                          int call);
  // Every stack still open (the step ended, or the track).
  std::vector<Stack> take_all();
  std::vector<std::string> seen() const { return ledger_.seen(); }

 private:
  // Under mutex_: the rows of `closed`, moved out of open_.
  std::vector<Stack> collect(const std::vector<StackLedger::Closed>& closed);

  StackLedger ledger_;  // which rows are held, reduced or dropped (track_policy.h)
  std::mutex mutex_;
  std::map<std::string, Stack> open_;
};

}  // namespace tensorscope
