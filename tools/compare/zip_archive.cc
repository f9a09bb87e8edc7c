#include "compare/zip_archive.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <utility>

namespace tensorscope::compare {
namespace {

constexpr uint32_t kEocdSignature = 0x06054b50;
constexpr uint32_t kZip64EocdSignature = 0x06064b50;
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr uint32_t kCentralSignature = 0x02014b50;
constexpr uint32_t kLocalSignature = 0x04034b50;
constexpr size_t kEocdBytes = 22;
constexpr size_t kZip64LocatorBytes = 20;
constexpr size_t kZip64EocdBytes = 56;
constexpr size_t kCentralBytes = 46;
constexpr size_t kLocalBytes = 30;
constexpr size_t kMaxCommentBytes = 65535;
constexpr uint16_t kZip64ExtraId = 0x0001;

uint16_t le16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t le32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
      (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t le64(const unsigned char* p) {
  return static_cast<uint64_t>(le32(p)) | (static_cast<uint64_t>(le32(p + 4)) << 32);
}

// a + b <= limit without overflow.
bool fits(uint64_t a, uint64_t b, uint64_t limit) { return a <= limit && b <= limit - a; }

std::string method_name(uint16_t method) {
  switch (method) {
    case 8: return "deflate";
    case 9: return "deflate64";
    case 12: return "bzip2";
    case 14: return "lzma";
    case 93: return "zstd";
    default: return "method " + std::to_string(method);
  }
}

}  // namespace

ZipArchive::ZipArchive(ZipArchive&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      file_size_(other.file_size_),
      entries_(std::move(other.entries_)) {}

ZipArchive& ZipArchive::operator=(ZipArchive&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    file_size_ = other.file_size_;
    entries_ = std::move(other.entries_);
  }
  return *this;
}

ZipArchive::~ZipArchive() {
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<ZipArchive> ZipArchive::open(const std::string& path) {
  try {
    return open_archive(path);
  } catch (const std::bad_alloc&) {
    return Status::error(path + ": out of memory while reading its zip directory");
  } catch (const std::exception& e) {
    return Status::error(path + ": cannot read its zip directory: " + e.what());
  }
}

StatusOr<ZipArchive> ZipArchive::open_archive(const std::string& path) {
  ZipArchive zip;
  zip.path_ = path;
  zip.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (zip.fd_ < 0) return Status::from_errno(path + ": cannot open", errno);
  struct stat st {};
  if (::fstat(zip.fd_, &st) != 0) return Status::from_errno(path + ": cannot stat", errno);
  if (!S_ISREG(st.st_mode)) return Status::error(path + ": not a regular file");
  zip.file_size_ = static_cast<uint64_t>(st.st_size);
  Status read = zip.read_central_directory();
  if (!read) return read;
  return zip;
}

Status ZipArchive::read_at(uint64_t offset, void* dst, size_t bytes) const {
  if (!fits(offset, bytes, file_size_)) {
    return Status::error(path_ + ": truncated: " + std::to_string(bytes) + " bytes at offset " +
                         std::to_string(offset) + " lie past the end of the file (" + std::to_string(file_size_) +
                         " bytes)");
  }
  auto* out = static_cast<unsigned char*>(dst);
  while (bytes > 0) {
    const size_t step = std::min<size_t>(bytes, size_t{1} << 30);
    const ssize_t got = ::pread(fd_, out, step, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      return Status::from_errno(path_ + ": read error", errno);
    }
    if (got == 0) return Status::error(path_ + ": unexpected end of file (did it shrink?)");
    out += got;
    offset += static_cast<uint64_t>(got);
    bytes -= static_cast<size_t>(got);
  }
  return Status::ok();
}

Status ZipArchive::read_central_directory() {
  const std::string not_zip = path_ + ": not a zip archive";
  if (file_size_ < kEocdBytes) {
    return Status::error(not_zip + " (" + std::to_string(file_size_) + " bytes, too short)");
  }
  // The EOCD record is the last thing in the file, followed only by its comment.
  const size_t tail_len = static_cast<size_t>(std::min<uint64_t>(file_size_, kEocdBytes + kMaxCommentBytes));
  const uint64_t tail_start = file_size_ - tail_len;
  std::vector<unsigned char> tail(tail_len);
  Status read = read_at(tail_start, tail.data(), tail_len);
  if (!read) return read;
  // The record whose comment ends exactly at the end of the file (a signature inside a
  // comment does not qualify); failing that, the last one followed by its comment and
  // then other bytes (an archive with something appended).
  size_t eocd = tail_len;  // position in `tail`
  size_t loose = tail_len;
  for (size_t pos = tail_len - kEocdBytes + 1; pos-- > 0;) {
    if (le32(&tail[pos]) != kEocdSignature) continue;
    const size_t end = pos + kEocdBytes + le16(&tail[pos + 20]);
    if (end == tail_len) {
      eocd = pos;
      break;
    }
    if (end < tail_len && loose == tail_len) loose = pos;
  }
  if (eocd == tail_len) eocd = loose;
  if (eocd == tail_len) {
    return Status::error(not_zip + " (no end-of-central-directory record)");
  }
  const unsigned char* e = &tail[eocd];
  const uint64_t eocd_offset = tail_start + eocd;
  uint32_t disk = le16(e + 4), cd_disk = le16(e + 6);
  uint64_t entries_on_disk = le16(e + 8), entries = le16(e + 10);
  uint64_t cd_size = le32(e + 12), cd_offset = le32(e + 16);
  uint64_t cd_limit = eocd_offset;  // the central directory ends before this

  // ZIP64: a locator right before the EOCD record points at the ZIP64 EOCD record.
  bool zip64 = false;
  if (eocd_offset >= kZip64LocatorBytes) {
    unsigned char loc[kZip64LocatorBytes];
    read = read_at(eocd_offset - kZip64LocatorBytes, loc, sizeof(loc));
    if (!read) return read;
    if (le32(loc) == kZip64LocatorSignature) {
      zip64 = true;
      const uint32_t z64_disk = le32(loc + 4);
      const uint64_t z64_offset = le64(loc + 8);
      const uint32_t total_disks = le32(loc + 16);
      if (z64_disk != 0 || total_disks > 1) {
        return Status::error(path_ + ": multi-disk zip archives are not supported");
      }
      const uint64_t locator_offset = eocd_offset - kZip64LocatorBytes;
      if (!fits(z64_offset, kZip64EocdBytes, locator_offset)) {
        return Status::error(path_ +
                             ": corrupt zip archive: ZIP64 end-of-central-directory "
                             "record at offset " +
                             std::to_string(z64_offset) + " lies outside the file");
      }
      unsigned char rec[kZip64EocdBytes];
      read = read_at(z64_offset, rec, sizeof(rec));
      if (!read) return read;
      if (le32(rec) != kZip64EocdSignature) {
        return Status::error(path_ +
                             ": corrupt zip archive: bad ZIP64 end-of-central-directory "
                             "signature");
      }
      disk = le32(rec + 16);
      cd_disk = le32(rec + 20);
      entries_on_disk = le64(rec + 24);
      entries = le64(rec + 32);
      cd_size = le64(rec + 40);
      cd_offset = le64(rec + 48);
      cd_limit = z64_offset;
    }
  }
  if (!zip64 && (entries == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_offset == 0xFFFFFFFFu)) {
    return Status::error(path_ +
                         ": corrupt zip archive: ZIP64 values without a ZIP64 "
                         "end-of-central-directory record");
  }
  if (disk != 0 || cd_disk != 0 || entries_on_disk != entries) {
    return Status::error(path_ + ": multi-disk zip archives are not supported");
  }
  if (entries > kMaxZipEntries) {
    return Status::error(path_ + ": zip archive has " + std::to_string(entries) + " entries, more than the " +
                         std::to_string(kMaxZipEntries) + " supported");
  }
  if (cd_size > kMaxZipCentralDirectoryBytes) {
    return Status::error(path_ + ": zip central directory of " + std::to_string(cd_size) +
                         " bytes is larger than the " + std::to_string(kMaxZipCentralDirectoryBytes) + " supported");
  }
  if (!fits(cd_offset, cd_size, cd_limit)) {
    return Status::error(path_ + ": corrupt or truncated zip archive: central directory (" + std::to_string(cd_size) +
                         " bytes at offset " + std::to_string(cd_offset) + ") lies outside the file");
  }
  if (entries * kCentralBytes > cd_size) {
    return Status::error(path_ + ": corrupt zip archive: " + std::to_string(entries) +
                         " entries cannot fit in a central directory of " + std::to_string(cd_size) + " bytes");
  }
  std::vector<unsigned char> cd(static_cast<size_t>(cd_size));
  read = read_at(cd_offset, cd.data(), cd.size());
  if (!read) return read;

  entries_.reserve(static_cast<size_t>(entries));
  size_t pos = 0;
  for (uint64_t i = 0; i < entries; ++i) {
    const std::string where = path_ + ": corrupt zip archive: central directory entry " + std::to_string(i);
    if (cd.size() - pos < kCentralBytes) return Status::error(where + " is truncated");
    const unsigned char* c = &cd[pos];
    if (le32(c) != kCentralSignature) return Status::error(where + " has a bad signature");
    ZipEntry entry;
    entry.flags = le16(c + 8);
    entry.method = le16(c + 10);
    entry.crc32 = le32(c + 16);
    entry.compressed_size = le32(c + 20);
    entry.size = le32(c + 24);
    const size_t name_len = le16(c + 28), extra_len = le16(c + 30), comment_len = le16(c + 32);
    const uint32_t start_disk = le16(c + 34);
    entry.local_header_offset = le32(c + 42);
    const size_t record = kCentralBytes + name_len + extra_len + comment_len;
    if (cd.size() - pos < record) return Status::error(where + " runs past the directory's end");
    if (name_len > kMaxZipNameBytes) {
      return Status::error(where + ": name of " + std::to_string(name_len) + " bytes is longer than the " +
                           std::to_string(kMaxZipNameBytes) + " supported");
    }
    entry.name.assign(reinterpret_cast<const char*>(c + kCentralBytes), name_len);
    // ZIP64 extended information: the saturated 32-bit fields, in this order.
    const unsigned char* x = c + kCentralBytes + name_len;
    const unsigned char* x_end = x + extra_len;
    bool need_size = entry.size == 0xFFFFFFFFu, need_csize = entry.compressed_size == 0xFFFFFFFFu;
    bool need_offset = entry.local_header_offset == 0xFFFFFFFFu, need_disk = start_disk == 0xFFFF;
    while (x_end - x >= 4) {
      const uint16_t id = le16(x), len = le16(x + 2);
      const unsigned char* body = x + 4;
      if (x_end - body < len) return Status::error(where + " ('" + entry.name + "') has a bad extra field");
      if (id == kZip64ExtraId) {
        const unsigned char* f = body;
        const unsigned char* f_end = body + len;
        auto take64 = [&](uint64_t* out) {
          if (f_end - f < 8) return false;
          *out = le64(f);
          f += 8;
          return true;
        };
        if (need_size && !take64(&entry.size)) break;
        need_size = false;
        if (need_csize && !take64(&entry.compressed_size)) break;
        need_csize = false;
        if (need_offset && !take64(&entry.local_header_offset)) break;
        need_offset = false;
        if (need_disk) {
          if (f_end - f < 4) break;
          if (le32(f) != 0) return Status::error(path_ + ": multi-disk zip archives are not supported");
          need_disk = false;
        }
      }
      x = body + len;
    }
    if (need_size || need_csize || need_offset || need_disk) {
      return Status::error(where + " ('" + entry.name + "') lacks its ZIP64 sizes or offset");
    }
    if (start_disk != 0 && start_disk != 0xFFFF) {
      return Status::error(path_ + ": multi-disk zip archives are not supported");
    }
    // The local header and the data lie before the central directory.
    if (!fits(entry.local_header_offset, kLocalBytes, cd_offset) ||
        !fits(entry.local_header_offset + kLocalBytes, entry.compressed_size, cd_offset)) {
      return Status::error(path_ + ": corrupt or truncated zip archive: entry '" + entry.name + "' (" +
                           std::to_string(entry.compressed_size) + " bytes at offset " +
                           std::to_string(entry.local_header_offset) + ") lies outside the file's data area");
    }
    entries_.push_back(std::move(entry));
    pos += record;
  }
  return Status::ok();
}

const ZipEntry* ZipArchive::find(const std::string& name) const {
  for (const ZipEntry& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

StatusOr<uint64_t> ZipArchive::data_offset(const ZipEntry& entry) const {
  try {
    return find_data(entry);
  } catch (const std::bad_alloc&) {
    return Status::error(path_ + ": out of memory while reading zip entry '" + entry.name + "'");
  } catch (const std::exception& e) {
    return Status::error(path_ + ": cannot read zip entry '" + entry.name + "': " + e.what());
  }
}

StatusOr<uint64_t> ZipArchive::find_data(const ZipEntry& entry) const {
  const std::string where = path_ + ": zip entry '" + entry.name + "'";
  if (entry.flags & 1) return Status::error(where + " is encrypted; cannot read it");
  if (entry.method != 0) {
    return Status::error(where + " is compressed (" + method_name(entry.method) +
                         "); only stored (uncompressed) entries can be read, as PyTorch "
                         "writes them");
  }
  if (entry.compressed_size != entry.size) {
    return Status::error(where + " is stored but its sizes differ (" + std::to_string(entry.compressed_size) + " vs " +
                         std::to_string(entry.size) + ")");
  }
  unsigned char local[kLocalBytes];
  Status read = read_at(entry.local_header_offset, local, sizeof(local));
  if (!read) return read;
  if (le32(local) != kLocalSignature) return Status::error(where + ": bad local header signature");
  const size_t name_len = le16(local + 26), extra_len = le16(local + 28);
  if (name_len != entry.name.size()) {
    return Status::error(where + ": local header names a different entry");
  }
  std::string name(name_len, '\0');
  read = read_at(entry.local_header_offset + kLocalBytes, name.data(), name_len);
  if (!read) return read;
  if (name != entry.name) return Status::error(where + ": local header names a different entry");
  const uint64_t data = entry.local_header_offset + kLocalBytes + name_len + extra_len;
  if (!fits(data, entry.size, file_size_)) {
    return Status::error(where + ": truncated: its " + std::to_string(entry.size) + " bytes at offset " +
                         std::to_string(data) + " run past the end of the file (" + std::to_string(file_size_) +
                         " bytes)");
  }
  return data;
}

StatusOr<std::string> ZipArchive::read_entry(const ZipEntry& entry, uint64_t max_bytes) const {
  if (entry.size > max_bytes) {
    return Status::error(path_ + ": zip entry '" + entry.name + "' has " + std::to_string(entry.size) +
                         " bytes, more than the " + std::to_string(max_bytes) + " supported");
  }
  auto offset = data_offset(entry);
  if (!offset) return offset.status();
  try {
    std::string data(static_cast<size_t>(entry.size), '\0');
    Status read = read_at(*offset, data.data(), data.size());
    if (!read) return read;
    return data;
  } catch (const std::bad_alloc&) {
    return Status::error(path_ + ": out of memory reading zip entry '" + entry.name + "' (" +
                         std::to_string(entry.size) + " bytes)");
  }
}

}  // namespace tensorscope::compare
