// module_tree_log.cc — see module_tree_log.h.
#include "module_tree_log.h"

#include <deque>
#include <iterator>
#include <utility>

#include "tensor_staging.h"

namespace tensorscope {
namespace {

struct InputStash {
  uint32_t last = 0;
  std::deque<std::pair<uint32_t, std::vector<std::string>>> waiting;  // oldest first
};

InputStash& stash() {
  thread_local InputStash s;
  return s;
}

}  // namespace

std::string ModuleTreeLog::describe(const at::Tensor& tensor) {
  if (!tensor.defined()) return {};
  const wire::DType dtype = wire_dtype(tensor.scalar_type());
  const std::string dtype_name =
      dtype == wire::DType::kInvalid ? std::string(c10::toString(tensor.scalar_type())) : wire::dtype_name(dtype);
  const auto sizes = tensor.sizes();
  return describe_tensor(dtype_name, sizes.data(), sizes.size(), device_string(tensor));
}

uint32_t ModuleTreeLog::stash_inputs(std::vector<std::string> inputs) {
  InputStash& s = stash();
  if (++s.last == 0) s.last = 1;
  if (s.waiting.size() >= kMaxStashed) s.waiting.pop_front();
  s.waiting.emplace_back(s.last, std::move(inputs));
  return s.last;
}

std::vector<std::string> ModuleTreeLog::take_inputs(uint32_t ticket) {
  if (ticket == 0) return {};
  auto& waiting = stash().waiting;
  // Ops end in reverse order of their start: the ticket is almost always the last one.
  for (auto it = waiting.rbegin(); it != waiting.rend(); ++it) {
    if (it->first != ticket) continue;
    std::vector<std::string> inputs = std::move(it->second);
    waiting.erase(std::next(it).base());
    return inputs;
  }
  return {};
}

int ModuleTreeLog::begin(int64_t step, uint64_t thread, int call, const std::string& path, const std::string& type,
                         std::vector<std::string> inputs, const at::Tensor& output) {
  step_ = step;
  if (tree_.calls.size() >= ModuleTree::kMaxCalls) {
    ++tree_.omitted;
    return -1;
  }
  const auto number = threads_.emplace(thread, static_cast<uint32_t>(threads_.size())).first->second;
  ModuleTreeCall c;
  c.thread = number;
  c.call = static_cast<uint32_t>(call);
  c.path = path;
  c.type = type;
  c.inputs = std::move(inputs);
  c.output = describe(output);
  tree_.calls.push_back(std::move(c));
  return static_cast<int>(tree_.calls.size() - 1);
}

void ModuleTreeLog::set_output(int index, const at::Tensor& output) {
  if (index < 0 || static_cast<size_t>(index) >= tree_.calls.size()) return;
  tree_.calls[index].output = describe(output);
}

std::string ModuleTreeLog::take() {
  std::string payload = format_module_tree(tree_);
  tree_ = ModuleTree();
  threads_.clear();
  step_ = -1;
  return payload;
}

}  // namespace tensorscope
