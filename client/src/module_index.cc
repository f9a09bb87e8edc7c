#include "module_index.h"

#include <torch/nn/module.h>
#include <torch/script.h>

#include <unordered_map>

namespace tensorscope {
namespace {

// The qualified path of `path`'s parent ("" for a top-level child); `path` is not "".
std::string parent_path(const std::string& path) {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? std::string() : path.substr(0, dot);
}

void link(std::vector<ModuleEntry>& entries) {
  std::unordered_map<std::string, int> by_path;
  for (size_t i = 0; i < entries.size(); ++i) by_path.emplace(entries[i].path, static_cast<int>(i));
  for (size_t i = 0; i < entries.size(); ++i) {
    ModuleEntry& e = entries[i];
    e.chain = {static_cast<int>(i)};
    std::string path = e.path;
    while (!path.empty()) {
      path = parent_path(path);
      auto it = by_path.find(path);
      if (it != by_path.end()) e.chain.push_back(it->second);
    }
  }
  for (const ModuleEntry& e : entries) {
    if (!e.owns_tensors()) continue;
    for (size_t k = 1; k < e.chain.size(); ++k) entries[e.chain[k]].composite = true;
  }
}

// "torch::nn::LinearImpl" -> "Linear", "Net" -> "Net", "__torch__.x.Linear" -> "Linear".
std::string short_type_name(std::string name) {
  const size_t colon = name.rfind("::");
  if (colon != std::string::npos) name = name.substr(colon + 2);
  const size_t dot = name.rfind('.');
  if (dot != std::string::npos) name = name.substr(dot + 1);
  const std::string impl = "Impl";
  if (name.size() > impl.size() && name.compare(name.size() - impl.size(), impl.size(), impl) == 0) {
    name.resize(name.size() - impl.size());
  }
  return name;
}

std::string type_of(const torch::jit::Module& module) {
  const auto name = module.type()->name();
  return name ? short_type_name(name->qualifiedName()) : std::string();
}

}  // namespace

std::vector<ModuleEntry> index_modules(const torch::nn::Module& module) {
  std::vector<ModuleEntry> entries;
  // The root by hand: named_modules(include_self=true) needs the module to be held by a
  // shared_ptr, which a module on the stack is not.
  ModuleEntry root;
  root.type = short_type_name(module.name());
  for (const auto& p : module.named_parameters(/*recurse=*/false)) root.params.emplace_back(p.key(), p.value());
  for (const auto& b : module.named_buffers(/*recurse=*/false)) root.buffers.push_back(b.value());
  entries.push_back(std::move(root));
  for (const auto& item : module.named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    ModuleEntry e;
    e.path = item.key();
    e.type = short_type_name(item.value()->name());
    for (const auto& p : item.value()->named_parameters(/*recurse=*/false)) e.params.emplace_back(p.key(), p.value());
    for (const auto& b : item.value()->named_buffers(/*recurse=*/false)) e.buffers.push_back(b.value());
    entries.push_back(std::move(e));
  }
  link(entries);
  return entries;
}

std::vector<ModuleEntry> index_modules(const torch::jit::Module& module) {
  std::vector<ModuleEntry> entries;
  for (const auto& item : module.named_modules()) {
    ModuleEntry e;
    e.path = item.name;
    e.type = type_of(item.value);
    for (const auto& p : item.value.named_parameters(/*recurse=*/false)) e.params.emplace_back(p.name, p.value);
    for (const auto& b : item.value.named_buffers(/*recurse=*/false)) e.buffers.push_back(b.value);
    entries.push_back(std::move(e));
  }
  link(entries);
  return entries;
}

}  // namespace tensorscope
