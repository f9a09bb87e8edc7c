// torch_tensor_walk.h — finding the tensors of an unpickled PyTorch file: a walk of the
// object graph from its root that names what it passes through (dict keys, indices,
// attributes; the naming rules are torch_file_source.h's).
//
// Internal to tools/compare/ (torch_file_source.cc's listing). Bounded: at most
// kMaxTorchTensors tensors, names of at most kMaxTorchNameBytes (kMaxTorchNameTotalBytes
// together), 200 containers deep, 2^25 steps. Thread safety: one PickleMachine, one
// thread.
#pragma once

#include <string>
#include <vector>

#include "compare/pickle_machine.h"
#include "tensorscope/base/status.h"

namespace tensorscope::compare {

struct FoundTensor {
  std::string name;
  PickleValue value;  // a kObject: a rebuild call (possibly wrapped by _rebuild_from_type)
};

// Every tensor reached from the machine's root, in pickle order (again each time it is
// reached through a shared container), with its name; `file` names the file in errors.
StatusOr<std::vector<FoundTensor>> find_tensors(const PickleMachine& machine, const std::string& file);

}  // namespace tensorscope::compare
