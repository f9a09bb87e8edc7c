// zip_archive.h — a read-only, validating reader of ZIP archives over a file
// descriptor, enough for the archives torch.save / torch::save / torch::pickle_save
// write (PyTorch's "zip file serialization": every entry STORED, ZIP64 records always
// present, data descriptors after each entry).
//
// Used by the `tensorscope compare` command-line tool (compare/torch_file_source.cc);
// no daemon process uses it.
// What it reads: the end-of-central-directory record (searched backwards over an
// archive comment of up to 65535 bytes), the ZIP64 end-of-central-directory locator
// and record when present (then preferred over the 32-bit fields), the central
// directory entries with their ZIP64 extra fields (sizes and offsets beyond 4 GiB),
// and, per entry on request, the local header (to find where the entry's data
// starts). Only STORED (method 0) entries can be read; an entry stored with another
// method (deflate, ...) or encrypted is an error naming the entry. CRCs are not
// checked. Multi-disk archives are refused.
// Nothing read from the file is trusted: every offset and size is checked against the
// file size before use, the central directory is at most kMaxZipCentralDirectoryBytes
// and kMaxZipEntries entries, a name at most kMaxZipNameBytes bytes; a corrupt or
// truncated file gives a Status naming the file, never a crash or an allocation sized
// by the file beyond those caps. Memory: open() reads the central directory whole (at
// most 64 MiB, freed when it returns) and keeps a ZipEntry per entry (at most 2^19
// of 64 bytes plus their names, which the directory's size bounds): under 100 MiB
// kept. Running out of memory is an error naming the file, never an exception.
// Thread safety: a ZipArchive is immutable after open(); read_at() uses pread and may
// be called from several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tensorscope/base/status.h"

namespace tensorscope::compare {

// (PyTorch writes one entry per storage, plus a few: torch_file_source.h lists at most
// 2^18 tensors.)
inline constexpr size_t kMaxZipEntries = size_t{1} << 19;
inline constexpr size_t kMaxZipNameBytes = 4096;
inline constexpr uint64_t kMaxZipCentralDirectoryBytes = uint64_t{64} << 20;

struct ZipEntry {
  std::string name;
  uint16_t method = 0;  // 0 stored, 8 deflate, ...
  uint16_t flags = 0;   // general purpose bit flags (bit 0: encrypted)
  uint32_t crc32 = 0;
  uint64_t compressed_size = 0;
  uint64_t size = 0;  // uncompressed
  uint64_t local_header_offset = 0;
};

class ZipArchive {
 public:
  // Opens `path` and reads its central directory. Errors (each names the file): the
  // file cannot be opened or is not a regular file, no end-of-central-directory record
  // ("not a zip archive"), a multi-disk archive, a ZIP64 locator or record that is
  // inconsistent, a central directory outside the file or over the caps, an entry that
  // is malformed (bad signature, fields past the directory's end, a ZIP64 field
  // missing), a name over kMaxZipNameBytes, an entry whose data range lies outside the
  // file.
  static StatusOr<ZipArchive> open(const std::string& path);

  ZipArchive(ZipArchive&& other) noexcept;
  ZipArchive& operator=(ZipArchive&& other) noexcept;
  ZipArchive(const ZipArchive&) = delete;
  ZipArchive& operator=(const ZipArchive&) = delete;
  ~ZipArchive();

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }
  // In central-directory order.
  const std::vector<ZipEntry>& entries() const { return entries_; }
  // The entry named exactly `name`, nullptr if none (the first one if repeated).
  const ZipEntry* find(const std::string& name) const;

  // Where the entry's data starts in the file, read from its local header. Errors
  // (naming the file and the entry): the entry is not STORED or is encrypted, a bad
  // local header (signature, name differing from the central directory's, outside the
  // file), data running past the end of the file.
  StatusOr<uint64_t> data_offset(const ZipEntry& entry) const;
  // The whole data of a STORED entry of at most `max_bytes` bytes (larger: an error).
  StatusOr<std::string> read_entry(const ZipEntry& entry, uint64_t max_bytes) const;
  // Reads exactly `bytes` bytes at `offset` of the file. Errors: a range outside the
  // file ("truncated"), I/O errors; each names the file.
  Status read_at(uint64_t offset, void* dst, size_t bytes) const;

 private:
  ZipArchive() = default;
  static StatusOr<ZipArchive> open_archive(const std::string& path);
  StatusOr<uint64_t> find_data(const ZipEntry& entry) const;
  Status read_central_directory();

  std::string path_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  std::vector<ZipEntry> entries_;
};

}  // namespace tensorscope::compare
