// writer.cc — Hdf5Sink and Hdf5ChangeBudget (see hdf5_sink.h): files created under the
// writer lock, one group per stream and layout, rows appended, change detection, the
// flush protocol, rotation and finalize. The pieces it builds on are beside it in
// hdf5/: the HDF5 objects (datasets.h), the conversion on write (element_conversion.h),
// the hash (hash.h), the flush markers (flush_marker.h) and the names (names.h).
#include <fcntl.h>
#include <hdf5.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <new>
#include <utility>

#include "hdf5/datasets.h"
#include "hdf5/element_conversion.h"
#include "hdf5/flush_marker.h"
#include "hdf5/hash.h"
#include "hdf5/names.h"
#include "tensorscope/base/posix_file.h"
#include "tensorscope/recording/hdf5_sink.h"
#include "tensorscope/recording/hdf5_support.h"
#include "tensorscope/shared/file_lock.h"

namespace tensorscope::recording {

using hdf5::convert;
using hdf5::create_dataset;
using hdf5::encode_header;
using hdf5::encode_record;
using hdf5::FlushHeader;
using hdf5::group_base_name;
using hdf5::group_digest;
using hdf5::GroupRows;
using hdf5::hash_bytes;
using hdf5::kPartialSuffix;
using hdf5::kUserblockBytes;
using hdf5::make_device_type;
using hdf5::make_type;
using hdf5::MarkState;
using hdf5::name_hash;
using hdf5::slot_offset;
using hdf5::write_int_attribute;
using hdf5::write_marker;
using hdf5::write_row;
using hdf5::write_string_attribute;

namespace {

constexpr int32_t kFormatVersion = 1;
// Chunking of `values`: as many tensors per chunk as fit in kTargetChunkBytes (at most
// kMaxRowsPerChunk), and inner dims halved until a chunk is at most kMaxChunkBytes.
constexpr uint64_t kTargetChunkBytes = uint64_t{64} << 10;
constexpr uint64_t kMaxChunkBytes = uint64_t{16} << 20;
constexpr uint64_t kMaxRowsPerChunk = 4096;
constexpr hsize_t kIndexChunkRows = 1024;  // steps, ranks, devices
// values has one more dim than the tensor; HDF5 allows H5S_MAX_RANK dims.
constexpr size_t kMaxTensorDims = H5S_MAX_RANK - 1;
// Numbers tried when a just-created partial file is taken by a cleaner (see open_file).
constexpr int kMaxCreateAttempts = 16;
// How far past the file's end the end of allocated space is moved after a flush.
constexpr hsize_t kEoaGuardBytes = 8;

bool valid_dtype(wire::DType dtype) {
  const auto v = static_cast<uint8_t>(dtype);
  return v >= 1 && v <= wire::kMaxDType;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace

// ---- private types ----

struct Hdf5Sink::Layout {
  wire::DType stored = wire::DType::kInvalid;
  std::vector<int64_t> shape;
  bool operator==(const Layout& o) const { return stored == o.stored && shape == o.shape; }
};

struct Hdf5Sink::OpenGroup {
  Hid group;
  Hid values;
  Hid steps;
  Hid ranks;
  Hid devices;
  Hid value_type;
  Hid device_type;
  std::vector<hsize_t> row_dims;  // [1, *shape]
  hsize_t rows = 0;
};

struct Hdf5Sink::StreamState {
  uint64_t hash = 0;
  wire::DType dtype = wire::DType::kInvalid;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
  bool has_copy = false;
  // No copy because the budget refused it: the next value is not skipped on its hash.
  bool copy_refused = false;
  std::vector<unsigned char> copy;  // the received bytes, when has_copy (counted in budget_)
};

struct Hdf5Sink::OpenFile {
  uint64_t index = 0;
  std::string partial;
  std::string final_name;
  // The sink's own descriptor of `partial`: flush markers, fsync, and the writer lock
  // (see hdf5_sink.h) when `locked`.
  UniqueFd fd;
  bool locked = false;
  Hid file;
  std::chrono::steady_clock::time_point created;
  std::chrono::steady_clock::time_point last_flush;  // or creation
  bool dirty = false;                                // rows were added since the last flush
  FlushHeader header;                                // the header as last written
  uint64_t payload_bytes = 0;
  std::map<std::string, std::unique_ptr<OpenGroup>> groups;
};

// ---- Hdf5Sink ----

Hdf5Sink::Hdf5Sink(std::string dir, std::string base, Hdf5SinkOptions options, wire::DType target, uint64_t next_index)
    : dir_(std::move(dir)),
      base_(std::move(base)),
      options_(std::move(options)),
      target_(target),
      next_index_(next_index) {
  budget_ = options_.change_budget != nullptr ? options_.change_budget
                                              : std::make_shared<Hdf5ChangeBudget>(options_.change_detection_bytes);
}

Hdf5Sink::~Hdf5Sink() {
  const Status s = finalize();
  if (!s.is_ok()) spdlog::warn("tensorscope: HDF5 sink: {}", s.message());
  budget_->release(kept_copy_bytes_);  // the copies go with last_
}

bool Hdf5ChangeBudget::try_reserve(uint64_t bytes, bool* first_refusal) {
  if (first_refusal != nullptr) *first_refusal = false;
  uint64_t used = used_.load(std::memory_order_relaxed);
  for (;;) {
    if (bytes > cap_ || used > cap_ - bytes) {
      const bool first = !refused_.exchange(true, std::memory_order_relaxed);
      if (first_refusal != nullptr) *first_refusal = first;
      return false;
    }
    if (used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed)) return true;
  }
}

void Hdf5ChangeBudget::release(uint64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

std::string Hdf5Sink::final_path(uint64_t n) const { return dir_ + "/" + base_ + "." + std::to_string(n) + ".h5"; }

std::string Hdf5Sink::partial_path(uint64_t n) const {
  return dir_ + "/." + base_ + "." + std::to_string(n) + kPartialSuffix;
}

std::string Hdf5Sink::recovered_path(uint64_t n) const {
  return dir_ + "/" + base_ + "." + std::to_string(n) + ".recovered.h5";
}

bool Hdf5Sink::number_taken(uint64_t n) const {
  return path_exists(final_path(n)) || path_exists(partial_path(n)) || path_exists(recovered_path(n));
}

StatusOr<std::unique_ptr<Hdf5Sink>> Hdf5Sink::open(std::string dir, std::string base, Hdf5SinkOptions options) {
  try {
    quiet_hdf5();
    if (base.empty() || base.find('/') != std::string::npos || base == "." || base == "..") {
      return Status::error("HDF5 sink: invalid base name '" + base + "'");
    }
    if (dir.empty()) dir = ".";
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    wire::DType target = wire::DType::kInvalid;
    if (options.dtype == "float32") {
      target = wire::DType::kFloat32;
    } else if (options.dtype == "float16") {
      target = wire::DType::kFloat16;
    } else if (options.dtype == "float64") {
      target = wire::DType::kFloat64;
    } else if (options.dtype != "keep") {
      return Status::error("HDF5 sink: unknown dtype '" + options.dtype + "' (keep, float32, float16 or float64)");
    }
    if (options.gzip_level < 0 || options.gzip_level > 9) {
      return Status::error("HDF5 sink: gzip_level " + std::to_string(options.gzip_level) + " is outside 0..9");
    }
    if (options.flush_seconds < 0) {
      return Status::error("HDF5 sink: flush_seconds " + std::to_string(options.flush_seconds) +
                           " is negative (0: flush only before closing)");
    }
    if (options.gzip_level > 0 && H5Zfilter_avail(H5Z_FILTER_DEFLATE) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return Status::error("HDF5 sink: this HDF5 library has no deflate (gzip) filter");
    }
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Status::error(dir + ": cannot create directory: " + ec.message());
    if (!std::filesystem::is_directory(dir, ec)) return Status::error(dir + ": not a directory");
    std::unique_ptr<Hdf5Sink> sink(new Hdf5Sink(std::move(dir), std::move(base), std::move(options), target, 0));
    // Never reuse the number of an existing file, finished, partial or recovered.
    while (sink->number_taken(sink->next_index_)) ++sink->next_index_;
    return sink;
  } catch (const std::exception& e) {
    return Status::error("HDF5 sink: cannot open: " + std::string(e.what()));
  } catch (...) {
    return Status::error("HDF5 sink: cannot open: unknown error");
  }
}

bool Hdf5Sink::rotate_due() const {
  if (file_ == nullptr || options_.rotate_seconds <= 0) return false;
  return std::chrono::steady_clock::now() - file_->created >= std::chrono::seconds(options_.rotate_seconds);
}

Status Hdf5Sink::open_file() {
  auto file = std::make_unique<OpenFile>();
  // The partial file is created, and its writer lock taken, before HDF5 writes to it
  // (see "Writer lock" in hdf5_sink.h). A cleaner in another process may lock the
  // empty file in between (it then removes it): this number is left to the cleaner and
  // the next one is tried.
  for (int attempt = 1;; ++attempt) {
    while (number_taken(next_index_)) ++next_index_;
    const uint64_t n = next_index_++;
    const std::string partial = partial_path(n);
    UniqueFd fd(::open(partial.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
    if (!fd.valid()) {
      const int err = errno;
      if (err == EEXIST && attempt < kMaxCreateAttempts) continue;  // created meanwhile
      return Status::error(partial + ": cannot create: " + errno_text(err));
    }
    const int err = try_lock_file(fd.get());
    if (err == 0 && !is_same_file(fd.get(), partial)) {
      // Locked after a cleaner removed it: the lock is on a file without a name.
      if (attempt < kMaxCreateAttempts) continue;
      return Status::error(partial + ": cannot create: removed by another process, " + std::to_string(attempt) +
                           " times");
    }
    if (lock_held_elsewhere(err)) {
      if (attempt < kMaxCreateAttempts) continue;
      return Status::error(partial + ": cannot lock: held by another process, " + std::to_string(attempt) + " times");
    }
    if (err != 0) {
      // No OFD locks on this file system: write unlocked (cleaners leave a file they
      // cannot lock alone, so it is never taken away), and say so once.
      static std::atomic<bool> warned{false};
      if (!warned.exchange(true)) {
        spdlog::warn(
            "tensorscope: HDF5 sink: {}: cannot take the writer lock ({}); partial "
            "files are written unlocked and never recovered",
            partial, errno_text(err));
      }
    }
    file->index = n;
    file->partial = partial;
    file->locked = err == 0;
    file->fd = std::move(fd);
    break;
  }
  file->final_name = final_path(file->index);
  // Metadata reaches the file only when flushed or closed; freed space is never reused
  // (see "Flushes" in hdf5_sink.h).
  Hid fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  Hid fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
  H5AC_cache_config_t cache{};
  cache.version = H5AC__CURR_CACHE_CONFIG_VERSION;
  bool properties = fapl.valid() && fcpl.valid() && H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG) >= 0 &&
      H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST) >= 0 &&
      H5Pget_mdc_config(fapl.get(), &cache) >= 0;
  if (properties) {
    cache.incr_mode = H5C_incr__off;
    cache.flash_incr_mode = H5C_flash_incr__off;
    cache.decr_mode = H5C_decr__off;
    cache.evictions_enabled = false;
    properties = H5Pset_mdc_config(fapl.get(), &cache) >= 0 && H5Pset_userblock(fcpl.get(), kUserblockBytes) >= 0 &&
        H5Pset_file_space_strategy(fcpl.get(), H5F_FSPACE_STRATEGY_NONE, false, 1) >= 0;
  }
  if (!properties) {
    ::unlink(file->partial.c_str());
    return hdf5_error(file->partial, "cannot make file properties");
  }
  // The file exists (empty, ours): HDF5 truncates it.
  file->file = Hid(H5Fcreate(file->partial.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()), H5Fclose);
  if (!file->file.valid()) {
    Status s = hdf5_error(file->partial, "cannot create");
    ::unlink(file->partial.c_str());
    return s;
  }
  Status s = write_string_attribute(file->file.get(), "format", kHdf5FormatName, file->partial);
  if (s.is_ok()) {
    s = write_int_attribute(file->file.get(), "format_version", H5T_STD_I32LE, &kFormatVersion, 1, true, file->partial);
  }
  // The header "created": no flush completed yet.
  if (s.is_ok()) s = write_marker(file->fd.get(), file->partial, 0, encode_header(file->header));
  if (!s.is_ok()) {
    file->file.reset();
    ::unlink(file->partial.c_str());
    return s;
  }
  file->created = std::chrono::steady_clock::now();
  file->last_flush = file->created;
  file_ = std::move(file);
  return Status::ok();
}

StatusOr<Hdf5Sink::OpenGroup*> Hdf5Sink::group_for(const Hdf5Record& record, const std::string& group_name,
                                                   wire::DType stored) {
  auto it = file_->groups.find(group_name);
  if (it != file_->groups.end()) return it->second.get();

  const std::string where = file_->partial + ": group '" + group_name + "'";
  auto g = std::make_unique<OpenGroup>();
  Hid lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  if (!lcpl.valid() || H5Pset_char_encoding(lcpl.get(), H5T_CSET_UTF8) < 0) {
    return hdf5_error(where, "cannot make link properties");
  }
  g->group = Hid(H5Gcreate2(file_->file.get(), group_name.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (!g->group.valid()) return hdf5_error(where, "cannot create");
  const hid_t gid = g->group.get();
  Status s = write_string_attribute(gid, "stream", record.stream, where);
  if (s.is_ok()) s = write_string_attribute(gid, "kind", record.kind, where);
  if (s.is_ok()) s = write_string_attribute(gid, "dtype", wire::dtype_name(stored), where);
  if (s.is_ok() && !record.shape.empty()) {
    s = write_int_attribute(gid, "shape", H5T_STD_I64LE, record.shape.data(), record.shape.size(), false, where);
  }
  if (!s.is_ok()) return s;

  g->value_type = make_type(stored);
  g->device_type = make_device_type();
  if (!g->value_type.valid() || !g->device_type.valid()) {
    return hdf5_error(where, "cannot make element types");
  }
  // values: chunk = [rows, *inner] (see kTargetChunkBytes).
  const size_t item = wire::dtype_size(stored);
  std::vector<hsize_t> inner;
  std::vector<hsize_t> chunk{1};
  uint64_t row_bytes = item;
  for (const int64_t d : record.shape) {
    inner.push_back(static_cast<hsize_t>(d));
    chunk.push_back(d == 0 ? 1 : static_cast<hsize_t>(d));
    row_bytes *= d == 0 ? 1 : static_cast<uint64_t>(d);
  }
  chunk[0] = static_cast<hsize_t>(
      std::clamp<uint64_t>(kTargetChunkBytes / std::max<uint64_t>(row_bytes, 1), 1, kMaxRowsPerChunk));
  uint64_t chunk_bytes = row_bytes * chunk[0];
  while (chunk_bytes > kMaxChunkBytes) {
    auto axis = std::find_if(chunk.begin() + 1, chunk.end(), [](hsize_t c) { return c > 1; });
    if (axis == chunk.end()) break;  // cannot happen: a row of single elements is small
    chunk_bytes = chunk_bytes / *axis * ((*axis + 1) / 2);
    *axis = (*axis + 1) / 2;
  }
  g->values = create_dataset(gid, "values", g->value_type.get(), inner, chunk, options_.gzip_level, item);
  if (!g->values.valid()) return hdf5_error(where, "cannot create dataset 'values'");
  if (stored == wire::DType::kBFloat16) {
    s = write_string_attribute(g->values.get(), "encoding", kHdf5BFloat16Encoding, where);
    if (!s.is_ok()) return s;
  }
  const std::vector<hsize_t> index_chunk{kIndexChunkRows};
  g->steps = create_dataset(gid, "steps", H5T_STD_I64LE, {}, index_chunk, options_.gzip_level, 8);
  if (!g->steps.valid()) return hdf5_error(where, "cannot create dataset 'steps'");
  g->ranks = create_dataset(gid, "ranks", H5T_STD_I32LE, {}, index_chunk, options_.gzip_level, 4);
  if (!g->ranks.valid()) return hdf5_error(where, "cannot create dataset 'ranks'");
  g->devices = create_dataset(gid, "devices", g->device_type.get(), {}, index_chunk, options_.gzip_level, 1);
  if (!g->devices.valid()) return hdf5_error(where, "cannot create dataset 'devices'");
  g->row_dims = {1};
  g->row_dims.insert(g->row_dims.end(), inner.begin(), inner.end());
  OpenGroup* raw = g.get();
  file_->groups.emplace(group_name, std::move(g));
  return raw;
}

Status Hdf5Sink::write_record(const Hdf5Record& record, const std::string& group_name, wire::DType stored,
                              const void* values, uint64_t value_bytes) {
  auto group = group_for(record, group_name, stored);
  if (!group.is_ok()) return group.status();
  OpenGroup* g = *group;
  const hsize_t row = g->rows;
  const int32_t rank = record.rank;
  char device[wire::kDeviceBytes] = {};
  std::memcpy(device, record.device.data(), std::min(record.device.size(), sizeof(device)));
  const std::vector<hsize_t> one{1};
  const bool written = write_row(g->values.get(), g->value_type.get(), g->row_dims, row, values) &&
      write_row(g->steps.get(), H5T_NATIVE_INT64, one, row, &record.step) &&
      write_row(g->ranks.get(), H5T_NATIVE_INT32, one, row, &rank) &&
      write_row(g->devices.get(), g->device_type.get(), one, row, device);
  if (!written) {
    Status s = hdf5_error(file_->partial + ": group '" + group_name + "'",
                          "cannot append step " + std::to_string(record.step));
    // Put every dataset back to `row` rows, so the four stay aligned.
    std::vector<hsize_t> extent = g->row_dims;
    extent[0] = row;
    H5Dset_extent(g->values.get(), extent.data());
    for (const Hid* d : {&g->steps, &g->ranks, &g->devices}) H5Dset_extent(d->get(), &row);
    H5Eclear2(H5E_DEFAULT);
    return s;
  }
  g->rows = row + 1;
  file_->payload_bytes += value_bytes;
  file_->dirty = true;
  return Status::ok();
}

Status Hdf5Sink::append(const Hdf5Record& record) {
  try {
    quiet_hdf5();
    // Validate before anything is written.
    const std::string what = "HDF5 sink: stream '" + record.stream + "' step " + std::to_string(record.step);
    if (record.stream.empty()) return Status::error("HDF5 sink: empty stream name");
    if (record.device.size() > wire::kDeviceBytes) {
      return Status::error(what + ": device name '" + record.device + "' is longer than " +
                           std::to_string(wire::kDeviceBytes) + " bytes");
    }
    if (!valid_dtype(record.dtype)) {
      return Status::error(what + ": invalid dtype " + std::to_string(static_cast<int>(record.dtype)));
    }
    if (record.shape.size() > kMaxTensorDims) {
      return Status::error(what + ": " + std::to_string(record.shape.size()) + " dims (HDF5 stores at most " +
                           std::to_string(kMaxTensorDims) + ")");
    }
    const size_t item = wire::dtype_size(record.dtype);
    uint64_t numel = 1;
    for (const int64_t d : record.shape) {
      if (d < 0) return Status::error(what + ": negative dim in shape " + shape_text(record.shape));
      if (d != 0 && numel > std::numeric_limits<uint64_t>::max() / item / static_cast<uint64_t>(d)) {
        return Status::error(what + ": shape " + shape_text(record.shape) + " is too large");
      }
      numel *= static_cast<uint64_t>(d);
    }
    if (numel * item != record.bytes) {
      return Status::error(what + ": " + std::to_string(record.bytes) + " bytes do not match shape " +
                           shape_text(record.shape) + " of " + wire::dtype_name(record.dtype) + " (" +
                           std::to_string(numel * item) + " bytes)");
    }
    if (record.bytes > 0 && record.data == nullptr) return Status::error(what + ": data is null");

    Status rotated = Status::ok();
    if (rotate_due()) rotated = finalize();

    // Change detection, on the received bytes.
    const auto key = std::make_tuple(record.stream, record.device, record.rank);
    uint64_t hash = 0;
    bool over_cap = false;  // maybe unchanged, but the previous value has no copy (the cap)
    if (options_.change_detection) {
      hash = hash_bytes(record.data, record.bytes);
      auto it = last_.find(key);
      if (it != last_.end()) {
        const StreamState& prev = it->second;
        bool same =
            prev.hash == hash && prev.dtype == record.dtype && prev.shape == record.shape && prev.bytes == record.bytes;
        if (same && prev.has_copy) {
          same = record.bytes == 0 || std::memcmp(prev.copy.data(), record.data, record.bytes) == 0;
        } else if (same && prev.copy_refused) {
          same = false;  // never skipped on the hash alone: stored, and counted
          over_cap = true;
        }
        if (same) {
          ++skipped_unchanged_;
          return rotated;
        }
      }
    }

    // The stored values: the received bytes, or converted ones.
    const wire::DType stored = target_ == wire::DType::kInvalid ? record.dtype : target_;
    const void* values = record.data;
    uint64_t value_bytes = record.bytes;
    if (stored != record.dtype) {
      value_bytes = numel * wire::dtype_size(stored);
      scratch_.resize(value_bytes);
      convert(record.dtype, static_cast<const unsigned char*>(record.data), numel, stored, scratch_.data());
      values = scratch_.data();
    } else if (stored == wire::DType::kBool) {
      // Any non-zero byte is true; the enum holds 0 and 1.
      scratch_.resize(numel);
      const auto* src = static_cast<const unsigned char*>(record.data);
      for (uint64_t i = 0; i < numel; ++i) scratch_[i] = src[i] != 0 ? 1 : 0;
      values = scratch_.data();
    }

    // The group of this layout (see the top of hdf5_sink.h).
    std::vector<Layout>& layouts = layouts_[record.stream];
    const Layout layout{stored, record.shape};
    auto found = std::find(layouts.begin(), layouts.end(), layout);
    const size_t layout_index = static_cast<size_t>(found - layouts.begin());
    if (found == layouts.end()) layouts.push_back(layout);
    std::string group_name = group_base_name(record.stream);
    if (layout_index > 0) group_name += "@" + std::to_string(layout_index);

    if (file_ == nullptr) {
      Status s = open_file();
      if (!s.is_ok()) return s;
    }
    Status s = write_record(record, group_name, stored, values, value_bytes);
    if (!s.is_ok()) return s;
    ++appended_;
    if (over_cap) ++stored_over_cap_;

    if (options_.change_detection) {
      StreamState& state = last_[key];
      state.hash = hash;
      state.dtype = record.dtype;
      state.shape = record.shape;
      state.bytes = record.bytes;
      keep_copy(state, record);
    }
    if (options_.rotate_bytes > 0 && file_->payload_bytes >= options_.rotate_bytes) {
      s = finalize();
      if (!s.is_ok()) return s;
    }
    return rotated;
  } catch (const std::exception& e) {
    return Status::error("HDF5 sink: cannot append to stream '" + record.stream + "': " + e.what());
  } catch (...) {
    return Status::error("HDF5 sink: cannot append to stream '" + record.stream + "': unknown error");
  }
}

void Hdf5Sink::keep_copy(StreamState& state, const Hdf5Record& record) {
  // The previous copy goes first: its memory counts no more.
  if (state.has_copy) {
    budget_->release(state.copy.size());
    kept_copy_bytes_ -= state.copy.size();
  }
  state.has_copy = false;
  state.copy_refused = false;
  auto drop = [&state] { std::vector<unsigned char>().swap(state.copy); };
  if (record.bytes > kHdf5ExactCompareBytes) {
    drop();  // compared by hash alone, by design (see hdf5_sink.h)
    return;
  }
  bool first_refusal = false;
  if (!budget_->try_reserve(record.bytes, &first_refusal)) {
    drop();
    state.copy_refused = true;
    if (first_refusal) {
      spdlog::warn(
          "tensorscope: HDF5 change detection: a copy of '{}' ({} bytes) would exceed "
          "the cap of {} bytes (record.hdf5_change_detection_bytes, {} in use); values "
          "whose previous copy is not kept are stored even when unchanged (counted as "
          "stored_over_cap; logged once)",
          record.stream, record.bytes, budget_->cap(), budget_->used());
    }
    return;
  }
  try {
    const auto* src = static_cast<const unsigned char*>(record.data);
    if (state.copy.size() == record.bytes) {
      if (record.bytes > 0) std::memcpy(state.copy.data(), src, record.bytes);
    } else {
      std::vector<unsigned char>(src, src + record.bytes).swap(state.copy);  // capacity == size
    }
  } catch (const std::bad_alloc&) {
    budget_->release(record.bytes);
    drop();
    state.copy_refused = true;
    return;
  }
  state.has_copy = true;
  kept_copy_bytes_ += record.bytes;
}

Status Hdf5Sink::poll() {
  if (rotate_due()) return finalize();
  if (!flush_due()) return Status::ok();
  return flush();
}

bool Hdf5Sink::flush_due() const {
  if (file_ == nullptr || !file_->dirty || options_.flush_seconds <= 0) return false;
  return std::chrono::steady_clock::now() - file_->last_flush >= std::chrono::seconds(options_.flush_seconds);
}

Status Hdf5Sink::flush() {
  if (file_ == nullptr || !file_->dirty) return Status::ok();
  try {
    quiet_hdf5();
    return flush_file(true);
  } catch (const std::exception& e) {
    return Status::error("HDF5 sink: cannot flush: " + std::string(e.what()));
  } catch (...) {
    return Status::error("HDF5 sink: cannot flush: unknown error");
  }
}

// The flush protocol of "Flushes" in hdf5_sink.h. The dataset handles are closed
// first: HDF5 then writes their cached chunks without copying each first (as H5Fflush
// does for open datasets: several times slower, and the chunk caches stay full), and
// H5Fflush writes metadata only. `reopen`: open them again afterwards (not when the
// file is being finalized).
Status Hdf5Sink::flush_file(bool reopen) {
  OpenFile& f = *file_;
  auto report = [this](Hdf5FlushStage stage) {
    if (flush_hook_) flush_hook_(stage);
  };
  f.last_flush = std::chrono::steady_clock::now();  // a failed flush is retried an interval later
  std::vector<GroupRows> groups;
  groups.reserve(f.groups.size());
  for (const auto& [name, g] : f.groups) groups.push_back({name_hash(name), g->rows});
  FlushHeader header = f.header;  // the last completed flush, as written
  header.state = MarkState::kFlushing;
  header.generation = std::max(header.generation, header.completed) + 1;
  Status s = write_marker(f.fd.get(), f.partial, 0, encode_header(header));
  if (!s.is_ok()) return s;
  f.header = header;
  report(Hdf5FlushStage::kMarkedFlushing);

  // Closing a dataset writes its cached chunks: a failure there (disk full) is kept.
  bool closed = true;
  for (auto& [name, g] : f.groups) {
    for (Hid* h : {&g->values, &g->steps, &g->ranks, &g->devices}) {
      if (!h->close()) closed = false;
    }
  }
  if (!closed) {
    // Chunks may be lost (HDF5 drops those it cannot write): the file can hold no
    // complete flush any more. It is given up under its partial name with the header
    // "flushing" (recovery cuts it back to its last completed flush); the next append
    // starts the next file.
    s = hdf5_error(f.partial,
                   "cannot write its datasets (given up under this name; its last "
                   "completed flush is kept)");
    // Closing would write the metadata of rows whose chunks are lost: HDF5's descriptor
    // is pointed at /dev/null (read-only) first, so its writes fail from now on.
    void* handle = nullptr;
    if (H5Fget_vfd_handle(f.file.get(), H5P_DEFAULT, &handle) >= 0 && handle != nullptr) {
      UniqueFd null_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
      if (null_fd.valid()) ::dup2(null_fd.get(), *static_cast<int*>(handle));
    }
    close_file_handles();
    file_->file.reset();
    H5Eclear2(H5E_DEFAULT);
    file_.reset();
    return s;
  }
  if (H5Fflush(f.file.get(), H5F_SCOPE_LOCAL) < 0) {
    s = hdf5_error(f.partial, "cannot flush");
  }
  // Space freed from now on at the file's end is not handed out again (see hdf5_sink.h).
  if (s.is_ok() && H5Fincrement_filesize(f.file.get(), kEoaGuardBytes) < 0) {
    s = hdf5_error(f.partial, "cannot move the end of allocated space");
  }
  if (s.is_ok()) {
    report(Hdf5FlushStage::kHdf5Flushed);
    FlushHeader done;
    done.state = MarkState::kFlushed;
    done.generation = header.generation;
    done.completed = header.generation;
    done.groups = groups.size();
    done.digest = group_digest(groups);
    done.record_complete = groups.size() <= kHdf5RecordGroups;
    if (done.record_complete) {
      // The slot the header does not name: a kill before the header below keeps the
      // previous record readable.
      done.record_slot = header.completed > 0 && header.record_complete ? 1 - header.record_slot : 0;
      s = write_marker(f.fd.get(), f.partial, slot_offset(done.record_slot), encode_record(done.generation, groups));
    }
    if (s.is_ok()) s = write_marker(f.fd.get(), f.partial, 0, encode_header(done));
    if (s.is_ok()) {
      f.header = done;
      f.dirty = false;
      ++flushes_;
      report(Hdf5FlushStage::kMarkedFlushed);
    }
  }
  if (!reopen) return s;
  // Appends go on (after a failure too: the rows stay in the file, the next flush or
  // finalize tries again).
  for (auto& [name, g] : f.groups) {
    const std::pair<Hid*, const char*> datasets[] = {
        {&g->values, "values"}, {&g->steps, "steps"}, {&g->ranks, "ranks"}, {&g->devices, "devices"}};
    for (const auto& [h, dataset_name] : datasets) {
      *h = Hid(H5Dopen2(g->group.get(), dataset_name, H5P_DEFAULT), H5Dclose);
      if (!h->valid() && s.is_ok()) {
        s = hdf5_error(f.partial + ": group '" + name + "'",
                       std::string("cannot reopen dataset '") + dataset_name + "'");
      }
    }
  }
  return s;
}

bool Hdf5Sink::close_file_handles() {
  // Closing a dataset writes its cached chunks: a failure there (disk full) is kept.
  bool ok = true;
  for (auto& [name, g] : file_->groups) {
    for (Hid* h : {&g->devices, &g->ranks, &g->steps, &g->values, &g->group}) {
      if (!h->close()) ok = false;
    }
  }
  file_->groups.clear();
  return ok;
}

Status Hdf5Sink::finalize() {
  if (file_ == nullptr) return Status::ok();
  try {
    quiet_hdf5();
    // The last flush: the markers then name everything the file holds.
    const Status flushed = file_->dirty ? flush_file(false) : Status::ok();
    if (file_ == nullptr) return flushed;  // given up (see flush_file)
    const bool handles_closed = close_file_handles();
    std::unique_ptr<OpenFile> file = std::move(file_);  // no file is open, whatever happens
    const bool file_closed = file->file.close();
    if (!flushed.is_ok()) return Status::error(flushed.message() + " (the file keeps this name)");
    if (!handles_closed || !file_closed) {
      return hdf5_error(file->partial, "cannot close (the file keeps this name)");
    }
    // The sink's descriptor is the same file; HDF5's own one is closed.
    if (file->fd.valid() && ::fsync(file->fd.get()) != 0) {
      return Status::error(file->partial + ": fsync failed: " + errno_text(errno) + " (the file keeps this name)");
    }
    if (!file->fd.valid()) {
      Status synced = fsync_path(file->partial, false);
      if (!synced) return Status::error(synced.message() + " (the file keeps this name)");
    }
    if (::rename(file->partial.c_str(), file->final_name.c_str()) != 0) {
      const int err = errno;
      return Status::error("cannot rename " + file->partial + " to " + file->final_name + ": " + errno_text(err));
    }
    finished_files_.push_back(file->final_name);
    file->fd.reset();  // renamed: the lock is not needed any more
    // Make the rename durable; best effort, the file is in place already.
    if (Status synced = fsync_path(dir_, true); !synced) spdlog::warn("tensorscope: {}", synced.message());
    return Status::ok();
  } catch (const std::exception& e) {
    file_.reset();
    return Status::error("HDF5 sink: cannot finalize: " + std::string(e.what()));
  } catch (...) {
    file_.reset();
    return Status::error("HDF5 sink: cannot finalize: unknown error");
  }
}

}  // namespace tensorscope::recording
