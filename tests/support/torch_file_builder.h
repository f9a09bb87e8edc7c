// torch_file_builder.h — builds ZIP archives and pickles byte by byte, for tests of the
// libtorch-free .pt reader (compare/zip_archive.h, compare/pickle_machine.h,
// compare/torch_file_source.h): valid files laid out like PyTorch's, and variants
// (ZIP64 records and extra fields, comments, compressed or misplaced entries, sparse
// entries of several GiB) that a test then corrupts.
//
// Also: limit_address_space(), for running a reader on hostile input in a child process
// that must fail cleanly instead of exhausting the machine's memory.
//
// Test-only; used by one test thread at a time. Not a general ZIP or pickle writer:
// CRCs are left 0 (the reader does not check them).
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace tensorscope::testing {

// ---- memory limits ---------------------------------------------------------------------

// True when built with a sanitizer that reserves huge address ranges (a limit on the
// address space would break it).
constexpr bool kSanitizedBuild =
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
    true;
#else
    false;
#endif
#else
    false;
#endif

// Limits this process's address space to what it maps now plus `extra_mib` MiB (for a
// child process about to read hostile input); an allocation beyond it fails
// (std::bad_alloc) instead of exhausting the machine. No-op in sanitized builds. False
// when the limit could not be set.
inline bool limit_address_space(size_t extra_mib) {
  if (kSanitizedBuild) return true;
  unsigned long long vm_kib = 0;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      if (std::sscanf(line, "VmSize: %llu kB", &vm_kib) == 1) break;
    }
    std::fclose(f);
  }
  if (vm_kib == 0) return false;
  struct rlimit limit {};
  limit.rlim_cur = limit.rlim_max = static_cast<rlim_t>(vm_kib * 1024 + (uint64_t{extra_mib} << 20));
  return ::setrlimit(RLIMIT_AS, &limit) == 0;
}

// Limits the address space to `mib` MiB in all (e.g. in a child before exec).
inline bool limit_total_address_space(size_t mib) {
  if (kSanitizedBuild) return true;
  struct rlimit limit {};
  limit.rlim_cur = limit.rlim_max = static_cast<rlim_t>(uint64_t{mib} << 20);
  return ::setrlimit(RLIMIT_AS, &limit) == 0;
}

