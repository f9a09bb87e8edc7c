#include "compare/torch_file_source.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <exception>
#include <map>
#include <new>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "compare/pickle_machine.h"
#include "compare/zip_archive.h"

namespace tensorscope::compare {
namespace {

namespace fs = std::filesystem;
using wire::DType;

constexpr int kMaxWalkDepth = 200;
// Objects visited plus container items looked at, over the whole walk (shared
// containers are walked again each time they are reached): bounds its time.
constexpr size_t kMaxWalkSteps = size_t{1} << 25;
// Longest piece of a key, location or type quoted in a message.
constexpr size_t kMaxQuotedBytes = 64;
// Gathering non-contiguous tensors: logical elements per chunk, and the largest gap
// (bytes) between two needed storage ranges that is read through rather than skipped.
constexpr size_t kMaxGatherElements = size_t{1} << 20;
constexpr uint64_t kGatherGapBytes = 8192;

// ---- storage types ---------------------------------------------------------------

struct StorageDType {
  DType dtype = DType::kInvalid;
  std::string unsupported;  // non-empty: a known but unsupported type, e.g. "complex64"
};

// torch.<X>Storage or a torch.<dtype> global.
StorageDType storage_dtype(std::string_view module, std::string_view name) {
  StorageDType out;
  if (module != "torch") {
    out.unsupported = "unknown storage type " + std::string(module) + "." + std::string(name);
    return out;
  }
  static const std::map<std::string, DType, std::less<>> kTypes = {
      {"FloatStorage", DType::kFloat32},   {"float32", DType::kFloat32},
      {"float", DType::kFloat32},          {"DoubleStorage", DType::kFloat64},
      {"float64", DType::kFloat64},        {"double", DType::kFloat64},
      {"HalfStorage", DType::kFloat16},    {"float16", DType::kFloat16},
      {"half", DType::kFloat16},           {"BFloat16Storage", DType::kBFloat16},
      {"bfloat16", DType::kBFloat16},      {"CharStorage", DType::kInt8},
      {"int8", DType::kInt8},              {"ShortStorage", DType::kInt16},
      {"int16", DType::kInt16},            {"short", DType::kInt16},
      {"IntStorage", DType::kInt32},       {"int32", DType::kInt32},
      {"int", DType::kInt32},              {"LongStorage", DType::kInt64},
      {"int64", DType::kInt64},            {"long", DType::kInt64},
      {"ByteStorage", DType::kUInt8},      {"uint8", DType::kUInt8},
      {"BoolStorage", DType::kBool},       {"bool", DType::kBool},
  };
  static const std::map<std::string, std::string, std::less<>> kUnsupported = {
      {"ComplexFloatStorage", "complex64"},  {"ComplexDoubleStorage", "complex128"},
      {"ComplexHalfStorage", "complex32"},   {"QInt8Storage", "qint8 (quantized)"},
      {"QUInt8Storage", "quint8 (quantized)"}, {"QInt32Storage", "qint32 (quantized)"},
      {"QUInt4x2Storage", "quint4x2 (quantized)"}, {"QUInt2x4Storage", "quint2x4 (quantized)"},
      {"UntypedStorage", "untyped bytes"},
  };
  if (auto found = kTypes.find(name); found != kTypes.end()) {
    out.dtype = found->second;
  } else if (auto bad = kUnsupported.find(name); bad != kUnsupported.end()) {
    out.unsupported = bad->second;
  } else {
    out.unsupported = "torch." + std::string(name);
  }
  return out;
}

// ---- walking the object graph for tensors ------------------------------------------

bool is_torch_utils(const PickleMachine& m, PickleValue callable, const char* name) {
  return m.is_global(callable, "torch._utils", name);
}

// A call that rebuilds a tensor from a storage.
bool is_tensor_rebuild(const PickleMachine& m, PickleValue callable) {
  return is_torch_utils(m, callable, "_rebuild_tensor_v2") ||
         is_torch_utils(m, callable, "_rebuild_tensor");
}

// Any torch._utils._rebuild_* call that makes a tensor (supported or not), except the
// wrappers handled by the walk.
bool is_other_tensor_call(const PickleMachine& m, PickleValue callable) {
  const PickleObject* g = m.as(callable, PickleType::kGlobal);
  if (g == nullptr) return false;
  if (g->text == "torch._utils" && g->name.rfind("_rebuild_", 0) == 0 &&
      g->name != "_rebuild_parameter" && g->name != "_rebuild_parameter_with_state" &&
      g->name != "_rebuild_from_type" && g->name != "_rebuild_from_type_v2") {
    return true;
  }
  return g->text == "torch._tensor" && g->name.rfind("_rebuild_", 0) == 0 &&
         g->name != "_rebuild_from_type_v2";
}

// args[i] of a kObject, or kNone.
PickleValue arg_of(const PickleMachine& m, const PickleObject& o, size_t i) {
  const PickleObject* args = m.as(m.call(o).args, PickleType::kTuple);
  if (args == nullptr || i >= args->items.size()) return PickleValue::none();
  return args->items[i];
}

std::string format_float(double value) {
  char text[40];
  std::snprintf(text, sizeof(text), "%.17g", value);
  return text;
}

// `text`, or its first kMaxQuotedBytes bytes and "...".
std::string clip(std::string_view text) {
  if (text.size() <= kMaxQuotedBytes) return std::string(text);
  return std::string(text.substr(0, kMaxQuotedBytes)) + "...";
}

struct FoundTensor {
  std::string name;
  PickleValue value;  // a kObject: a rebuild call (possibly wrapped by _rebuild_from_type)
};

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
      return Status::error(file_ + ": objects nested deeper than " +
                           std::to_string(kMaxWalkDepth) + " containers");
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
          overflow_start_ = clip(std::string(name_) + (old > 0 ? "." : "") +
                                 std::string(part.substr(0, kMaxQuotedBytes + 1)));
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
      return Status::error(file_ + ": tensor names longer than " +
                           std::to_string(kMaxTorchNameTotalBytes >> 20) + " MiB in all, after " +
                           std::to_string(found_.size()) +
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
    if (is_torch_utils(m_, callable, "_rebuild_from_type_v2") ||
        is_torch_utils(m_, callable, "_rebuild_from_type") ||
        m_.is_global(callable, "torch._tensor", "_rebuild_from_type_v2")) {
      return add(v);  // a tensor subclass: unwrapped when it is described
    }
    // Wrappers whose first argument is the value: Parameter, TorchScript type tags.
    if (is_torch_utils(m_, callable, "_rebuild_parameter") ||
        is_torch_utils(m_, callable, "_rebuild_parameter_with_state") ||
        m_.is_global(callable, "torch.jit._pickle", "restore_type_tag") ||
        (m_.as(callable, PickleType::kGlobal) != nullptr &&
         m_.object(callable.ref).text == "torch.jit._pickle" &&
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
  std::string name_;       // the current name
  size_t overflow_ = 0;    // parts not appended to name_ (it would be too long)
  std::string overflow_start_;  // the start of the name that was too long
  size_t name_bytes_ = 0;  // of the names found
  size_t steps_ = 0;
};

// ---- describing one tensor -----------------------------------------------------------

struct StorageInfo {
  uint64_t data_offset = 0;
  uint64_t bytes = 0;
  std::string error;
};

class TensorDescriber {
 public:
  TensorDescriber(const PickleMachine& m, const ZipArchive& zip, std::string prefix)
      : m_(m), zip_(zip), prefix_(std::move(prefix)) {
    // The storage entries <prefix>/data/<key> by key (the first of a repeated name).
    const std::string data_dir = prefix_ + "/data/";
    for (size_t i = 0; i < zip_.entries().size(); ++i) {
      const std::string& name = zip_.entries()[i].name;
      if (name.size() >= data_dir.size() && name.compare(0, data_dir.size(), data_dir) == 0) {
        by_key_.emplace(std::string_view(name).substr(data_dir.size()), i);
      }
    }
  }

  // Fills t (name and file set) from the rebuild call `v`; problems go to t.error.
  void describe(PickleValue v, TorchTensor& t) {
    std::string problem = describe_call(v, t, 0);
    if (!problem.empty()) t.error = t.display_name() + ": " + problem;
  }

  // Memory held by the cache of storages (keys, messages), about.
  size_t cache_bytes() const { return cache_bytes_; }

 private:
  static bool int_of(PickleValue v, int64_t* out) {
    if (v.kind != PickleKind::kInt) return false;
    *out = v.integer;
    return true;
  }

  // A tuple (or list) of ints: "" and *out filled, else the problem.
  std::string int_tuple(PickleValue v, std::vector<int64_t>* out) const {
    const PickleObject* tuple = m_.as(v, PickleType::kTuple);
    if (tuple == nullptr) tuple = m_.as(v, PickleType::kList);
    if (tuple == nullptr) return "corrupt tensor: storage offset, size or stride of the wrong type";
    if (tuple->items.size() > kMaxTorchDims) return "more than " + std::to_string(kMaxTorchDims) + " dims";
    out->clear();
    for (PickleValue item : tuple->items) {
      int64_t x = 0;
      if (!int_of(item, &x)) return "corrupt tensor: storage offset, size or stride of the wrong type";
      out->push_back(x);
    }
    return "";
  }

  const StorageInfo& storage(std::string_view key) {
    auto cached = storages_.find(key);
    if (cached != storages_.end()) return cached->second;
    StorageInfo info;
    auto found = by_key_.find(key);
    if (found == by_key_.end()) {
      info.error = "its storage entry '" + prefix_ + "/data/" + std::string(key) +
                   "' is missing from the archive";
    } else {
      const ZipEntry& entry = zip_.entries()[found->second];
      auto offset = zip_.data_offset(entry);
      if (!offset) {
        info.error = offset.message();
      } else {
        info.data_offset = *offset;
        info.bytes = entry.size;
      }
    }
    cache_bytes_ += key.size() + info.error.size() + sizeof(info) + 64;
    return storages_.emplace(std::string(key), std::move(info)).first->second;
  }

  // Returns "" on success, else the problem.
  std::string describe_call(PickleValue v, TorchTensor& t, int depth) {
    const PickleObject* call = m_.as(v, PickleType::kObject);
    if (call == nullptr) return "not a tensor";
    const PickleValue callable = m_.call(*call).callable;
    if (is_torch_utils(m_, callable, "_rebuild_from_type_v2") ||
        is_torch_utils(m_, callable, "_rebuild_from_type") ||
        m_.is_global(callable, "torch._tensor", "_rebuild_from_type_v2")) {
      // (func, new_type, args, state): a tensor subclass rebuilt by func(*args).
      if (depth > 4) return "tensor subclass nested too deeply";
      const PickleValue func = arg_of(m_, *call, 0);
      const PickleObject* inner_args = m_.as(arg_of(m_, *call, 2), PickleType::kTuple);
      if (inner_args == nullptr || !is_tensor_rebuild(m_, func)) {
        return "tensor subclass rebuilt by " + m_.global_name(func) + " is not supported";
      }
      return describe_rebuild(func, inner_args->items, t);
    }
    if (!is_tensor_rebuild(m_, callable)) {
      const std::string g = m_.global_name(callable);
      std::string kind = "this kind of tensor";
      if (g.find("qtensor") != std::string::npos) kind = "quantized tensors";
      if (g.find("sparse") != std::string::npos) kind = "sparse tensors";
      if (g.find("nested") != std::string::npos) kind = "nested tensors";
      if (g.find("meta") != std::string::npos) kind = "meta tensors (no data)";
      return kind + " (" + g + ") are not supported";
    }
    const PickleObject* args = m_.as(m_.call(*call).args, PickleType::kTuple);
    if (args == nullptr) return "corrupt tensor: no arguments";
    return describe_rebuild(callable, args->items, t);
  }

  // _rebuild_tensor(storage, offset, size, stride) / _rebuild_tensor_v2(storage,
  // offset, size, stride, requires_grad, backward_hooks[, metadata]).
  std::string describe_rebuild(PickleValue callable, const std::vector<PickleValue>& args,
                               TorchTensor& t) {
    if (args.size() < 4) return "corrupt tensor: " + m_.global_name(callable) + " with " +
                                std::to_string(args.size()) + " arguments";
    const PickleObject* pid_ref = m_.as(args[0], PickleType::kPersistentId);
    if (pid_ref == nullptr || pid_ref->items.empty()) return "corrupt tensor: its storage is not a persistent id";
    const PickleObject* pid = m_.as(pid_ref->items[0], PickleType::kTuple);
    if (pid == nullptr || pid->items.size() < 5) return "corrupt tensor: bad storage id";
    const PickleObject* tag = m_.as(pid->items[0], PickleType::kString);
    if (tag == nullptr || tag->text != "storage") return "corrupt tensor: storage id is not ('storage', ...)";
    const PickleObject* type = m_.as(pid->items[1], PickleType::kGlobal);
    if (type == nullptr) return "corrupt tensor: storage type is not a global";
    const PickleObject* key = m_.as(pid->items[2], PickleType::kString);
    if (key == nullptr) return "corrupt tensor: storage key is not a string";
    const PickleObject* location = m_.as(pid->items[3], PickleType::kString);
    int64_t storage_numel = 0;
    if (!int_of(pid->items[4], &storage_numel) || storage_numel < 0) {
      return "corrupt tensor: bad storage size";
    }
    const StorageDType sd = storage_dtype(type->text, type->name);
    if (sd.dtype == DType::kInvalid) {
      return "dtype " + sd.unsupported + " (" + m_.global_name(pid->items[1]) +
             ") is not supported (float32/64/16, bfloat16, int8/16/32/64, uint8, bool are)";
    }
    t.dtype = sd.dtype;
    if (!int_of(args[1], &t.storage_offset)) {
      return "corrupt tensor: storage offset, size or stride of the wrong type";
    }
    std::string problem = int_tuple(args[2], &t.shape);
    if (problem.empty()) problem = int_tuple(args[3], &t.stride);
    if (!problem.empty()) return problem;
    if (t.shape.size() != t.stride.size()) {
      return "corrupt tensor: " + std::to_string(t.shape.size()) + " sizes but " +
             std::to_string(t.stride.size()) + " strides";
    }
    if (t.storage_offset < 0) return "corrupt tensor: negative storage offset";
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (t.shape[d] < 0 || t.stride[d] < 0) return "corrupt tensor: negative size or stride";
    }
    // A longer entry name could not be in the archive (zip_archive.h).
    if (prefix_.size() + 6 + key->text.size() > kMaxZipNameBytes) {
      return "corrupt tensor: its storage key of " + std::to_string(key->text.size()) +
             " bytes ('" + clip(key->text) + "') is too long";
    }
    t.storage_entry = prefix_ + "/data/";
    t.storage_entry += key->text;
    const StorageInfo& info = storage(key->text);
    if (!info.error.empty()) return info.error;
    t.data_offset = info.data_offset;
    t.storage_bytes = info.bytes;
    const uint64_t elem = wire::dtype_size(t.dtype);
    const uint64_t entry_elems = info.bytes / elem;
    if (static_cast<uint64_t>(storage_numel) > entry_elems) {
      return "corrupt or truncated: its storage holds " + std::to_string(storage_numel) +
             " elements but entry '" + t.storage_entry + "' has only " + std::to_string(info.bytes) +
             " bytes";
    }
    // numel * elem must fit in int64; every element must lie inside the storage.
    unsigned __int128 numel = 1;
    for (int64_t d : t.shape) {
      numel *= static_cast<uint64_t>(d);
      if (numel * elem > static_cast<unsigned __int128>(INT64_MAX)) return "corrupt tensor: size overflows";
    }
    if (numel > 0) {
      unsigned __int128 last = static_cast<uint64_t>(t.storage_offset);
      for (size_t d = 0; d < t.shape.size(); ++d) {
        last += static_cast<unsigned __int128>(t.shape[d] - 1) * static_cast<uint64_t>(t.stride[d]);
      }
      if (last >= static_cast<uint64_t>(storage_numel)) {
        return "corrupt tensor: its elements reach storage index " +
               std::to_string(static_cast<uint64_t>(std::min<unsigned __int128>(last, UINT64_MAX))) +
               " but the storage ('" + t.storage_entry + "', " +
               (location != nullptr ? clip(location->text) + ", " : std::string()) +
               std::to_string(storage_numel) + " elements) ends before";
      }
    }
    return "";
  }

  const PickleMachine& m_;
  const ZipArchive& zip_;
  std::string prefix_;
  std::unordered_map<std::string_view, size_t> by_key_;  // names in zip_
  std::map<std::string, StorageInfo, std::less<>> storages_;
  size_t cache_bytes_ = 0;
};

// ---- the archive ---------------------------------------------------------------------

// Recognizes PyTorch's legacy (non-zip) format: a pickled magic number first.
bool is_legacy_format(const std::string& head) {
  // PROTO 2, LONG1 of 10 bytes: 0x1950a86a20f9469cfc6c, little-endian.
  static const unsigned char kMagic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                         0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  return head.size() >= sizeof(kMagic) && std::memcmp(head.data(), kMagic, sizeof(kMagic)) == 0;
}

std::string trim(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  size_t start = 0;
  while (start < text.size() && std::isspace(static_cast<unsigned char>(text[start]))) ++start;
  return text.substr(start);
}

// ---- reading --------------------------------------------------------------------------

class TorchSource final : public TensorSource {
 public:
  TorchSource(TorchTensor t, int fd, size_t chunk_bytes)
      : t_(std::move(t)), name_(t_.display_name()), fd_(fd), elem_(wire::dtype_size(t_.dtype)) {
    total_ = 1;
    for (int64_t d : t_.shape) total_ *= static_cast<uint64_t>(d);
    contiguous_ = t_.contiguous();
    const size_t per_chunk = std::max<size_t>(1, chunk_bytes / elem_);
    capacity_ = contiguous_ ? per_chunk : std::min(per_chunk, kMaxGatherElements);
    window_bytes_ = std::max<uint64_t>(elem_, chunk_bytes);
    buffer_.reset(new unsigned char[capacity_ * elem_]);
    if (!contiguous_) plan_gather();
  }
  ~TorchSource() override { ::close(fd_); }

  const std::string& name() const override { return name_; }
  DType dtype() const override { return t_.dtype; }
  const std::vector<int64_t>& shape() const override { return t_.shape; }

  StatusOr<size_t> peek(const unsigned char** data) override {
    try {
      return peek_chunk(data);
    } catch (const std::bad_alloc&) {
      return Status::error(name_ + ": out of memory while reading it");
    } catch (const std::exception& e) {
      return Status::error(name_ + ": cannot read it: " + e.what());
    }
  }
  void consume(size_t n) override { begin_ += n; }

 private:
  StatusOr<size_t> peek_chunk(const unsigned char** data) {
    if (begin_ == end_) {
      begin_ = end_ = 0;
      if (produced_ >= total_) return size_t{0};
      auto n = contiguous_ ? read_contiguous() : gather();
      if (!n) return n.status();
      end_ = *n;
      produced_ += *n;
    }
    *data = buffer_.get() + begin_ * elem_;
    return end_ - begin_;
  }

  Status read_storage(uint64_t first_elem, uint64_t count, unsigned char* dst) {
    const uint64_t offset = t_.data_offset + first_elem * elem_;
    uint64_t bytes = count * elem_;
    while (bytes > 0) {
      const ssize_t got = ::pread(fd_, dst, static_cast<size_t>(std::min<uint64_t>(bytes, 1u << 30)),
                                  static_cast<off_t>(offset + (count * elem_ - bytes)));
      if (got < 0) {
        if (errno == EINTR) continue;
        return Status::from_errno(name_ + ": read error", errno);
      }
      if (got == 0) return Status::error(name_ + ": unexpected end of file (did it shrink?)");
      dst += got;
      bytes -= static_cast<uint64_t>(got);
    }
    return Status::ok();
  }

  StatusOr<size_t> read_contiguous() {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(capacity_, total_ - produced_));
    Status read = read_storage(static_cast<uint64_t>(t_.storage_offset) + produced_, n, buffer_.get());
    if (!read) return read;
    return n;
  }

  // A gathered chunk is a box of the logical index space: dims before split_ fixed at
  // index_, dim split_ a range starting at index_[split_], the dims after it whole (so
  // its elements are consecutive in logical order). Its elements are visited with the
  // dims ordered by decreasing stride (order_), i.e. about in storage order, each
  // noting where it goes in the output: no sorting.
  void plan_gather() {
    const size_t ndim = t_.shape.size();
    inner_.assign(ndim, 1);
    for (size_t d = ndim; d-- > 1;) inner_[d - 1] = inner_[d] * static_cast<uint64_t>(t_.shape[d]);
    split_ = 0;
    while (inner_[split_] > capacity_) ++split_;  // inner_[ndim - 1] == 1 stops it
    for (size_t d = split_; d < ndim; ++d) order_.push_back(d);
    std::stable_sort(order_.begin(), order_.end(),
                     [this](size_t a, size_t b) { return t_.stride[a] > t_.stride[b]; });
    index_.assign(ndim, 0);
    step_.assign(ndim, 0);
  }

  StatusOr<size_t> gather() {
    const uint64_t left_in_split = static_cast<uint64_t>(t_.shape[split_] - index_[split_]);
    const uint64_t k = std::min<uint64_t>(capacity_ / inner_[split_], left_in_split);
    const size_t n = static_cast<size_t>(k * inner_[split_]);
    uint64_t storage = static_cast<uint64_t>(t_.storage_offset);
    for (size_t d = 0; d <= split_; ++d) {
      storage += static_cast<uint64_t>(index_[d]) * static_cast<uint64_t>(t_.stride[d]);
    }
    // Unsigned arithmetic: stepping past the end of a dim wraps and is taken back
    // (validated layouts keep every visited index inside the storage).
    uint64_t pos = 0;
    std::fill(step_.begin(), step_.end(), 0);
    wanted_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      wanted_[i] = {storage, static_cast<uint32_t>(pos)};
      for (size_t q = order_.size(); q-- > 0;) {
        const size_t d = order_[q];
        const uint64_t extent = d == split_ ? k : static_cast<uint64_t>(t_.shape[d]);
        const uint64_t stride = static_cast<uint64_t>(t_.stride[d]);
        storage += stride;
        pos += inner_[d];
        if (++step_[d] < extent) break;
        storage -= stride * extent;
        pos -= inner_[d] * extent;
        step_[d] = 0;
      }
    }
    index_[split_] += static_cast<int64_t>(k);
    for (size_t d = split_; d > 0 && index_[d] == t_.shape[d]; --d) {
      index_[d] = 0;
      ++index_[d - 1];
    }

    // Read runs of nearby storage indices together, each run at most a window long.
    const uint64_t window_elems = window_bytes_ / elem_;
    const uint64_t gap_elems = std::max<uint64_t>(1, kGatherGapBytes / elem_);
    if (window_.size() < window_bytes_) window_.resize(static_cast<size_t>(window_bytes_));
    size_t i = 0;
    while (i < n) {
      const uint64_t lo = wanted_[i].first;
      uint64_t hi = lo;
      size_t j = i + 1;
      for (; j < n; ++j) {
        const uint64_t at = wanted_[j].first;
        if (at < lo || (at > hi && at - hi > gap_elems)) break;
        const uint64_t new_hi = std::max(hi, at);
        if (new_hi - lo >= window_elems) break;
        hi = new_hi;
      }
      Status read = read_storage(lo, hi - lo + 1, window_.data());
      if (!read) return read;
      for (size_t m = i; m < j; ++m) {
        std::memcpy(buffer_.get() + static_cast<size_t>(wanted_[m].second) * elem_,
                    window_.data() + (wanted_[m].first - lo) * elem_, elem_);
      }
      i = j;
    }
    return n;
  }

