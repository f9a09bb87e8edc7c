// module_index.h — the module tree of a libtorch or TorchScript model, flattened: each
// module's qualified path, its own parameters and buffers, and its place in the tree.
//
// Used inside the training process when a track is created (not on the hot path).
// Thread safety: free functions; the model must not be restructured concurrently.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace torch::nn {
class Module;
}  // namespace torch::nn
namespace torch::jit {
struct Module;
}  // namespace torch::jit

namespace tensorscope {

struct ModuleEntry {
  std::string path;                                        // "" for the root, "features.0", ...
  std::string type;                                        // class name: "Linear", "Net", ...
  std::vector<std::pair<std::string, at::Tensor>> params;  // its own parameters
  std::vector<at::Tensor> buffers;                         // its own buffers
  std::vector<int> chain;                                  // itself, then every ancestor, innermost first (indices)
  bool composite = false;                                  // some descendant owns parameters or buffers
  bool owns_tensors() const { return !params.empty() || !buffers.empty(); }
};

// Entries in named_modules() order, with chain and composite filled in.
std::vector<ModuleEntry> index_modules(const torch::nn::Module& module);
std::vector<ModuleEntry> index_modules(const torch::jit::Module& module);

}  // namespace tensorscope
