// torch_tensor_walk.cc — see torch_tensor_walk.h.
#include "compare/torch_tensor_walk.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <utility>

#include "compare/torch_file_source.h"
#include "compare/torch_pickle_calls.h"

namespace tensorscope::compare {
namespace {

constexpr int kMaxWalkDepth = 200;
// Objects visited plus container items looked at, over the whole walk (shared
// containers are walked again each time they are reached): bounds its time.
constexpr size_t kMaxWalkSteps = size_t{1} << 25;

std::string format_float(double value) {
  char text[40];
  std::snprintf(text, sizeof(text), "%.17g", value);
  return text;
}

// Walks the object graph from the root, naming what it passes through; every tensor
// reached (again each time it is reached through a shared container) is found with its
// name. The current name is one buffer, extended and cut back as the walk goes down and
// up: a name is copied only for a tensor found.
class TensorWalker {
 public:
  TensorWalker(const PickleMachine& m, const std::string& file) : m_(m), file_(file) {}

  Status walk(PickleValue v, int depth) {
    if (v.kind != PickleKind::kRef) return Status::ok();
    if (depth > kMaxWalkDepth) {
      return Status::error(file_ + ": objects nested deeper than " + std::to_string(kMaxWalkDepth) + " containers");
    }
    Status spent = spend(1);
    if (!spent) return spent;
    if (std::find(path_.begin(), path_.end(), v.ref) != path_.end()) return Status::ok();  // cycle
    path_.push_back(v.ref);
    Status st = visit(v, depth);
    path_.pop_back();
    return st;
  }

  std::vector<FoundTensor>& found() { return found_; }

 private:
  static constexpr size_t kOverflow = SIZE_MAX;

  // Counts `n` steps of the walk against kMaxWalkSteps.
  Status spend(size_t n) {
    if (n > kMaxWalkSteps - steps_) {
      return Status::error(file_ + ": more than " + std::to_string(kMaxWalkSteps) +
                           " objects and container items to visit (shared containers?)");
    }
    steps_ += n;
    return Status::ok();
  }

  // Appends ".part" ("part" to the empty name) to the current name; a name that would
  // grow past kMaxTorchNameBytes is left as it is and marked overflowing instead.
  // Returns what end_part() needs to undo it.
  size_t begin_part(std::string_view part) {
    const size_t old = name_.size();
    if (overflow_ > 0 || old + (old > 0 ? 1 : 0) + part.size() > kMaxTorchNameBytes) {
      if (overflow_++ == 0) {  // how the long name starts, for the message
        overflow_start_ = clip(name_);
        if (overflow_start_.size() < kMaxQuotedBytes) {
          overflow_start_ =
              clip(std::string(name_) + (old > 0 ? "." : "") + std::string(part.substr(0, kMaxQuotedBytes + 1)));
        }
      }
      return kOverflow;
    }
    if (old > 0) name_ += '.';
    name_.append(part.data(), part.size());
    return old;
  }
  void end_part(size_t old) {
    if (old == kOverflow) {
      --overflow_;
    } else {
      name_.resize(old);
    }
  }

  // Walks `v` named by the current name and `part`.
  Status walk_part(PickleValue v, std::string_view part, int depth) {
    if (v.kind != PickleKind::kRef) return Status::ok();
    const size_t old = begin_part(part);
    Status st = walk(v, depth);
    end_part(old);
    return st;
  }

  // The name part of a dict key; `buffer` holds it when it is formatted.
  std::string_view key_text(PickleValue key, size_t index, std::string& buffer) const {
    switch (key.kind) {
      case PickleKind::kNone: return "None";
      case PickleKind::kBool: return key.boolean ? "True" : "False";
      case PickleKind::kInt: return buffer = std::to_string(key.integer);
      case PickleKind::kFloat: return buffer = format_float(key.real);
      case PickleKind::kRef: break;
    }
    const PickleObject& o = m_.object(key.ref);
    if (o.type == PickleType::kString || o.type == PickleType::kBytes) return o.text;
    return buffer = std::to_string(index);
  }

  Status add(PickleValue v) {
    if (overflow_ > 0) {
      return Status::error(file_ + ": a tensor name longer than " + std::to_string(kMaxTorchNameBytes) +
                           " bytes (starting '" + overflow_start_ + "')");
    }
    if (found_.size() >= kMaxTorchTensors) {
      return Status::error(file_ + ": more than " + std::to_string(kMaxTorchTensors) +
                           " tensors (counting each one again wherever a shared container "
                           "holds it)");
    }
    if (name_.size() > kMaxTorchNameTotalBytes - name_bytes_) {
      return Status::error(file_ + ": tensor names longer than " + std::to_string(kMaxTorchNameTotalBytes >> 20) +
                           " MiB in all, after " + std::to_string(found_.size()) +
                           " tensors (long names repeated through shared containers?)");
    }
    name_bytes_ += name_.size();
    found_.push_back({name_, v});
    return Status::ok();
  }

  Status walk_entries(const std::vector<std::pair<PickleValue, PickleValue>>& entries, int depth) {
    Status st = spend(entries.size());
    if (!st) return st;
    std::string buffer;
    for (size_t i = 0; i < entries.size(); ++i) {
      if (entries[i].second.kind != PickleKind::kRef) continue;
      st = walk_part(entries[i].second, key_text(entries[i].first, i, buffer), depth + 1);
      if (!st) return st;
    }
    return Status::ok();
  }