  TorchTensor t_;
  std::string name_;
  int fd_;
  size_t elem_;
  uint64_t total_ = 0, produced_ = 0;
  bool contiguous_ = true;
  size_t capacity_ = 1;
  uint64_t window_bytes_ = 0;
  std::unique_ptr<unsigned char[]> buffer_;
  size_t begin_ = 0, end_ = 0;
  // Gathering (see plan_gather): elements per index of each dim, the split dim, the
  // visiting order, the logical index of the next chunk's first element, the position
  // inside the chunk's box, and the (storage index, output position) of its elements.
  std::vector<uint64_t> inner_;
  size_t split_ = 0;
  std::vector<size_t> order_;
  std::vector<int64_t> index_;
  std::vector<uint64_t> step_;
  std::vector<std::pair<uint64_t, uint32_t>> wanted_;
  std::vector<unsigned char> window_;
};

}  // namespace

bool TorchTensor::contiguous() const {
  int64_t expected = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && stride[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

std::string TorchTensor::display_name() const {
  return name.empty() ? file : file + " (tensor '" + name + "')";
}

bool is_torch_path(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".pt" || ext == ".pth";
}

namespace {

// Memory of a listed tensor, about (strings and vectors by size).
size_t listing_bytes(const TorchTensor& t) {
  return sizeof(TorchTensor) + t.file.size() + t.name.size() + t.storage_entry.size() +
         t.error.size() + (t.shape.size() + t.stride.size()) * sizeof(int64_t);
}

StatusOr<std::vector<TorchTensor>> list_tensors(const std::string& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    return Status::error(file + (fs::exists(file, ec) ? ": not a regular file" : ": no such file"));
  }
  {
    std::string head(16, '\0');
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::from_errno(file + ": cannot open", errno);
    const ssize_t got = ::pread(fd, head.data(), head.size(), 0);
    ::close(fd);
    head.resize(got > 0 ? static_cast<size_t>(got) : 0);
    if (is_legacy_format(head)) {
      return Status::error(file + ": PyTorch's legacy (pre-1.6, non-zip) format, as "
                                  "torch.save(..., _use_new_zipfile_serialization=False) writes "
                                  "it, is not supported: load it and save it again with a "
                                  "current torch.save");
    }
  }
  auto zip = ZipArchive::open(file);
  if (!zip) {
    if (zip.message().find(": out of memory") != std::string::npos) return zip.status();
    return Status::error(zip.message() + " (not a PyTorch file saved by torch.save / torch::save)");
  }
  // The one top-level folder holding data.pkl.
  std::set<std::string> prefixes;
  for (const ZipEntry& e : zip->entries()) {
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos && slash > 0 && e.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      prefixes.insert(e.name.substr(0, slash));
    }
  }
  if (prefixes.empty()) {
    return Status::error(file + ": a zip archive without <folder>/data.pkl: not a PyTorch file "
                                "saved by torch.save / torch::save");
  }
  if (prefixes.size() > 1) {
    return Status::error(file + ": several PyTorch archives in one zip file (" + *prefixes.begin() +
                         "/data.pkl, " + *std::next(prefixes.begin()) + "/data.pkl, ...)");
  }
  const std::string prefix = *prefixes.begin();
  if (const ZipEntry* order = zip->find(prefix + "/byteorder")) {
    auto text = zip->read_entry(*order, 64);
    if (!text) return text.status();
    const std::string value = trim(*text);
    if (value == "big") {
      return Status::error(file + ": saved on a big-endian machine (byteorder \"big\"); only "
                                  "little-endian files are supported");
    }
    if (value != "little") {
      return Status::error(file + ": unknown byteorder \"" + value.substr(0, 32) + "\"");
    }
  }
  const ZipEntry* pkl = zip->find(prefix + "/data.pkl");
  auto pickle = zip->read_entry(*pkl, kMaxTorchPickleBytes);
  if (!pickle) return pickle.status();
  PickleMachine machine;
  Status ran = machine.run(std::move(*pickle), file + ": " + pkl->name);
  if (!ran) return ran;

  TensorWalker walker(machine, file);
  Status walked = walker.walk(machine.root(), 0);
  if (!walked) return walked;
  TensorDescriber describer(machine, *zip, prefix);
  std::vector<TorchTensor> tensors;
  tensors.reserve(walker.found().size());
  // The names given so far (views of tensors[i].name: `tensors` never reallocates), and
  // per name given more than once the next "#<n>" suffix to try.
  std::unordered_set<std::string_view> names;
  std::unordered_map<std::string_view, uint64_t> next_suffix;
  size_t bytes = 0;
  for (FoundTensor& found : walker.found()) {
    TorchTensor t;
    t.file = file;
    t.name = std::move(found.name);
    if (auto taken = names.find(t.name); taken != names.end()) {
      uint64_t& n = next_suffix.try_emplace(*taken, 2).first->second;
      std::string other;
      do {
        other = t.name + "#" + std::to_string(n++);
      } while (names.count(other) > 0);
      t.name = std::move(other);
    }
    describer.describe(found.value, t);
    bytes += listing_bytes(t);
    if (bytes + describer.cache_bytes() > kMaxTorchListingBytes) {
      return Status::error(file + ": listing its tensors would take more than " +
                           std::to_string(kMaxTorchListingBytes >> 20) + " MiB of memory (after " +
                           std::to_string(tensors.size()) +
                           " tensors; shapes, names or messages too long?)");
    }
    tensors.push_back(std::move(t));
    names.insert(tensors.back().name);
  }
  return tensors;
}

}  // namespace

