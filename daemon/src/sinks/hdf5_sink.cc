// hdf5_sink.cc — see hdf5_sink.h.
#include "sinks/hdf5_sink.h"

#include <fcntl.h>
#include <hdf5.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <utility>

#include "tensorscope/plotting/tensor_view.h"
#include "sinks/hdf5_support.h"

namespace tensorscope::daemon {
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

std::string errno_text(int err) { return std::strerror(err); }

// ---- element types ----

// The HDF5 file type of `stored` (also used as the memory type: the bytes are written
// unchanged). Invalid on failure.
Hid make_type(wire::DType stored) {
  hid_t base = H5I_INVALID_HID;
  switch (stored) {
    case wire::DType::kFloat32: base = H5T_IEEE_F32LE; break;
    case wire::DType::kFloat64: base = H5T_IEEE_F64LE; break;
    case wire::DType::kBFloat16: base = H5T_STD_U16LE; break;
    case wire::DType::kInt8: base = H5T_STD_I8LE; break;
    case wire::DType::kInt16: base = H5T_STD_I16LE; break;
    case wire::DType::kInt32: base = H5T_STD_I32LE; break;
    case wire::DType::kInt64: base = H5T_STD_I64LE; break;
    case wire::DType::kUInt8: base = H5T_STD_U8LE; break;
    case wire::DType::kFloat16: {
      // IEEE binary16, laid out as h5py does for numpy float16.
      Hid t(H5Tcopy(H5T_IEEE_F32LE), H5Tclose);
      if (!t.valid() || H5Tset_fields(t.get(), 15, 10, 5, 0, 10) < 0 ||
          H5Tset_size(t.get(), 2) < 0 || H5Tset_ebias(t.get(), 15) < 0) {
        return Hid();
      }
      return t;
    }
    case wire::DType::kBool: {
      // The enum h5py maps to numpy bool.
      Hid t(H5Tenum_create(H5T_NATIVE_INT8), H5Tclose);
      const int8_t no = 0;
      const int8_t yes = 1;
      if (!t.valid() || H5Tenum_insert(t.get(), "FALSE", &no) < 0 ||
          H5Tenum_insert(t.get(), "TRUE", &yes) < 0) {
        return Hid();
      }
      return t;
    }
    case wire::DType::kInvalid: break;
  }
  if (base == H5I_INVALID_HID) return Hid();
  return Hid(H5Tcopy(base), H5Tclose);
}

// Fixed-length device names (wire::kDeviceBytes, NUL-padded). Variable-length strings
// would cost a global-heap object per row and were measured 10x slower to append.
Hid make_device_type() {
  Hid t(H5Tcopy(H5T_C_S1), H5Tclose);
  if (!t.valid() || H5Tset_size(t.get(), wire::kDeviceBytes) < 0 ||
      H5Tset_strpad(t.get(), H5T_STR_NULLPAD) < 0) {
    return Hid();
  }
  return t;
}

Hid make_string_type() {
  Hid t(H5Tcopy(H5T_C_S1), H5Tclose);
  if (!t.valid() || H5Tset_size(t.get(), H5T_VARIABLE) < 0 ||
      H5Tset_cset(t.get(), H5T_CSET_UTF8) < 0) {
    return Hid();
  }
  return t;
}

bool valid_dtype(wire::DType dtype) {
  const auto v = static_cast<uint8_t>(dtype);
  return v >= 1 && v <= wire::kMaxDType;
}

// float64 to IEEE binary16 bits, rounded to nearest even; beyond the range +-Inf.
uint16_t double_to_half(double d) {
  const uint16_t sign = std::signbit(d) ? 0x8000 : 0;
  if (std::isnan(d)) {
    uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof(bits));
    return static_cast<uint16_t>(sign | 0x7e00 | ((bits >> 43) & 0x1ff));  // quiet, top payload
  }
  const double a = std::fabs(d);
  if (a >= 65520.0) return sign | 0x7c00;  // rounds up past 65504: Inf
  if (a < 0x1p-14) {
    // Subnormal (or zero): a = m * 2^-24, m in [0, 1024]; m == 1024 is the smallest normal.
    const double m = std::nearbyint(a * 0x1p24);
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(m));
  }
  int e = 0;
  const double f = std::frexp(a, &e);                      // a = f * 2^e, f in [0.5, 1)
  double mant = std::nearbyint((f * 2.0 - 1.0) * 1024.0);  // exact before rounding
  int biased = e - 1 + 15;
  if (mant >= 1024.0) {
    mant = 0;
    ++biased;
  }
  if (biased >= 31) return sign | 0x7c00;
  return static_cast<uint16_t>(sign | (biased << 10) | static_cast<uint16_t>(mant));
}

