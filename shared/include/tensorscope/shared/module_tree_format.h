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
//
// Version 2 (header "tensorscope-module-tree 2 omitted=<n>") is version 1 with a seventh
// field on every line, whether the call's output values changed since the track's
// previous logged step, as the client judged it (it keeps that step's fingerprints and
// has the tolerance):
// value   "=" within the tolerance, "~" changed beyond it, "?" not compared (no previous
//         value of that call, another shape, or the fingerprint was not ready), "-" not
//         fingerprinted (no output)
// A client writes version 2 only when it fingerprints values (a track's tree_log option),
// so a daemon that reads version 1 only keeps working with clients that do not. The
// parser reads both.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tensorscope/base/status.h"

namespace tensorscope {

inline constexpr const char* kModuleTreeMagic = "tensorscope-module-tree 1";
inline constexpr const char* kModuleTreeMagicValues = "tensorscope-module-tree 2";

struct ModuleTreeCall {
  uint32_t thread = 0;
  uint32_t call = 0;
  std::string path;
  std::string type;
  std::vector<std::string> inputs;
  std::string output;  // "" when none
  // Version 2 only: "=" output values within tolerance of the previous logged step, "~"
  // changed beyond it, "?" not compared; "" not fingerprinted (every call of a version 1
  // payload).
  std::string value;

  bool operator==(const ModuleTreeCall&) const = default;
};

struct ModuleTree {
  static constexpr size_t kMaxCalls = 4096;
  static constexpr size_t kMaxInputs = 16;  // per call; more are not listed
  static constexpr size_t kMaxFieldBytes = 512;

  std::vector<ModuleTreeCall> calls;
  uint64_t omitted = 0;

  bool operator==(const ModuleTree&) const = default;
};

// A tensor description from its parts (dtype name, sizes, device string); "?" when it
// would be longer than kMaxFieldBytes.
std::string describe_tensor(std::string_view dtype, const int64_t* sizes, size_t ndim, std::string_view device);

// Replaces control bytes (tabs, newlines, ...) by ' ' and cuts at kMaxFieldBytes.
std::string module_tree_field(std::string_view text);

// The payload for `tree`: version 2 when some call has a `value`, else version 1. Calls
// beyond kMaxCalls, inputs beyond kMaxInputs and bytes beyond wire::kMaxModuleTreeBytes
// are left out (counted in `omitted` for calls). Fields are cleaned with
// module_tree_field; a value other than "=", "~", "?" and "" is written as "?".
std::string format_module_tree(const ModuleTree& tree);

// Reads a payload of version 1 or 2. Errors name the line: a missing or unknown header,
// a line without six fields (seven in version 2), a number that is not one, a field with
// control bytes or over kMaxFieldBytes, more than kMaxCalls lines or kMaxInputs inputs, a
// malformed tensor description, a value field other than "=", "~", "?", "-".
StatusOr<ModuleTree> parse_module_tree(std::string_view payload);

}  // namespace tensorscope
