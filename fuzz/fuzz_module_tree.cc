// fuzz_module_tree.cc — the module-tree payload a client sends (module_tree_format.h):
// parsed, and a parsed tree formats back to a payload that parses to the same tree.
#include <cstdlib>

#include "fuzz_target.h"
#include "tensorscope/shared/module_tree_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tensorscope;
  StatusOr<ModuleTree> tree = parse_module_tree(fuzz::as_string(data, size));
  if (!tree.is_ok()) return 0;
  StatusOr<ModuleTree> again = parse_module_tree(format_module_tree(*tree));
  if (!again.is_ok() || !(*again == *tree)) std::abort();  // a tree it accepted must round-trip
  return 0;
}