template <typename S>
S load(const unsigned char* src, uint64_t i) {
  S value;
  std::memcpy(&value, src + i * sizeof(S), sizeof(S));
  return value;
}

template <typename D>
void store(unsigned char* dst, uint64_t i, D value) {
  std::memcpy(dst + i * sizeof(D), &value, sizeof(D));
}

// Converts `n` elements read by `read(src, i)` to `target` (float32/16/64) at `dst`.
template <typename Read>
void convert_elements(const unsigned char* src, uint64_t n, wire::DType target,
                      unsigned char* dst, Read read) {
  switch (target) {
    case wire::DType::kFloat32:
      for (uint64_t i = 0; i < n; ++i) store(dst, i, static_cast<float>(read(src, i)));
      break;
    case wire::DType::kFloat64:
      for (uint64_t i = 0; i < n; ++i) store(dst, i, static_cast<double>(read(src, i)));
      break;
    case wire::DType::kFloat16:
      for (uint64_t i = 0; i < n; ++i) {
        store(dst, i, double_to_half(static_cast<double>(read(src, i))));
      }
      break;
    default: break;
  }
}

void convert(wire::DType source, const unsigned char* src, uint64_t n, wire::DType target,
             unsigned char* dst) {
  switch (source) {
    case wire::DType::kFloat32: convert_elements(src, n, target, dst, load<float>); break;
    case wire::DType::kFloat64: convert_elements(src, n, target, dst, load<double>); break;
    case wire::DType::kFloat16:
      convert_elements(src, n, target, dst, [](const unsigned char* s, uint64_t i) {
        return plotting::float16_to_float(load<uint16_t>(s, i));
      });
      break;
    case wire::DType::kBFloat16:
      convert_elements(src, n, target, dst, [](const unsigned char* s, uint64_t i) {
        return plotting::bfloat16_to_float(load<uint16_t>(s, i));
      });
      break;
    case wire::DType::kInt8: convert_elements(src, n, target, dst, load<int8_t>); break;
    case wire::DType::kInt16: convert_elements(src, n, target, dst, load<int16_t>); break;
    case wire::DType::kInt32: convert_elements(src, n, target, dst, load<int32_t>); break;
    case wire::DType::kInt64: convert_elements(src, n, target, dst, load<int64_t>); break;
    case wire::DType::kUInt8: convert_elements(src, n, target, dst, load<uint8_t>); break;
    case wire::DType::kBool:
      convert_elements(src, n, target, dst, [](const unsigned char* s, uint64_t i) {
        return s[i] != 0 ? 1 : 0;
      });
      break;
    case wire::DType::kInvalid: break;
  }
}

// ---- change detection hash (XXH64) ----

constexpr uint64_t kP1 = 11400714785074694791ULL;
constexpr uint64_t kP2 = 14029467366897019727ULL;
constexpr uint64_t kP3 = 1609587929392839161ULL;
constexpr uint64_t kP4 = 9650029242287828579ULL;
constexpr uint64_t kP5 = 2870177450012600261ULL;

constexpr uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
constexpr uint64_t xxh_round(uint64_t acc, uint64_t input) {
  return rotl(acc + input * kP2, 31) * kP1;
}
constexpr uint64_t xxh_merge(uint64_t h, uint64_t v) { return (h ^ xxh_round(0, v)) * kP1 + kP4; }