inline void put_le(std::string& out, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

// ---- ZIP ----------------------------------------------------------------------------

struct ZipSpecEntry {
  std::string name;
  std::string data;        // the bytes (when hole_size == 0)
  uint64_t hole_size = 0;  // > 0: an entry of this many zero bytes, left as a hole
  uint16_t method = 0;     // written as is (0 stored, 8 deflate)
  uint16_t flags = 0;
};

struct ZipSpec {
  std::vector<ZipSpecEntry> entries;
  std::string comment;
  bool zip64_eocd = true;    // ZIP64 EOCD record + locator (as PyTorch always writes)
  bool zip64_extra = false;  // saturate the CD's sizes/offset, real values in extra field
  size_t align = 64;         // pad local headers so data starts on this boundary (0: none)
};

// The archive as pieces: (offset, bytes), plus the total size; entries with a hole
// leave their data unwritten.
struct ZipPieces {
  std::vector<std::pair<uint64_t, std::string>> pieces;
  uint64_t size = 0;
  std::vector<uint64_t> data_offsets;  // per entry
};

inline ZipPieces build_zip_pieces(const ZipSpec& spec) {
  ZipPieces out;
  std::string cd;
  uint64_t pos = 0;
  for (const ZipSpecEntry& e : spec.entries) {
    const uint64_t size = e.hole_size > 0 ? e.hole_size : e.data.size();
    std::string local;
    put_le(local, 0x04034b50, 4);
    put_le(local, 45, 2);
    put_le(local, e.flags, 2);
    put_le(local, e.method, 2);
    put_le(local, 0, 4);  // time, date
    put_le(local, 0, 4);  // crc
    const bool big = size >= 0xFFFFFFFFu;
    put_le(local, big ? 0xFFFFFFFFu : size, 4);
    put_le(local, big ? 0xFFFFFFFFu : size, 4);
    put_le(local, e.name.size(), 2);
    size_t extra = 0;
    if (spec.align > 0) {
      const uint64_t unpadded = pos + 30 + e.name.size();
      extra = static_cast<size_t>((spec.align - unpadded % spec.align) % spec.align);
      if (extra > 0 && extra < 4) extra += spec.align;
    }
    put_le(local, extra, 2);
    local += e.name;
    if (extra > 0) {
      put_le(local, 0x5a46, 2);  // an unknown id: padding, as PyTorch's "FB" field
      put_le(local, extra - 4, 2);
      local.append(extra - 4, 'Z');
    }
    const uint64_t header_offset = pos;
    out.pieces.emplace_back(pos, local);
    pos += local.size();
    out.data_offsets.push_back(pos);
    if (e.hole_size == 0) out.pieces.emplace_back(pos, e.data);
    pos += size;

    std::string x;  // ZIP64 extra field of the central directory entry
    if (spec.zip64_extra) {
      put_le(x, 0x0001, 2);
      put_le(x, 24, 2);
      put_le(x, size, 8);
      put_le(x, size, 8);
      put_le(x, header_offset, 8);
    }
    put_le(cd, 0x02014b50, 4);
    put_le(cd, 0x031e, 2);
    put_le(cd, 45, 2);
    put_le(cd, e.flags, 2);
    put_le(cd, e.method, 2);
    put_le(cd, 0, 4);
    put_le(cd, 0, 4);
    put_le(cd, spec.zip64_extra ? 0xFFFFFFFFu : size, 4);
    put_le(cd, spec.zip64_extra ? 0xFFFFFFFFu : size, 4);
    put_le(cd, e.name.size(), 2);
    put_le(cd, x.size(), 2);
    put_le(cd, 0, 2);  // comment
    put_le(cd, 0, 2);  // disk
    put_le(cd, 0, 2);
    put_le(cd, 0, 4);
    put_le(cd, spec.zip64_extra ? 0xFFFFFFFFu : header_offset, 4);
    cd += e.name;
    cd += x;
  }
  const uint64_t cd_offset = pos;
  std::string tail = cd;
  const uint64_t n = spec.entries.size();
  if (spec.zip64_eocd) {
    const uint64_t z64 = cd_offset + cd.size();
    put_le(tail, 0x06064b50, 4);
    put_le(tail, 44, 8);
    put_le(tail, 0x031e, 2);
    put_le(tail, 45, 2);
    put_le(tail, 0, 4);
    put_le(tail, 0, 4);
    put_le(tail, n, 8);
    put_le(tail, n, 8);
    put_le(tail, cd.size(), 8);
    put_le(tail, cd_offset, 8);
    put_le(tail, 0x07064b50, 4);
    put_le(tail, 0, 4);
    put_le(tail, z64, 8);
    put_le(tail, 1, 4);
  }
  put_le(tail, 0x06054b50, 4);
  put_le(tail, 0, 2);
  put_le(tail, 0, 2);
  put_le(tail, n, 2);
  put_le(tail, n, 2);
  put_le(tail, spec.zip64_extra ? 0xFFFFFFFFu : cd.size(), 4);
  put_le(tail, spec.zip64_extra ? 0xFFFFFFFFu : cd_offset, 4);
  put_le(tail, spec.comment.size(), 2);
  tail += spec.comment;
  out.pieces.emplace_back(cd_offset, tail);
  out.size = cd_offset + tail.size();
  return out;
}

// The whole archive in memory (holes as zero bytes: keep them small).
inline std::string build_zip(const ZipSpec& spec) {
  const ZipPieces p = build_zip_pieces(spec);
  std::string out(static_cast<size_t>(p.size), '\0');
  for (const auto& [offset, bytes] : p.pieces) out.replace(static_cast<size_t>(offset), bytes.size(), bytes);
  return out;
}

// Writes the archive to `path`, holes left sparse. False on an I/O error.
inline bool write_zip_file(const std::string& path, const ZipSpec& spec) {
  const ZipPieces p = build_zip_pieces(spec);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = ::ftruncate(fd, static_cast<off_t>(p.size)) == 0;
  for (const auto& [offset, bytes] : p.pieces) {
    ok = ok &&
        ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)) == static_cast<ssize_t>(bytes.size());
  }
  return ::close(fd) == 0 && ok;
}

inline bool write_bytes(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const bool ok = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  return ::close(fd) == 0 && ok;
}

// ---- pickles ------------------------------------------------------------------------

