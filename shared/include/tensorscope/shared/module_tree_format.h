// module_tree_format.h — the payload of a kModuleTree record: which module calls one
// step of a tracked model made, in call order, with the shapes, dtypes and devices of
// their inputs and outputs. The client writes it (format_module_tree), the daemon's
// tree-log sink reads it (parse_module_tree) and never trusts it.
//
// Used by the training process (client) and the daemon's workers. Thread safety: free
// functions over value types.
//
// The payload is UTF-8/ASCII text, at most wire::kMaxModuleTreeBytes:
//   tensorscope-module-tree 1 omitted=<n>\n        n: calls not listed (over kMaxCalls)
//   <thread>\t<call>\t<path>\t<type>\t<inputs>\t<output>\n   one line per module call
// thread  0, 1, ...: the op thread that ran the call, numbered by first call in the step
// call    0, 1, ...: the module's call number on that thread in the step ("#<call>" in
//         stream names)
// path    the module's qualified path in the model ("" for the root, "features.0")
// type    the module's class name ("Linear", "Conv2d"; "" when unknown)
// inputs  tensor descriptions separated by ' ' ("-" when none): the tensors read by the
//         op that opened the call, other than parameters and buffers of the tracked model
// output  a tensor description, "-" when none
// A tensor description is <dtype>[<d0>,<d1>,...]@<device>, e.g. float32[32,784]@cpu,
// int64[]@cuda0 for a 0-d tensor, or "?" for one whose description would be longer
// than kMaxFieldBytes. Fields hold no tab, newline or other control byte.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tensorscope/base/status.h"

namespace tensorscope {

inline constexpr const char* kModuleTreeMagic = "tensorscope-module-tree 1";

struct ModuleTreeCall {
  uint32_t thread = 0;
  uint32_t call = 0;
  std::string path;
  std::string type;
  std::vector<std::string> inputs;
  std::string output;  // "" when none

  bool operator==(const ModuleTreeCall&) const = default;
};

struct ModuleTree {
  static constexpr size_t kMaxCalls = 4096;
  static constexpr size_t kMaxInputs = 16;    // per call; more are not listed
  static constexpr size_t kMaxFieldBytes = 512;

  std::vector<ModuleTreeCall> calls;
  uint64_t omitted = 0;

  bool operator==(const ModuleTree&) const = default;
};

// A tensor description from its parts (dtype name, sizes, device string); "?" when it
// would be longer than kMaxFieldBytes.
std::string describe_tensor(std::string_view dtype, const int64_t* sizes, size_t ndim,
                            std::string_view device);

// Replaces control bytes (tabs, newlines, ...) by ' ' and cuts at kMaxFieldBytes.
std::string module_tree_field(std::string_view text);

// The payload for `tree`. Calls beyond kMaxCalls, inputs beyond kMaxInputs and bytes
// beyond wire::kMaxModuleTreeBytes are left out (counted in `omitted` for calls).
// Fields are cleaned with module_tree_field.
std::string format_module_tree(const ModuleTree& tree);

// Reads a payload. Errors name the line: a missing or unknown header, a line without
// six fields, a number that is not one, a field with control bytes or over
// kMaxFieldBytes, more than kMaxCalls lines or kMaxInputs inputs, a malformed tensor
// description.
StatusOr<ModuleTree> parse_module_tree(std::string_view payload);

}  // namespace tensorscope