uint64_t hash_bytes(const void* data, uint64_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  const unsigned char* const end = p + n;
  uint64_t h = 0;
  if (n >= 32) {
    uint64_t v1 = kP1 + kP2;
    uint64_t v2 = kP2;
    uint64_t v3 = 0;
    uint64_t v4 = 0 - kP1;
    for (; end - p >= 32; p += 32) {
      v1 = xxh_round(v1, load<uint64_t>(p, 0));
      v2 = xxh_round(v2, load<uint64_t>(p, 1));
      v3 = xxh_round(v3, load<uint64_t>(p, 2));
      v4 = xxh_round(v4, load<uint64_t>(p, 3));
    }
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    h = xxh_merge(xxh_merge(xxh_merge(xxh_merge(h, v1), v2), v3), v4);
  } else {
    h = kP5;
  }
  h += n;
  for (; end - p >= 8; p += 8) h = rotl(h ^ xxh_round(0, load<uint64_t>(p, 0)), 27) * kP1 + kP4;
  if (end - p >= 4) {
    h = rotl(h ^ (static_cast<uint64_t>(load<uint32_t>(p, 0)) * kP1), 23) * kP2 + kP3;
    p += 4;
  }
  for (; p < end; ++p) h = rotl(h ^ (*p * kP5), 11) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

// ---- names ----

// The stream name as an HDF5 link name (see the top of hdf5_sink.h).
std::string group_base_name(const std::string& stream) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const bool all_dots = std::all_of(stream.begin(), stream.end(), [](char c) { return c == '.'; });
  std::string out;
  out.reserve(stream.size());
  for (const char ch : stream) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '%' || c == '/' || c == '@' || c < 0x20 || c == 0x7f || (all_dots && c == '.')) {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += ch;
    }
  }
  return out;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// ---- small HDF5 helpers ----

Status write_string_attribute(hid_t loc, const char* name, const std::string& value,
                              const std::string& where) {
  Hid type = make_string_type();
  Hid space(H5Screate(H5S_SCALAR), H5Sclose);
  if (!type.valid() || !space.valid()) return hdf5_error(where, "cannot make attribute types");
  Hid attr(H5Acreate2(loc, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  const char* text = value.c_str();
  if (!attr.valid() || H5Awrite(attr.get(), type.get(), &text) < 0) {
    return hdf5_error(where, std::string("cannot write attribute '") + name + "'");
  }
  return Status::ok();
}

Status write_int_attribute(hid_t loc, const char* name, hid_t type, const void* values,
                           hsize_t count, bool scalar, const std::string& where) {
  Hid space(scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &count, nullptr), H5Sclose);
  if (!space.valid()) return hdf5_error(where, "cannot make an attribute space");
  Hid attr(H5Acreate2(loc, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.valid() || H5Awrite(attr.get(), type, values) < 0) {
    return hdf5_error(where, std::string("cannot write attribute '") + name + "'");
  }
  return Status::ok();
}

// An empty dataset [0, *inner] extendible along axis 0.
Hid create_dataset(hid_t group, const char* name, hid_t type,
                   const std::vector<hsize_t>& inner, const std::vector<hsize_t>& chunk,
                   int gzip_level, size_t item_size) {
  std::vector<hsize_t> dims{0};
  std::vector<hsize_t> max_dims{H5S_UNLIMITED};
  for (const hsize_t d : inner) {
    dims.push_back(d);
    // A zero dim cannot hold a chunk of one element as a fixed dim: make it unlimited.
    max_dims.push_back(d == 0 ? H5S_UNLIMITED : d);
  }
  Hid space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), max_dims.data()),
            H5Sclose);
  Hid dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (!space.valid() || !dcpl.valid()) return Hid();
  if (H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()) < 0) return Hid();
  // Every row is written, so no fill values (HDF5 refuses this for variable-length types).
  if (item_size > 0 && H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER) < 0) return Hid();
  if (gzip_level > 0) {
    if (item_size > 1 && H5Pset_shuffle(dcpl.get()) < 0) return Hid();
    if (H5Pset_deflate(dcpl.get(), static_cast<unsigned>(gzip_level)) < 0) return Hid();
  }
  return Hid(H5Dcreate2(group, name, type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
             H5Dclose);
}