  Status walk_items(const std::vector<PickleValue>& items, int depth) {
    Status st = spend(items.size());
    if (!st) return st;
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].kind != PickleKind::kRef) continue;
      st = walk_part(items[i], std::to_string(i), depth + 1);
      if (!st) return st;
    }
    return Status::ok();
  }

  // The entry of a dict-valued state with this string key, or nullptr.
  const PickleValue* state_field(const PickleObject& state, const char* key) const {
    for (const auto& [k, value] : state.entries) {
      const PickleObject* s = m_.as(k, PickleType::kString);
      if (s != nullptr && s->text == key) return &value;
    }
    return nullptr;
  }

  // A pickled torch.nn.Module: named like its state_dict.
  Status walk_module_state(const PickleObject& state, int depth) {
    Status spent = spend(4 * state.entries.size());  // the field lookups and the loop below
    if (!spent) return spent;
    for (const char* field : {"_parameters", "_buffers", "_modules"}) {
      const PickleValue* v = state_field(state, field);
      if (v == nullptr) continue;
      const PickleObject* d = m_.as(*v, PickleType::kDict);
      if (d == nullptr) continue;
      Status st = walk_entries(d->entries, depth + 1);
      if (!st) return st;
    }
    for (size_t i = 0; i < state.entries.size(); ++i) {  // plain tensor attributes
      const PickleObject* k = m_.as(state.entries[i].first, PickleType::kString);
      if (k == nullptr || k->text.empty() || k->text[0] == '_') continue;
      Status st = walk_part(state.entries[i].second, k->text, depth + 1);
      if (!st) return st;
    }
    return Status::ok();
  }

  Status walk_object(PickleValue v, const PickleObject& o, int depth) {
    const PickleCall& call = m_.call(o);
    const PickleValue callable = call.callable;
    if (is_tensor_rebuild(m_, callable) || is_other_tensor_call(m_, callable)) return add(v);
    if (is_torch_utils(m_, callable, "_rebuild_from_type_v2") || is_torch_utils(m_, callable, "_rebuild_from_type") ||
        m_.is_global(callable, "torch._tensor", "_rebuild_from_type_v2")) {
      return add(v);  // a tensor subclass: unwrapped when it is described
    }
    // Wrappers whose first argument is the value: Parameter, TorchScript type tags.
    if (is_torch_utils(m_, callable, "_rebuild_parameter") ||
        is_torch_utils(m_, callable, "_rebuild_parameter_with_state") ||
        m_.is_global(callable, "torch.jit._pickle", "restore_type_tag") ||
        (m_.as(callable, PickleType::kGlobal) != nullptr && m_.object(callable.ref).text == "torch.jit._pickle" &&
         m_.object(callable.ref).name.rfind("build_", 0) == 0)) {
      return walk(arg_of(m_, o, 0), depth + 1);
    }
    // Any other object: its state, its items, its constructor arguments.
    if (o.has_state) {
      const PickleObject* state = m_.as(call.state, PickleType::kDict);
      const PickleObject* pair = m_.as(call.state, PickleType::kTuple);
      if (state != nullptr) {
        Status spent = spend(2 * state->entries.size());  // the two lookups below
        if (!spent) return spent;
      }
      if (state != nullptr && state_field(*state, "_parameters") != nullptr &&
          state_field(*state, "_modules") != nullptr) {
        Status st = walk_module_state(*state, depth);
        if (!st) return st;
      } else if (state != nullptr) {
        Status st = walk_entries(state->entries, depth);
        if (!st) return st;
      } else if (pair != nullptr && pair->items.size() == 2) {  // (dict state, slot state)
        for (const PickleValue& part : pair->items) {
          const PickleObject* d = m_.as(part, PickleType::kDict);
          Status st = d != nullptr ? walk_entries(d->entries, depth) : walk(part, depth + 1);
          if (!st) return st;
        }
      } else {
        Status st = walk(call.state, depth + 1);
        if (!st) return st;
      }
    }
    Status st = walk_entries(o.entries, depth);
    if (!st) return st;
    st = walk_items(o.items, depth);
    if (!st) return st;
    if (const PickleObject* args = m_.as(call.args, PickleType::kTuple)) {
      st = walk_items(args->items, depth);
      if (!st) return st;
    }
    if (const PickleObject* kwargs = m_.as(call.kwargs, PickleType::kDict)) {
      st = walk_entries(kwargs->entries, depth);
      if (!st) return st;
    }
    return Status::ok();
  }

  Status visit(PickleValue v, int depth) {
    const PickleObject& o = m_.object(v.ref);
    switch (o.type) {
      case PickleType::kDict: return walk_entries(o.entries, depth);
      case PickleType::kList:
      case PickleType::kTuple:
      case PickleType::kSet: return walk_items(o.items, depth);
      case PickleType::kObject: return walk_object(v, o, depth);
      default: return Status::ok();
    }
  }

  const PickleMachine& m_;
  const std::string& file_;
  std::vector<FoundTensor> found_;
  std::vector<uint32_t> path_;
  std::string name_;            // the current name
  size_t overflow_ = 0;         // parts not appended to name_ (it would be too long)
  std::string overflow_start_;  // the start of the name that was too long
  size_t name_bytes_ = 0;       // of the names found
  size_t steps_ = 0;
};

}  // namespace

StatusOr<std::vector<FoundTensor>> find_tensors(const PickleMachine& machine, const std::string& file) {
  TensorWalker walker(machine, file);
  Status walked = walker.walk(machine.root(), 0);
  if (!walked) return walked;
  return std::move(walker.found());
}

}  // namespace tensorscope::compare
