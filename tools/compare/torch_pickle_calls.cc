// torch_pickle_calls.cc — see torch_pickle_calls.h.
#include "compare/torch_pickle_calls.h"

namespace tensorscope::compare {

bool is_torch_utils(const PickleMachine& m, PickleValue callable, const char* name) {
  return m.is_global(callable, "torch._utils", name);
}

bool is_tensor_rebuild(const PickleMachine& m, PickleValue callable) {
  return is_torch_utils(m, callable, "_rebuild_tensor_v2") || is_torch_utils(m, callable, "_rebuild_tensor");
}

bool is_other_tensor_call(const PickleMachine& m, PickleValue callable) {
  const PickleObject* g = m.as(callable, PickleType::kGlobal);
  if (g == nullptr) return false;
  if (g->text == "torch._utils" && g->name.rfind("_rebuild_", 0) == 0 && g->name != "_rebuild_parameter" &&
      g->name != "_rebuild_parameter_with_state" && g->name != "_rebuild_from_type" &&
      g->name != "_rebuild_from_type_v2") {
    return true;
  }
  return g->text == "torch._tensor" && g->name.rfind("_rebuild_", 0) == 0 && g->name != "_rebuild_from_type_v2";
}

PickleValue arg_of(const PickleMachine& m, const PickleObject& o, size_t i) {
  const PickleObject* args = m.as(m.call(o).args, PickleType::kTuple);
  if (args == nullptr || i >= args->items.size()) return PickleValue::none();
  return args->items[i];
}

std::string clip(std::string_view text) {
  if (text.size() <= kMaxQuotedBytes) return std::string(text);
  return std::string(text.substr(0, kMaxQuotedBytes)) + "...";
}

}  // namespace tensorscope::compare