// Grows `dataset` to `rows` rows along axis 0 and writes one row (`row_dims` =
// [1, *inner]) at `row` from `data`; nothing is written when the row is empty.
bool write_row(hid_t dataset, hid_t mem_type, const std::vector<hsize_t>& row_dims,
               hsize_t row, const void* data) {
  std::vector<hsize_t> extent = row_dims;
  extent[0] = row + 1;
  if (H5Dset_extent(dataset, extent.data()) < 0) return false;
  const bool empty = std::any_of(row_dims.begin(), row_dims.end(), [](hsize_t d) { return d == 0; });
  if (empty) return true;
  Hid file_space(H5Dget_space(dataset), H5Sclose);
  Hid mem_space(H5Screate_simple(static_cast<int>(row_dims.size()), row_dims.data(), nullptr),
                H5Sclose);
  if (!file_space.valid() || !mem_space.valid()) return false;
  std::vector<hsize_t> start(row_dims.size(), 0);
  start[0] = row;
  if (H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr,
                          row_dims.data(), nullptr) < 0) {
    return false;
  }
  return H5Dwrite(dataset, mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, data) >= 0;
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// fsync of a file or directory by path; errors are returned as text ("" when fine).
std::string fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0) return "cannot open: " + errno_text(errno);
  std::string problem;
  if (::fsync(fd) != 0) problem = "fsync failed: " + errno_text(errno);
  ::close(fd);
  return problem;
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
  std::vector<unsigned char> copy;  // the received bytes, when bytes <= kHdf5ExactCompareBytes
};

struct Hdf5Sink::OpenFile {
  uint64_t index = 0;
  std::string partial;
  std::string final_name;
  Hid file;
  std::chrono::steady_clock::time_point created;
  uint64_t payload_bytes = 0;
  std::map<std::string, std::unique_ptr<OpenGroup>> groups;
};

// ---- Hdf5Sink ----

Hdf5Sink::Hdf5Sink(std::string dir, std::string base, Hdf5SinkOptions options,
                   wire::DType target, uint64_t next_index)
    : dir_(std::move(dir)),
      base_(std::move(base)),
      options_(std::move(options)),
      target_(target),
      next_index_(next_index) {}

Hdf5Sink::~Hdf5Sink() {
  const Status s = finalize();
  if (!s.is_ok()) spdlog::warn("tensorscope: HDF5 sink: {}", s.message());
}

std::string Hdf5Sink::final_path(uint64_t n) const {
  return dir_ + "/" + base_ + "." + std::to_string(n) + ".h5";
}

std::string Hdf5Sink::partial_path(uint64_t n) const {
  return dir_ + "/." + base_ + "." + std::to_string(n) + ".h5.partial";
}

StatusOr<std::unique_ptr<Hdf5Sink>> Hdf5Sink::open(std::string dir, std::string base,
                                                  Hdf5SinkOptions options) {
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
      return Status::error("HDF5 sink: unknown dtype '" + options.dtype +
                           "' (keep, float32, float16 or float64)");
    }
    if (options.gzip_level < 0 || options.gzip_level > 9) {
      return Status::error("HDF5 sink: gzip_level " + std::to_string(options.gzip_level) +
                           " is outside 0..9");
    }
    if (options.gzip_level > 0 && H5Zfilter_avail(H5Z_FILTER_DEFLATE) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return Status::error("HDF5 sink: this HDF5 library has no deflate (gzip) filter");
    }
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Status::error(dir + ": cannot create directory: " + ec.message());
    if (!std::filesystem::is_directory(dir, ec)) return Status::error(dir + ": not a directory");
    std::unique_ptr<Hdf5Sink> sink(new Hdf5Sink(std::move(dir), std::move(base), std::move(options),
                                                target, 0));
    // Never reuse the number of an existing file, finished or partial.
    while (path_exists(sink->final_path(sink->next_index_)) ||
           path_exists(sink->partial_path(sink->next_index_))) {
      ++sink->next_index_;
    }
    return sink;
  } catch (const std::exception& e) {
    return Status::error("HDF5 sink: cannot open: " + std::string(e.what()));
  } catch (...) {
    return Status::error("HDF5 sink: cannot open: unknown error");
  }
}

bool Hdf5Sink::rotate_due() const {
  if (file_ == nullptr || options_.rotate_seconds <= 0) return false;
  return std::chrono::steady_clock::now() - file_->created >=
         std::chrono::seconds(options_.rotate_seconds);
}

