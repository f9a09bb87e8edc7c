// torch_tensor_describer.cc — see torch_tensor_describer.h.
#include "compare/torch_tensor_describer.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "compare/torch_pickle_calls.h"

namespace tensorscope::compare {
namespace {

using wire::DType;

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
      {"FloatStorage", DType::kFloat32},
      {"float32", DType::kFloat32},
      {"float", DType::kFloat32},
      {"DoubleStorage", DType::kFloat64},
      {"float64", DType::kFloat64},
      {"double", DType::kFloat64},
      {"HalfStorage", DType::kFloat16},
      {"float16", DType::kFloat16},
      {"half", DType::kFloat16},
      {"BFloat16Storage", DType::kBFloat16},
      {"bfloat16", DType::kBFloat16},
      {"CharStorage", DType::kInt8},
      {"int8", DType::kInt8},
      {"ShortStorage", DType::kInt16},
      {"int16", DType::kInt16},
      {"short", DType::kInt16},
      {"IntStorage", DType::kInt32},
      {"int32", DType::kInt32},
      {"int", DType::kInt32},
      {"LongStorage", DType::kInt64},
      {"int64", DType::kInt64},
      {"long", DType::kInt64},
      {"ByteStorage", DType::kUInt8},
      {"uint8", DType::kUInt8},
      {"BoolStorage", DType::kBool},
      {"bool", DType::kBool},
  };
  static const std::map<std::string, std::string, std::less<>> kUnsupported = {
      {"ComplexFloatStorage", "complex64"},        {"ComplexDoubleStorage", "complex128"},
      {"ComplexHalfStorage", "complex32"},         {"QInt8Storage", "qint8 (quantized)"},
      {"QUInt8Storage", "quint8 (quantized)"},     {"QInt32Storage", "qint32 (quantized)"},
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

struct StorageInfo {
  uint64_t data_offset = 0;
  uint64_t bytes = 0;
  std::string error;
};

}  // namespace

class TensorDescriber::Impl {
 public:
  Impl(const PickleMachine& m, const ZipArchive& zip, std::string prefix)
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
      info.error = "its storage entry '" + prefix_ + "/data/" + std::string(key) + "' is missing from the archive";
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
    if (is_torch_utils(m_, callable, "_rebuild_from_type_v2") || is_torch_utils(m_, callable, "_rebuild_from_type") ||
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
  std::string describe_rebuild(PickleValue callable, const std::vector<PickleValue>& args, TorchTensor& t) {
    if (args.size() < 4)
      return "corrupt tensor: " + m_.global_name(callable) + " with " + std::to_string(args.size()) + " arguments";
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
      return "corrupt tensor: " + std::to_string(t.shape.size()) + " sizes but " + std::to_string(t.stride.size()) +
          " strides";
    }
    if (t.storage_offset < 0) return "corrupt tensor: negative storage offset";
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (t.shape[d] < 0 || t.stride[d] < 0) return "corrupt tensor: negative size or stride";
    }
    // A longer entry name could not be in the archive (zip_archive.h).
    if (prefix_.size() + 6 + key->text.size() > kMaxZipNameBytes) {
      return "corrupt tensor: its storage key of " + std::to_string(key->text.size()) + " bytes ('" + clip(key->text) +
          "') is too long";
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
      return "corrupt or truncated: its storage holds " + std::to_string(storage_numel) + " elements but entry '" +
          t.storage_entry + "' has only " + std::to_string(info.bytes) + " bytes";
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
            (location != nullptr ? clip(location->text) + ", " : std::string()) + std::to_string(storage_numel) +
            " elements) ends before";
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

TensorDescriber::TensorDescriber(const PickleMachine& m, const ZipArchive& zip, std::string prefix)
    : impl_(std::make_unique<Impl>(m, zip, std::move(prefix))) {}
TensorDescriber::~TensorDescriber() = default;
void TensorDescriber::describe(PickleValue v, TorchTensor& t) { impl_->describe(v, t); }
size_t TensorDescriber::cache_bytes() const { return impl_->cache_bytes(); }

}  // namespace tensorscope::compare