class PickleBytes {
 public:
  PickleBytes& op(uint8_t c) {
    bytes_ += static_cast<char>(c);
    return *this;
  }
  PickleBytes& raw(const std::string& b) {
    bytes_ += b;
    return *this;
  }
  PickleBytes& proto(int v = 2) { return op(0x80).op(static_cast<uint8_t>(v)); }
  PickleBytes& global(const std::string& module, const std::string& name) {
    return op('c').raw(module + "\n" + name + "\n");
  }
  PickleBytes& str(const std::string& s) {
    op('X');
    put_le(bytes_, s.size(), 4);
    return raw(s);
  }
  PickleBytes& integer(int64_t v) {
    if (v >= 0 && v < 256) return op('K').op(static_cast<uint8_t>(v));
    if (v >= INT32_MIN && v <= INT32_MAX) {
      op('J');
      put_le(bytes_, static_cast<uint32_t>(static_cast<int32_t>(v)), 4);
      return *this;
    }
    op(0x8a).op(8);
    put_le(bytes_, static_cast<uint64_t>(v), 8);
    return *this;
  }
  PickleBytes& mark() { return op('('); }
  PickleBytes& tuple() { return op('t'); }
  PickleBytes& empty_tuple() { return op(')'); }
  PickleBytes& empty_dict() { return op('}'); }
  PickleBytes& empty_list() { return op(']'); }
  PickleBytes& setitems() { return op('u'); }
  PickleBytes& setitem() { return op('s'); }
  PickleBytes& appends() { return op('e'); }
  PickleBytes& reduce() { return op('R'); }
  PickleBytes& build() { return op('b'); }
  PickleBytes& newobj() { return op(0x81); }
  PickleBytes& binpersid() { return op('Q'); }
  PickleBytes& none() { return op('N'); }
  PickleBytes& boolean(bool b) { return op(b ? 0x88 : 0x89); }
  PickleBytes& put(uint8_t i) { return op('q').op(i); }
  PickleBytes& get(uint8_t i) { return op('h').op(i); }
  PickleBytes& long_put(uint32_t i) {  // LONG_BINPUT
    op('r');
    put_le(bytes_, i, 4);
    return *this;
  }
  PickleBytes& long_get(uint32_t i) {  // LONG_BINGET
    op('j');
    put_le(bytes_, i, 4);
    return *this;
  }
  PickleBytes& pop() { return op('0'); }
  PickleBytes& dict() { return op('d'); }  // MARK k v k v ... DICT
  PickleBytes& list() { return op('l'); }  // MARK v v ... LIST
  PickleBytes& stop() { return op('.'); }
  PickleBytes& int_tuple(const std::vector<int64_t>& values) {
    mark();
    for (int64_t v : values) integer(v);
    return tuple();
  }
  // torch._utils._rebuild_tensor_v2(('storage', torch.<storage_type>, key, 'cpu',
  // numel), offset, size, stride, False, OrderedDict())
  PickleBytes& tensor(const std::string& storage_type, const std::string& key, int64_t numel, int64_t offset,
                      const std::vector<int64_t>& size, const std::vector<int64_t>& stride) {
    global("torch._utils", "_rebuild_tensor_v2");
    mark();
    mark().str("storage").global("torch", storage_type).str(key).str("cpu").integer(numel).tuple();
    binpersid();
    integer(offset);
    int_tuple(size);
    int_tuple(stride);
    boolean(false);
    global("collections", "OrderedDict").empty_tuple().reduce();
    tuple();
    return reduce();
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// A .pt archive: <prefix>/data.pkl, <prefix>/data/<key> per storage, <prefix>/version,
// and <prefix>/byteorder when `byteorder` is not empty.
inline ZipSpec torch_zip_spec(const std::string& prefix, const std::string& pickle,
                              const std::vector<std::pair<std::string, std::string>>& storages,
                              const std::string& byteorder = "little") {
  ZipSpec spec;
  spec.entries.push_back({prefix + "/data.pkl", pickle});
  if (!byteorder.empty()) spec.entries.push_back({prefix + "/byteorder", byteorder});
  for (const auto& [key, bytes] : storages) spec.entries.push_back({prefix + "/data/" + key, bytes});
  spec.entries.push_back({prefix + "/version", "3\n"});
  return spec;
}

template <typename T>
std::string bytes_of(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

}  // namespace tensorscope::testing