StatusOr<std::vector<TorchTensor>> list_torch_tensors(const std::string& file) {
  try {
    return list_tensors(file);
  } catch (const std::bad_alloc&) {
    return Status::error(file + ": out of memory while listing its tensors");
  } catch (const std::exception& e) {
    return Status::error(file + ": cannot list its tensors: " + e.what());
  }
}

StatusOr<std::unique_ptr<TensorSource>> open_torch_source(const TorchTensor& tensor,
                                                          size_t chunk_bytes) {
  if (!tensor.error.empty()) return Status::error(tensor.error);
  if (wire::dtype_size(tensor.dtype) == 0) return Status::error(tensor.display_name() + ": no dtype");
  const int fd = ::open(tensor.file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::from_errno(tensor.file + ": cannot open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < tensor.data_offset ||
      static_cast<uint64_t>(st.st_size) - tensor.data_offset < tensor.storage_bytes) {
    ::close(fd);
    return Status::error(tensor.display_name() + ": the file is shorter than when it was listed");
  }
  // The source owns fd only once it is built.
  try {
    return std::unique_ptr<TensorSource>(new TorchSource(tensor, fd, chunk_bytes));
  } catch (const std::bad_alloc&) {
    ::close(fd);
    return Status::error(tensor.display_name() + ": out of memory while opening it");
  } catch (const std::exception& e) {
    ::close(fd);
    return Status::error(tensor.display_name() + ": cannot open it: " + e.what());
  }
}

}  // namespace tensorscope::compare
