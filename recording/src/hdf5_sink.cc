// hdf5_sink.cc — see hdf5_sink.h.
#include "tensorscope/recording/hdf5_sink.h"

#include <dirent.h>
#include <fcntl.h>
#include <hdf5.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>  // renameat2, RENAME_NOREPLACE (glibc >= 2.28, _GNU_SOURCE)

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <new>
#include <utility>

#include "tensorscope/recording/hdf5_support.h"
#include "tensorscope/recording/wire_tensor.h"
#include "tensorscope/tensor/element_type.h"
#include "tensorscope/base/posix_file.h"
#include "tensorscope/shared/file_lock.h"

namespace tensorscope::recording {
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
// recover_stale_partials(): the largest piece of a dataset read at once, the suffix of
// partial names, and how many "<stem>.recovered.<i>.h5" names are tried.
constexpr uint64_t kVerifyReadBytes = uint64_t{16} << 20;
constexpr char kPartialSuffix[] = ".h5.partial";
constexpr int kMaxRecoveredNames = 1000;
// Flush markers (see "Flushes" in hdf5_sink.h): the user block, its header (the bytes
// of it that are used; one pwrite within the file's first page) and the two record
// slots after the header's 512 bytes.
constexpr uint64_t kUserblockBytes = uint64_t{256} << 10;
constexpr uint64_t kHeaderSpan = 512;
constexpr uint64_t kHeaderBytes = 64;
constexpr uint64_t kSlotBytes = (kUserblockBytes - kHeaderSpan) / 2;
constexpr uint64_t kRecordFixedBytes = 32;  // magic, generation, count; checksum
static_assert((kSlotBytes - kRecordFixedBytes) / 16 == kHdf5RecordGroups);
constexpr char kHeaderMagic[8] = {'T', 'S', 'H', '5', 'F', 'L', 'S', 'H'};
constexpr char kRecordMagic[8] = {'T', 'S', 'H', '5', 'R', 'E', 'C', 'D'};
constexpr uint32_t kMarkerVersion = 1;
// How far past the file's end the end of allocated space is moved after a flush.
constexpr hsize_t kEoaGuardBytes = 8;

// Whether `path` names the file open as `fd` (same device and inode).
bool same_file(int fd, const std::string& path) {
  struct stat a {};
  struct stat b {};
  return ::fstat(fd, &a) == 0 && ::lstat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

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
  tensor::visit_element_type(element_type(source), [&](auto tag) {
    using T = typename decltype(tag)::type;
    convert_elements(src, n, target, dst, [](const unsigned char* s, uint64_t i) {
      return tensor::to_arithmetic(load<T>(s, i));
    });
  });
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

// ---- flush markers (see "Flushes" in hdf5_sink.h) ----

enum class MarkState : uint32_t { kCreated = 1, kFlushing = 2, kFlushed = 3 };

// The header of the user block.
struct FlushHeader {
  MarkState state = MarkState::kCreated;
  uint64_t generation = 0;  // the flush in progress (flushing) or just completed (flushed)
  uint64_t completed = 0;   // the last completed flush (0: none); what follows is of it
  uint32_t record_slot = 0;
  bool record_complete = false;  // the slot holds a record of every group
  uint64_t groups = 0;
  uint64_t digest = 0;  // group_digest() of its groups
};

// One group's rows at a flush: the hash of its name and its row count.
struct GroupRows {
  uint64_t name_hash = 0;
  uint64_t rows = 0;
};

uint64_t name_hash(const std::string& name) { return hash_bytes(name.data(), name.size()); }

void put_u64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint64_t get_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint32_t get_u32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Order-independent digest of the groups of a flush.
uint64_t group_digest(const std::vector<GroupRows>& groups) {
  uint64_t digest = 0;
  for (const GroupRows& g : groups) {
    unsigned char bytes[16];
    put_u64(bytes, g.name_hash);
    put_u64(bytes + 8, g.rows);
    digest += hash_bytes(bytes, sizeof(bytes));
  }
  return digest;
}

// Layout (little-endian): magic[8], version u32, state u32, generation u64, completed
// u64, record_slot u32, record_complete u32, groups u64, digest u64, checksum u64 (of
// the 56 bytes before it).
std::vector<unsigned char> encode_header(const FlushHeader& h) {
  std::vector<unsigned char> b(kHeaderBytes, 0);
  std::memcpy(b.data(), kHeaderMagic, 8);
  put_u32(&b[8], kMarkerVersion);
  put_u32(&b[12], static_cast<uint32_t>(h.state));
  put_u64(&b[16], h.generation);
  put_u64(&b[24], h.completed);
  put_u32(&b[32], h.record_slot);
  put_u32(&b[36], h.record_complete ? 1 : 0);
  put_u64(&b[40], h.groups);
  put_u64(&b[48], h.digest);
  put_u64(&b[56], hash_bytes(b.data(), 56));
  return b;
}

uint64_t slot_offset(uint32_t slot) { return kHeaderSpan + slot * kSlotBytes; }

// Layout (little-endian): magic[8], generation u64, count u64, count x (name hash u64,
// rows u64), checksum u64 (of everything before it).
std::vector<unsigned char> encode_record(uint64_t generation, const std::vector<GroupRows>& groups) {
  std::vector<unsigned char> b(24 + 16 * groups.size() + 8, 0);
  std::memcpy(b.data(), kRecordMagic, 8);
  put_u64(&b[8], generation);
  put_u64(&b[16], groups.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    put_u64(&b[24 + 16 * i], groups[i].name_hash);
    put_u64(&b[32 + 16 * i], groups[i].rows);
  }
  put_u64(&b[b.size() - 8], hash_bytes(b.data(), b.size() - 8));
  return b;
}

// Writes the flush marker bytes at `offset` of `fd` (the file `path`).
Status write_marker(int fd, const std::string& path, uint64_t offset, const std::vector<unsigned char>& bytes) {
  Status s = pwrite_all(fd, bytes.data(), bytes.size(), offset, path);
  if (!s) return Status::error(s.message() + " (the flush marker)");
  return s;
}

// Reads `n` bytes at `offset`; false when fewer are there.
bool read_marker(int fd, uint64_t offset, unsigned char* out, size_t n) {
  return pread_exact(fd, out, n, offset, "").is_ok();
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
  bool dirty = false;        // rows were added since the last flush
  FlushHeader header;        // the header as last written
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
      next_index_(next_index) {
  budget_ = options_.change_budget != nullptr
                ? options_.change_budget
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

void Hdf5ChangeBudget::release(uint64_t bytes) {
  used_.fetch_sub(bytes, std::memory_order_relaxed);
}

std::string Hdf5Sink::final_path(uint64_t n) const {
  return dir_ + "/" + base_ + "." + std::to_string(n) + ".h5";
}

std::string Hdf5Sink::partial_path(uint64_t n) const {
  return dir_ + "/." + base_ + "." + std::to_string(n) + kPartialSuffix;
}

std::string Hdf5Sink::recovered_path(uint64_t n) const {
  return dir_ + "/" + base_ + "." + std::to_string(n) + ".recovered.h5";
}

bool Hdf5Sink::number_taken(uint64_t n) const {
  return path_exists(final_path(n)) || path_exists(partial_path(n)) ||
         path_exists(recovered_path(n));
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
    std::unique_ptr<Hdf5Sink> sink(new Hdf5Sink(std::move(dir), std::move(base), std::move(options),
                                                target, 0));
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
  return std::chrono::steady_clock::now() - file_->created >=
         std::chrono::seconds(options_.rotate_seconds);
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
    if (err == 0 && !same_file(fd.get(), partial)) {
      // Locked after a cleaner removed it: the lock is on a file without a name.
      if (attempt < kMaxCreateAttempts) continue;
      return Status::error(partial + ": cannot create: removed by another process, " +
                           std::to_string(attempt) + " times");
    }
    if (lock_held_elsewhere(err)) {
      if (attempt < kMaxCreateAttempts) continue;
      return Status::error(partial + ": cannot lock: held by another process, " +
                           std::to_string(attempt) + " times");
    }
    if (err != 0) {
      // No OFD locks on this file system: write unlocked (cleaners leave a file they
      // cannot lock alone, so it is never taken away), and say so once.
      static std::atomic<bool> warned{false};
      if (!warned.exchange(true)) {
        spdlog::warn("tensorscope: HDF5 sink: {}: cannot take the writer lock ({}); partial "
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
  bool properties = fapl.valid() && fcpl.valid() &&
                    H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG) >= 0 &&
                    H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST) >= 0 &&
                    H5Pget_mdc_config(fapl.get(), &cache) >= 0;
  if (properties) {
    cache.incr_mode = H5C_incr__off;
    cache.flash_incr_mode = H5C_flash_incr__off;
    cache.decr_mode = H5C_decr__off;
    cache.evictions_enabled = false;
    properties = H5Pset_mdc_config(fapl.get(), &cache) >= 0 &&
                 H5Pset_userblock(fcpl.get(), kUserblockBytes) >= 0 &&
                 H5Pset_file_space_strategy(fcpl.get(), H5F_FSPACE_STRATEGY_NONE, false, 1) >= 0;
  }
  if (!properties) {
    ::unlink(file->partial.c_str());
    return hdf5_error(file->partial, "cannot make file properties");
  }
  // The file exists (empty, ours): HDF5 truncates it.
  file->file = Hid(H5Fcreate(file->partial.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()),
                   H5Fclose);
  if (!file->file.valid()) {
    Status s = hdf5_error(file->partial, "cannot create");
    ::unlink(file->partial.c_str());
    return s;
  }
  Status s = write_string_attribute(file->file.get(), "format", kHdf5FormatName, file->partial);
  if (s.is_ok()) {
    s = write_int_attribute(file->file.get(), "format_version", H5T_STD_I32LE, &kFormatVersion,
                            1, true, file->partial);
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
  file_->dirty = true;
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
    bool over_cap = false;  // maybe unchanged, but the previous value has no copy (the cap)
    if (options_.change_detection) {
      hash = hash_bytes(record.data, record.bytes);
      auto it = last_.find(key);
      if (it != last_.end()) {
        const StreamState& prev = it->second;
        bool same = prev.hash == hash && prev.dtype == record.dtype &&
                    prev.shape == record.shape && prev.bytes == record.bytes;
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
    return Status::error("HDF5 sink: cannot append to stream '" + record.stream +
                         "': " + e.what());
  } catch (...) {
    return Status::error("HDF5 sink: cannot append to stream '" + record.stream +
                         "': unknown error");
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
      spdlog::warn("tensorscope: HDF5 change detection: a copy of '{}' ({} bytes) would exceed "
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
  return std::chrono::steady_clock::now() - file_->last_flush >=
         std::chrono::seconds(options_.flush_seconds);
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
    s = hdf5_error(f.partial, "cannot write its datasets (given up under this name; its last "
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
      done.record_slot =
          header.completed > 0 && header.record_complete ? 1 - header.record_slot : 0;
      s = write_marker(f.fd.get(), f.partial, slot_offset(done.record_slot),
                     encode_record(done.generation, groups));
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
      return Status::error("cannot rename " + file->partial + " to " + file->final_name + ": " +
                           errno_text(err));
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

// ---- partial files of dead writers ----

namespace {

// Reads all of `dataset` with its own type, in pieces of at most kVerifyReadBytes: a
// block of indices along one axis `k`, every index of the axes after it, one index of
// the axes before it.
Status read_whole_dataset(hid_t dataset, const std::string& where) {
  Hid type(H5Dget_type(dataset), H5Tclose);
  Hid space(H5Dget_space(dataset), H5Sclose);
  if (!type.valid() || !space.valid()) return hdf5_error(where, "cannot get type and space");
  const size_t item = H5Tget_size(type.get());
  const int ndims = H5Sget_simple_extent_ndims(space.get());
  if (item == 0 || ndims < 1) return Status::error(where + ": not a dataset of rows");
  std::vector<hsize_t> dims(static_cast<size_t>(ndims));
  if (H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) {
    return hdf5_error(where, "cannot get dims");
  }
  for (const hsize_t d : dims) {
    if (d == 0) return Status::ok();  // nothing stored
  }
  // Every chunk within the extent must exist: the writer writes each row it adds, so a
  // missing chunk is a row whose data never reached the file (reading it would give
  // fill values, not an error).
  Hid dcpl(H5Dget_create_plist(dataset), H5Pclose);
  if (!dcpl.valid() || H5Pget_layout(dcpl.get()) != H5D_CHUNKED) {
    H5Eclear2(H5E_DEFAULT);
    return Status::error(where + ": not a chunked dataset");
  }
  std::vector<hsize_t> chunk(dims.size());
  if (H5Pget_chunk(dcpl.get(), ndims, chunk.data()) != ndims) {
    return hdf5_error(where, "cannot get the chunk dims");
  }
  uint64_t expected_chunks = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (chunk[i] == 0) return Status::error(where + ": a chunk dim is 0");
    const uint64_t along = (dims[i] + chunk[i] - 1) / chunk[i];
    if (along > std::numeric_limits<uint64_t>::max() / expected_chunks) {
      return Status::error(where + ": too many chunks");
    }
    expected_chunks *= along;
  }
  // H5Dget_num_chunks counts every chunk of the index, also chunks beyond the extent
  // (which a file cut back to its last flush may keep): fewer is a missing chunk; else
  // each chunk of the extent is looked up.
  hsize_t stored_chunks = 0;
  if (H5Dget_num_chunks(dataset, space.get(), &stored_chunks) < 0) {
    return hdf5_error(where, "cannot count chunks");
  }
  if (stored_chunks < expected_chunks) {
    return Status::error(where + ": " + std::to_string(stored_chunks) + " of " +
                         std::to_string(expected_chunks) + " chunks were written");
  }
  std::vector<hsize_t> at(dims.size(), 0);  // the first element of a chunk
  for (uint64_t c = 0; c < expected_chunks; ++c) {
    unsigned filter_mask = 0;
    haddr_t address = HADDR_UNDEF;
    hsize_t size = 0;
    if (H5Dget_chunk_info_by_coord(dataset, at.data(), &filter_mask, &address, &size) < 0) {
      return hdf5_error(where, "cannot look up a chunk");
    }
    if (size == 0) {
      return Status::error(where + ": the chunk at row " + std::to_string(at[0]) +
                           " was never written");
    }
    for (size_t i = dims.size(); i-- > 0;) {  // the next chunk, last axis fastest
      at[i] += chunk[i];
      if (at[i] < dims[i]) break;
      at[i] = 0;
    }
  }
  // tail[i]: bytes of one index along axis i (all of the axes after it).
  std::vector<uint64_t> tail(dims.size());
  uint64_t bytes = item;
  for (size_t i = dims.size(); i-- > 0;) {
    tail[i] = bytes;
    bytes = dims[i] > std::numeric_limits<uint64_t>::max() / bytes
                ? std::numeric_limits<uint64_t>::max()
                : bytes * dims[i];
  }
  size_t k = 0;
  while (k + 1 < dims.size() && tail[k] > kVerifyReadBytes) ++k;
  const hsize_t block =
      static_cast<hsize_t>(std::clamp<uint64_t>(kVerifyReadBytes / tail[k], 1, dims[k]));
  std::vector<unsigned char> buffer(static_cast<size_t>(tail[k] * block));
  std::vector<hsize_t> start(dims.size(), 0);
  std::vector<hsize_t> count(dims.size(), 1);
  for (size_t i = k + 1; i < dims.size(); ++i) count[i] = dims[i];
  for (;;) {
    count[k] = std::min<hsize_t>(block, dims[k] - start[k]);
    Hid memory(H5Screate_simple(ndims, count.data(), nullptr), H5Sclose);
    if (!memory.valid() ||
        H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                            nullptr) < 0 ||
        H5Dread(dataset, type.get(), memory.get(), space.get(), H5P_DEFAULT, buffer.data()) < 0) {
      return hdf5_error(where, "cannot read");
    }
    // Next piece: along axis k, then to the next index of the axes before it.
    start[k] += count[k];
    if (start[k] < dims[k]) continue;
    start[k] = 0;
    bool done = true;
    for (size_t i = k; i-- > 0;) {
      if (++start[i] < dims[i]) {
        done = false;
        break;
      }
      start[i] = 0;
    }
    if (done) return Status::ok();
  }
}

// Whether `path` is a tensorscope HDF5 recording that HDF5 reads whole (see
// recover_stale_partials in hdf5_sink.h); the reason when not. `rows_out` (when given)
// receives each group's name and row count.
Status check_recording(const std::string& path,
                       std::vector<std::pair<std::string, uint64_t>>* rows_out) {
  Hid file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.valid()) return hdf5_error(path, "cannot open");
  {
    Hid attribute(H5Aopen(file.get(), "format", H5P_DEFAULT), H5Aclose);
    if (!attribute.valid()) return hdf5_error(path, "no format attribute");
    // Read with the attribute's own type (a variable-length string, any character set).
    Hid text(H5Aget_type(attribute.get()), H5Tclose);
    if (!text.valid() || H5Tis_variable_str(text.get()) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return Status::error(path + ": the format attribute is not a variable-length string");
    }
    char* value = nullptr;
    if (H5Aread(attribute.get(), text.get(), &value) < 0) {
      return hdf5_error(path, "cannot read the format attribute");
    }
    const bool ours = value != nullptr && std::strcmp(value, kHdf5FormatName) == 0;
    if (value != nullptr) H5free_memory(value);
    if (!ours) return Status::error(path + ": not a tensorscope recording");
  }
  std::vector<std::string> groups;
  const herr_t listed = H5Literate(
      file.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
        static_cast<std::vector<std::string>*>(data)->emplace_back(name);
        return 0;
      },
      &groups);
  if (listed < 0) return hdf5_error(path, "cannot list groups");
  if (groups.empty()) return Status::error(path + ": holds no tensors");
  for (const std::string& name : groups) {
    const std::string where = path + ": group '" + name + "'";
    Hid group(H5Gopen2(file.get(), name.c_str(), H5P_DEFAULT), H5Gclose);
    if (!group.valid()) return hdf5_error(where, "cannot open");
    hsize_t rows = 0;
    for (const char* dataset_name : {"values", "steps", "ranks", "devices"}) {
      const std::string at = where + " dataset '" + dataset_name + "'";
      Hid dataset(H5Dopen2(group.get(), dataset_name, H5P_DEFAULT), H5Dclose);
      if (!dataset.valid()) return hdf5_error(at, "cannot open");
      Hid space(H5Dget_space(dataset.get()), H5Sclose);
      const int ndims = space.valid() ? H5Sget_simple_extent_ndims(space.get()) : -1;
      if (ndims < 1) return Status::error(at + ": not a dataset of rows");
      std::vector<hsize_t> dims(static_cast<size_t>(ndims));
      H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
      const bool index = std::strcmp(dataset_name, "values") != 0;
      if (!index) {
        rows = dims[0];
      } else if (ndims != 1 || dims[0] != rows) {
        return Status::error(at + ": " + std::to_string(dims[0]) + " rows, values has " +
                             std::to_string(rows));
      }
      Status s = read_whole_dataset(dataset.get(), at);
      if (!s.is_ok()) return s;
    }
    if (rows_out != nullptr) rows_out->emplace_back(name, rows);
  }
  return Status::ok();
}

// What recover_stale_partials() reads of a partial's flush markers.
struct Markers {
  enum class Kind { kAbsent, kDamaged, kUsable } kind = Kind::kAbsent;
  std::string problem;  // kDamaged: why
  FlushHeader header;
  bool has_record = false;  // `record` is that of header.completed
  std::map<uint64_t, uint64_t> record;  // name hash -> rows
};

Markers read_markers(int fd) {
  Markers m;
  unsigned char b[kHeaderBytes];
  if (!read_marker(fd, 0, b, sizeof(b)) || std::memcmp(b, kHeaderMagic, 8) != 0) return m;
  m.kind = Markers::Kind::kDamaged;
  if (get_u64(&b[56]) != hash_bytes(b, 56)) {
    m.problem = "its flush marker is damaged";
    return m;
  }
  const uint32_t state = get_u32(&b[12]);
  if (get_u32(&b[8]) != kMarkerVersion || state < static_cast<uint32_t>(MarkState::kCreated) ||
      state > static_cast<uint32_t>(MarkState::kFlushed)) {
    m.problem = "its flush marker is of an unknown version";
    return m;
  }
  FlushHeader& h = m.header;
  h.state = static_cast<MarkState>(state);
  h.generation = get_u64(&b[16]);
  h.completed = get_u64(&b[24]);
  h.record_slot = get_u32(&b[32]);
  h.record_complete = get_u32(&b[36]) != 0;
  h.groups = get_u64(&b[40]);
  h.digest = get_u64(&b[48]);
  if (h.record_slot > 1 || (h.state == MarkState::kFlushed && h.generation != h.completed)) {
    m.problem = "its flush marker is inconsistent";
    return m;
  }
  m.kind = Markers::Kind::kUsable;
  if (h.completed == 0 || !h.record_complete) return m;
  // The record, written before the header that names it.
  const uint64_t at = slot_offset(h.record_slot);
  unsigned char head[24];
  const uint64_t count = read_marker(fd, at, head, sizeof(head)) ? get_u64(&head[16]) : 0;
  if (std::memcmp(head, kRecordMagic, 8) != 0 || get_u64(&head[8]) != h.completed ||
      count != h.groups || count > kHdf5RecordGroups) {
    m.kind = Markers::Kind::kDamaged;
    m.problem = "the record of its last flush is damaged";
    return m;
  }
  std::vector<unsigned char> bytes(24 + 16 * count + 8);
  if (!read_marker(fd, at, bytes.data(), bytes.size()) ||
      get_u64(&bytes[bytes.size() - 8]) != hash_bytes(bytes.data(), bytes.size() - 8)) {
    m.kind = Markers::Kind::kDamaged;
    m.problem = "the record of its last flush is damaged";
    return m;
  }
  for (uint64_t i = 0; i < count; ++i) {
    m.record[get_u64(&bytes[24 + 16 * i])] = get_u64(&bytes[32 + 16 * i]);
  }
  m.has_record = m.record.size() == count;  // distinct names (no hash collision)
  return m;
}

// Whether the groups and row counts read from a file are those of the last completed
// flush the markers name.
bool matches_markers(const std::vector<std::pair<std::string, uint64_t>>& rows,
                     const Markers& m) {
  std::vector<GroupRows> groups;
  for (const auto& [name, n] : rows) groups.push_back({name_hash(name), n});
  if (groups.size() != m.header.groups || group_digest(groups) != m.header.digest) return false;
  if (!m.has_record) return true;
  for (const GroupRows& g : groups) {
    auto it = m.record.find(g.name_hash);
    if (it == m.record.end() || it->second != g.rows) return false;
  }
  return true;
}

// Cuts `path` back to `record` (see recover_stale_partials in hdf5_sink.h): deletes the
// groups it does not name, shrinks longer datasets; refuses when a group is missing or
// a dataset is shorter.
Status cut_back(const std::string& path, const std::map<uint64_t, uint64_t>& record) {
  Hid file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
  if (!file.valid()) return hdf5_error(path, "cannot open to cut back");
  // New space goes beyond everything on disk: the blocks a mix of two flushes refers to
  // may lie past the end of allocated space its superblock names.
  if (H5Fincrement_filesize(file.get(), 0) < 0) {
    return hdf5_error(path, "cannot move the end of allocated space");
  }
  std::vector<std::string> names;
  if (H5Literate(file.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr,
                 [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
                   static_cast<std::vector<std::string>*>(data)->emplace_back(name);
                   return 0;
                 },
                 &names) < 0) {
    return hdf5_error(path, "cannot list groups");
  }
  size_t kept = 0;
  for (const std::string& name : names) {
    const std::string where = path + ": group '" + name + "'";
    auto it = record.find(name_hash(name));
    if (it == record.end()) {
      if (H5Ldelete(file.get(), name.c_str(), H5P_DEFAULT) < 0) {
        return hdf5_error(where, "cannot delete (not in the last flush)");
      }
      continue;
    }
    ++kept;
    Hid group(H5Gopen2(file.get(), name.c_str(), H5P_DEFAULT), H5Gclose);
    if (!group.valid()) return hdf5_error(where, "cannot open");
    for (const char* dataset_name : {"values", "steps", "ranks", "devices"}) {
      const std::string at = where + " dataset '" + dataset_name + "'";
      Hid dataset(H5Dopen2(group.get(), dataset_name, H5P_DEFAULT), H5Dclose);
      Hid space(dataset.valid() ? H5Dget_space(dataset.get()) : H5I_INVALID_HID, H5Sclose);
      const int ndims = space.valid() ? H5Sget_simple_extent_ndims(space.get()) : -1;
      if (ndims < 1 || ndims > H5S_MAX_RANK) return hdf5_error(at, "cannot open");
      std::vector<hsize_t> dims(static_cast<size_t>(ndims));
      if (H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) {
        return hdf5_error(at, "cannot get dims");
      }
      if (dims[0] < it->second) {
        return Status::error(at + ": " + std::to_string(dims[0]) + " rows, its last flush had " +
                             std::to_string(it->second));
      }
      if (dims[0] == it->second) continue;
      dims[0] = it->second;
      if (H5Dset_extent(dataset.get(), dims.data()) < 0) return hdf5_error(at, "cannot shrink");
      if (!dataset.close()) return hdf5_error(at, "cannot close");
    }
    if (!group.close()) return hdf5_error(where, "cannot close");
  }
  if (kept != record.size()) {
    return Status::error(path + ": " + std::to_string(record.size() - kept) +
                         " group(s) of its last flush are missing");
  }
  if (!file.close()) return hdf5_error(path, "cannot close after cutting back");
  return Status::ok();
}

// What a stale partial holds once checked: kept (maybe cut back), or the reason to
// remove it.
struct Verdict {
  Status status;
  bool cut_back = false;
};

// Decides about the partial `path` (locked, open as `fd`); may cut it back.
Verdict judge_partial(const std::string& path, int fd) {
  const Markers m = read_markers(fd);
  if (m.kind == Markers::Kind::kAbsent) return {check_recording(path, nullptr)};  // older writer
  if (m.kind == Markers::Kind::kDamaged) return {Status::error(path + ": " + m.problem)};
  if (m.header.completed == 0) {
    return {Status::error(path + (m.header.state == MarkState::kFlushing
                                      ? ": its writer died during its first flush"
                                      : ": its writer died before its first flush"))};
  }
  std::vector<std::pair<std::string, uint64_t>> rows;
  const Status read = check_recording(path, &rows);
  if (read.is_ok() && matches_markers(rows, m)) return {Status::ok()};
  const std::string why =
      read.is_ok() ? "it holds other rows than its last completed flush (generation " +
                         std::to_string(m.header.completed) + ")"
                   : read.message();
  if (!m.has_record) {
    return {Status::error(path + ": " + why + "; no record of its last flush to cut it back to")};
  }
  Status cut = cut_back(path, m.record);
  if (!cut.is_ok()) return {Status::error(why + "; cannot cut it back: " + cut.message())};
  FlushHeader header = m.header;
  header.state = MarkState::kFlushed;
  header.generation = header.completed;
  cut = write_marker(fd, path, 0, encode_header(header));
  if (!cut.is_ok()) return {Status::error(why + "; " + cut.message())};
  rows.clear();
  const Status again = check_recording(path, &rows);
  if (!again.is_ok()) return {Status::error(why + "; cut back, still: " + again.message())};
  if (!matches_markers(rows, m)) {
    return {Status::error(path + ": " + why + "; cut back, still not its last flush")};
  }
  spdlog::warn("tensorscope: HDF5 recovery: {}: {}: cut back to its last completed flush "
               "(generation {})",
               path, why, m.header.completed);
  return {Status::ok(), true};
}

// Renames `from` to the first free "<dir>/<stem>.recovered[.<i>].h5", never replacing
// a file; the new path.
StatusOr<std::string> rename_recovered(const std::string& from, const std::string& dir,
                                       const std::string& stem) {
  for (int i = 0; i < kMaxRecoveredNames; ++i) {
    const std::string to =
        dir + "/" + stem + ".recovered" + (i == 0 ? "" : "." + std::to_string(i)) + ".h5";
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) {
      return to;
    }
    int err = errno;
    if (err == EEXIST) continue;
    if (err == EINVAL || err == ENOSYS || err == ENOTSUP) {
      // No RENAME_NOREPLACE on this file system: link() never replaces either.
      if (::link(from.c_str(), to.c_str()) == 0) {
        if (::unlink(from.c_str()) != 0) {
          err = errno;
          return Status::error("linked " + from + " to " + to + " but cannot remove it: " +
                               errno_text(err));
        }
        return to;
      }
      err = errno;
      if (err == EEXIST) continue;
    }
    return Status::error("cannot rename " + from + " to " + to + ": " + errno_text(err));
  }
  return Status::error("cannot rename " + from + ": every recovered name is taken");
}

// ".<stem>.h5.partial" with a non-empty stem: the stem; "" otherwise.
std::string partial_stem(const std::string& name) {
  const size_t suffix = sizeof(kPartialSuffix) - 1;
  if (name.size() < suffix + 2 || name[0] != '.' ||
      name.compare(name.size() - suffix, suffix, kPartialSuffix) != 0) {
    return "";
  }
  return name.substr(1, name.size() - suffix - 1);
}

}  // namespace

StatusOr<Hdf5PartialRecovery> recover_stale_partials(const std::string& dir_in) {
  try {
    quiet_hdf5();
    std::string dir = dir_in.empty() ? "." : dir_in;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    Hdf5PartialRecovery out;
    std::vector<std::string> names;
    DIR* listing = ::opendir(dir.c_str());
    if (listing == nullptr) {
      const int err = errno;
      if (err == ENOENT) return out;  // no directory: nothing left behind
      return Status::error(dir + ": cannot list: " + errno_text(err));
    }
    errno = 0;
    while (const dirent* entry = ::readdir(listing)) {
      const std::string name = entry->d_name;
      if (!partial_stem(name).empty()) names.push_back(name);
      errno = 0;
    }
    const int list_err = errno;
    ::closedir(listing);
    if (list_err != 0) return Status::error(dir + ": cannot list: " + errno_text(list_err));
    std::sort(names.begin(), names.end());

    bool changed = false;
    for (const std::string& name : names) {
      const std::string path = dir + "/" + name;
      auto problem = [&](const std::string& why) {
        out.problems.push_back(path + ": " + why);
        spdlog::warn("tensorscope: HDF5 recovery: {}: {} (left in place)", path, why);
      };
      UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
      if (!fd.valid()) {
        const int err = errno;
        if (err != ENOENT) problem("cannot open: " + errno_text(err));  // ENOENT: done by another
        continue;
      }
      struct stat st {};
      if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
        problem("not a regular file");
        continue;
      }
      const int err = try_lock_file(fd.get());
      if (lock_held_elsewhere(err)) {
        ++out.in_use;  // a live writer, or another cleaner
        continue;
      }
      if (err != 0) {
        problem("cannot take the writer lock: " + errno_text(err));
        continue;
      }
      if (!same_file(fd.get(), path)) continue;  // renamed or removed by another cleaner
      // An HDF5 writer without our lock (e.g. h5py) holds flock(): not ours to touch.
      if (::flock(fd.get(), LOCK_SH | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK) {
          ++out.in_use;
          continue;
        }
      } else {
        ::flock(fd.get(), LOCK_UN);
      }
      const Verdict verdict = judge_partial(path, fd.get());
      const Status& readable = verdict.status;
      if (readable.is_ok()) {
        if (::fsync(fd.get()) != 0) {
          problem("fsync failed: " + errno_text(errno));
          continue;
        }
        auto renamed = rename_recovered(path, dir, partial_stem(name));
        if (!renamed.is_ok()) {
          problem(renamed.message());
          continue;
        }
        changed = true;
        spdlog::warn("tensorscope: HDF5 recovery: {} was left by a dead writer and reads whole: "
                     "renamed to {}",
                     path, *renamed);
        if (verdict.cut_back) out.truncated.push_back(*renamed);
        out.recovered.push_back(std::move(renamed).value());
      } else if (::unlink(path.c_str()) == 0) {
        changed = true;
        spdlog::warn("tensorscope: HDF5 recovery: removed {}, left by a dead writer and not "
                     "recoverable: {}",
                     path, readable.message());
        out.removed.push_back(path);
      } else {
        problem("not recoverable (" + readable.message() + ") and cannot be removed: " +
                errno_text(errno));
      }
    }  // the lock goes with fd, after the rename or removal
    if (changed) {
      if (Status synced = fsync_path(dir, true); !synced) spdlog::warn("tensorscope: {}", synced.message());
    }
    return out;
  } catch (const std::exception& e) {
    return Status::error(dir_in + ": HDF5 recovery failed: " + e.what());
  } catch (...) {
    return Status::error(dir_in + ": HDF5 recovery failed: unknown error");
  }
}

}  // namespace tensorscope::recording