Status Hdf5Sink::open_file() {
  while (path_exists(final_path(next_index_)) || path_exists(partial_path(next_index_))) {
    ++next_index_;
  }
  auto file = std::make_unique<OpenFile>();
  file->index = next_index_++;
  file->partial = partial_path(file->index);
  file->final_name = final_path(file->index);
  Hid fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.valid() || H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG) < 0) {
    return hdf5_error(file->partial, "cannot make file access properties");
  }
  file->file = Hid(H5Fcreate(file->partial.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl.get()),
                   H5Fclose);
  if (!file->file.valid()) return hdf5_error(file->partial, "cannot create");
  Status s = write_string_attribute(file->file.get(), "format", kHdf5FormatName, file->partial);
  if (s.is_ok()) {
    s = write_int_attribute(file->file.get(), "format_version", H5T_STD_I32LE, &kFormatVersion,
                            1, true, file->partial);
  }
  if (!s.is_ok()) {
    file->file.reset();
    ::unlink(file->partial.c_str());
    return s;
  }
  file->created = std::chrono::steady_clock::now();
  file_ = std::move(file);
  return Status::ok();
}

StatusOr<Hdf5Sink::OpenGroup*> Hdf5Sink::group_for(const Hdf5Record& record,
                                                   const std::string& group_name,
                                                   wire::DType stored) {
  auto it = file_->groups.find(group_name);
  if (it != file_->groups.end()) return it->second.get();

  const std::string where = file_->partial + ": group '" + group_name + "'";
  auto g = std::make_unique<OpenGroup>();
  Hid lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  if (!lcpl.valid() || H5Pset_char_encoding(lcpl.get(), H5T_CSET_UTF8) < 0) {
    return hdf5_error(where, "cannot make link properties");
  }
  g->group = Hid(H5Gcreate2(file_->file.get(), group_name.c_str(), lcpl.get(), H5P_DEFAULT,
                            H5P_DEFAULT),
                 H5Gclose);
  if (!g->group.valid()) return hdf5_error(where, "cannot create");
  const hid_t gid = g->group.get();
  Status s = write_string_attribute(gid, "stream", record.stream, where);
  if (s.is_ok()) s = write_string_attribute(gid, "kind", record.kind, where);
  if (s.is_ok()) s = write_string_attribute(gid, "dtype", wire::dtype_name(stored), where);
  if (s.is_ok() && !record.shape.empty()) {
    s = write_int_attribute(gid, "shape", H5T_STD_I64LE, record.shape.data(),
                            record.shape.size(), false, where);
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
  g->values = create_dataset(gid, "values", g->value_type.get(), inner, chunk,
                             options_.gzip_level, item);
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
  g->devices = create_dataset(gid, "devices", g->device_type.get(), {}, index_chunk,
                              options_.gzip_level, 1);
  if (!g->devices.valid()) return hdf5_error(where, "cannot create dataset 'devices'");
  g->row_dims = {1};
  g->row_dims.insert(g->row_dims.end(), inner.begin(), inner.end());
  OpenGroup* raw = g.get();
  file_->groups.emplace(group_name, std::move(g));
  return raw;
}

Status Hdf5Sink::write_record(const Hdf5Record& record, const std::string& group_name,
                              wire::DType stored, const void* values, uint64_t value_bytes) {
  auto group = group_for(record, group_name, stored);
  if (!group.is_ok()) return group.status();
  OpenGroup* g = *group;
  const hsize_t row = g->rows;
  const int32_t rank = record.rank;
  char device[wire::kDeviceBytes] = {};
  std::memcpy(device, record.device.data(), std::min(record.device.size(), sizeof(device)));
  const std::vector<hsize_t> one{1};
  const bool written =
      write_row(g->values.get(), g->value_type.get(), g->row_dims, row, values) &&
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
  return Status::ok();
}

Status Hdf5Sink::append(const Hdf5Record& record) {
  try {
    quiet_hdf5();
    // Validate before anything is written.
    const std::string what = "HDF5 sink: stream '" + record.stream + "' step " +
                             std::to_string(record.step);
    if (record.stream.empty()) return Status::error("HDF5 sink: empty stream name");
    if (record.device.size() > wire::kDeviceBytes) {
      return Status::error(what + ": device name '" + record.device + "' is longer than " +
                           std::to_string(wire::kDeviceBytes) + " bytes");
    }
    if (!valid_dtype(record.dtype)) {
      return Status::error(what + ": invalid dtype " +
                           std::to_string(static_cast<int>(record.dtype)));
    }
    if (record.shape.size() > kMaxTensorDims) {
      return Status::error(what + ": " + std::to_string(record.shape.size()) +
                           " dims (HDF5 stores at most " + std::to_string(kMaxTensorDims) + ")");
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
      return Status::error(what + ": " + std::to_string(record.bytes) +
                           " bytes do not match shape " + shape_text(record.shape) + " of " +
                           wire::dtype_name(record.dtype) + " (" + std::to_string(numel * item) +
                           " bytes)");
    }
    if (record.bytes > 0 && record.data == nullptr) return Status::error(what + ": data is null");

    Status rotated = Status::ok();
    if (rotate_due()) rotated = finalize();

    // Change detection, on the received bytes.
    const auto key = std::make_tuple(record.stream, record.device, record.rank);
    uint64_t hash = 0;
    if (options_.change_detection) {
      hash = hash_bytes(record.data, record.bytes);
      auto it = last_.find(key);
      if (it != last_.end()) {
        const StreamState& prev = it->second;
        bool same = prev.hash == hash && prev.dtype == record.dtype &&
                    prev.shape == record.shape && prev.bytes == record.bytes;
        if (same && prev.has_copy) {
          same = record.bytes == 0 || std::memcmp(prev.copy.data(), record.data, record.bytes) == 0;
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
      convert(record.dtype, static_cast<const unsigned char*>(record.data), numel, stored,
              scratch_.data());
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

    if (options_.change_detection) {
      StreamState& state = last_[key];
      state.hash = hash;
      state.dtype = record.dtype;
      state.shape = record.shape;
      state.bytes = record.bytes;
      state.has_copy = record.bytes <= kHdf5ExactCompareBytes;
      if (state.has_copy) {
        const auto* src = static_cast<const unsigned char*>(record.data);
        state.copy.assign(src, src + record.bytes);
      } else {
        state.copy.clear();
        state.copy.shrink_to_fit();
      }
    }
    if (options_.rotate_bytes > 0 && file_->payload_bytes >= options_.rotate_bytes) {
      s = finalize();
      if (!s.is_ok()) return s;
    }
    return rotated;
  } catch (const std::exception& e) {
    return Status::error("HDF5 sink: cannot append to stream '" + record.stream +
                         "': " + e.what());
  } catch (...) {
    return Status::error("HDF5 sink: cannot append to stream '" + record.stream +
                         "': unknown error");
  }
}

Status Hdf5Sink::poll() {
  if (!rotate_due()) return Status::ok();
  return finalize();
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
    const bool handles_closed = close_file_handles();
    std::unique_ptr<OpenFile> file = std::move(file_);  // no file is open, whatever happens
    const bool file_closed = file->file.close();
    if (!handles_closed || !file_closed) {
      return hdf5_error(file->partial, "cannot close (the file keeps this name)");
    }
    const std::string problem = fsync_path(file->partial, false);
    if (!problem.empty()) {
      return Status::error(file->partial + ": " + problem + " (the file keeps this name)");
    }
    if (::rename(file->partial.c_str(), file->final_name.c_str()) != 0) {
      const int err = errno;
      return Status::error("cannot rename " + file->partial + " to " + file->final_name + ": " +
                           errno_text(err));
    }
    finished_files_.push_back(file->final_name);
    // Make the rename durable; best effort, the file is in place already.
    const std::string dir_problem = fsync_path(dir_, true);
    if (!dir_problem.empty()) spdlog::warn("tensorscope: fsync of {}: {}", dir_, dir_problem);
    return Status::ok();
  } catch (const std::exception& e) {
    file_.reset();
    return Status::error("HDF5 sink: cannot finalize: " + std::string(e.what()));
  } catch (...) {
    file_.reset();
    return Status::error("HDF5 sink: cannot finalize: unknown error");
  }
}

}  // namespace tensorscope::daemon
