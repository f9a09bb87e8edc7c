// module_tree_log.h — ModuleTreeLog: the module calls of the current step of one
// ModuleTrack, in call order, with the shapes, dtypes and devices of their inputs and
// outputs; sent as one kModuleTree record per step (shared/module_tree_format.h).
//
// Used inside the training process by ModuleTrack, only on the steps its op observer
// listens to. Thread safety: a ModuleTreeLog is guarded by its track's mutex; the
// input stash (stash_inputs / take_inputs) is thread-local and lock-free.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>

#include "tensorscope/shared/module_tree_format.h"

namespace tensorscope {

class ModuleTreeLog {
 public:
  // "float32[8,4]@cpu".
  static std::string describe(const at::Tensor& tensor);

  // Keeps the input descriptions of an op until its end (same thread); returns a
  // nonzero ticket for take_inputs. Each track stashes for each op it opens a call
  // with; a thread keeps at most kMaxStashed stashes not taken yet (an op whose end
  // never came), the oldest are dropped: their tickets take nothing.
  static constexpr size_t kMaxStashed = 256;
  static uint32_t stash_inputs(std::vector<std::string> inputs);
  static std::vector<std::string> take_inputs(uint32_t ticket);

  // The step the listed calls belong to; -1 when none are listed.
  int64_t step() const { return step_; }
  bool empty() const { return tree_.calls.empty() && tree_.omitted == 0; }

  // A call begins (in step `step`, on op thread `thread`); returns its index for
  // set_output, or -1 when the list is full (the call is counted as omitted). A call
  // of another step than the listed ones must come after take() of those.
  int begin(int64_t step, uint64_t thread, int call, const std::string& path, const std::string& type,
            std::vector<std::string> inputs, const at::Tensor& output);
  void set_output(int index, const at::Tensor& output);

  // The listed calls as a payload, and an empty list.
  std::string take();

 private:
  ModuleTree tree_;
  int64_t step_ = -1;
  std::unordered_map<uint64_t, uint32_t> threads_;  // op thread id -> number in this step
};

}  // namespace tensorscope
