// npy_file.h — NumPy .npy files: write_npy (atomic) and NpyReader (streaming, validating).
//
// Used by a worker process's raw-value sink (one file per received tensor) and by
// offline tools that read such dumps back. Files are format 1.0 (2.0 only when the
// header does not fit in 65535 bytes), little-endian, C order, header padded so the
// data starts on a 64-byte boundary, as numpy.save lays them out.
//
// Element types (descr in the header):
//   float32 '<f4'  float64 '<f8'  float16 '<f2'  int8 '|i1'  int16 '<i2'  int32 '<i4'
//   int64 '<i8'  uint8 '|u1'  bool '|b1'
//   bfloat16: numpy has no bfloat16, so the raw bits are stored, unchanged, as a
//   structured dtype with one uint16 field named "bfloat16":
//     descr [('bfloat16', '<u2')]
//   numpy.load gives a structured array; a['bfloat16'] is the uint16 bit pattern, and
//   (a['bfloat16'].astype('<u4') << np.uint32(16)).view('<f4') the values as float32.
//   The field name makes the file self-describing: NpyReader maps exactly this descr
//   back to bfloat16, and a plain '<u2' file (numpy uint16) is "unsupported", never
//   mistaken for bfloat16.
//
// Reading is strict and never trusts the file: magic, version (1.0, 2.0, 3.0), a
// header of at most kMaxNpyHeaderBytes holding a Python dict literal with exactly the
// keys 'descr', 'fortran_order' and 'shape', at most kMaxNpyDims non-negative dims
// whose product (in bytes) fits in int64, and a file size of exactly header + data
// (nothing before or after). Every failure is a Status
// naming the file and the problem; nothing is allocated from a size read in the file
// beyond the (bounded) header itself. Big-endian descrs ('>f4') are refused.
// fortran_order=True is refused when it changes the element order (two or more dims
// of size > 1); when it cannot (0-d, 1-d, or all other dims 1) the file is accepted,
// since its bytes are the same as in C order.
//
// Thread safety: write_npy is safe to call from several threads and processes at once
// (each call writes its own uniquely named temporary file; two calls for the same final
// path leave one of the two files whole). An NpyReader is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tensorscope/base/status.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope::recording {

// Largest header NpyReader accepts (numpy's own default limit is 10000 bytes; this
// leaves room for files with very many dims, still a bounded allocation).
inline constexpr size_t kMaxNpyHeaderBytes = size_t{1} << 20;
// Most dims write_npy writes and NpyReader reads (numpy itself loads at most 32 or 64).
inline constexpr size_t kMaxNpyDims = 65535;
// Temporary files of write_npy are named "<kTempNpyPrefix><pid>-<n>-<final name>" in
// the final file's directory; a crash can leave one behind, never a partial final file.
inline constexpr char kTempNpyPrefix[] = ".tmp-npy-";

// The descr literal written for `dtype`, as it appears in the header text ("'<f4'",
// "[('bfloat16', '<u2')]", ...); "" for kInvalid or a value outside the enum.
std::string npy_descr(wire::DType dtype);

// Writes `data` (`bytes` bytes, C order, little-endian) as an .npy file at `path`:
// into a temporary file in the same directory, fsync, rename over `path`, fsync of the
// directory. On any failure the temporary file is removed and an existing file at
// `path` is left as it was. The directory must exist. Errors: invalid dtype, a negative
// dim, a shape whose size overflows or with more than kMaxNpyDims dims,
// bytes != numel * dtype_size, data == nullptr with
// bytes > 0, and every I/O error (message names the file).
Status write_npy(const std::string& path, wire::DType dtype, const std::vector<int64_t>& shape, const void* data,
                 size_t bytes);

class NpyReader {
 public:
  // Opens `path`, reads and validates its header (see the top of this file) and
  // positions at the first data byte. Errors name the file and the problem, e.g.
  // "x.npy: unsupported dtype '<c8'", "x.npy: header is missing key 'shape'",
  // "x.npy: file size mismatch: ...".
  static StatusOr<NpyReader> open(const std::string& path);

  NpyReader(NpyReader&& other) noexcept;
  NpyReader& operator=(NpyReader&& other) noexcept;
  NpyReader(const NpyReader&) = delete;
  NpyReader& operator=(const NpyReader&) = delete;
  ~NpyReader();

  const std::string& path() const { return path_; }
  wire::DType dtype() const { return dtype_; }
  // The descr literal as written in the header ("'<f4'", "[('bfloat16', '<u2')]").
  const std::string& descr() const { return descr_; }
  // Empty for a 0-d array (one element).
  const std::vector<int64_t>& shape() const { return shape_; }
  // As the header says; true only where it does not change the element order.
  bool fortran_order() const { return fortran_order_; }
  // Format version of the file: 1, 2 or 3 (minor is always 0).
  int format_major() const { return major_; }
  uint64_t numel() const { return numel_; }
  // Where the data starts in the file (a multiple of 64 in files numpy writes).
  uint64_t data_offset() const { return data_offset_; }
  // numel() * dtype_size(dtype()).
  uint64_t data_bytes() const { return data_bytes_; }
  // Data bytes not read yet.
  uint64_t remaining_bytes() const { return data_bytes_ - consumed_; }

  // Reads the next min(bytes, remaining_bytes()) data bytes into `dst` and returns how
  // many it read: fewer than `bytes` only at the end of the data, 0 once all is read.
  // Any chunk size works (it need not be a multiple of the element size), so a file of
  // any size streams through a small buffer. Errors: I/O errors, and a file that
  // became shorter since open() ("unexpected end of file").
  StatusOr<size_t> read(void* dst, size_t bytes);

 private:
  NpyReader() = default;
  void close_fd();

  std::string path_;
  int fd_ = -1;
  wire::DType dtype_ = wire::DType::kInvalid;
  std::string descr_;
  std::vector<int64_t> shape_;
  bool fortran_order_ = false;
  int major_ = 1;
  uint64_t numel_ = 0;
  uint64_t data_offset_ = 0;
  uint64_t data_bytes_ = 0;
  uint64_t consumed_ = 0;
};

}  // namespace tensorscope::recording
