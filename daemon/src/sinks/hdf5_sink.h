// hdf5_sink.h — Hdf5Sink: records the raw values of received tensors in rotating HDF5 files.
//
// Used by a worker process's raw-value sink (append() per received tensor, poll()
// periodically, finalize() on shutdown); the files are read with h5py or the HDF5 C API.
//
// Files: `<dir>/<base>.<n>.h5`, n = 0, 1, 2, ... The file being written is named
// `<dir>/.<base>.<n>.h5.partial` and is renamed to its final name only after it was
// closed and fsync'ed, so every file with a final name is complete and readable; a
// killed writer leaves a `.partial` file behind, never a final name. open() starts at
// the first n for which neither name exists, so a restarted worker never overwrites
// (or reuses the number of) an earlier file. A file is created by the first append()
// after open() or finalize() (no empty files), and finalized when it holds
// rotate_bytes of values, when rotate_seconds passed since it was created (checked by
// append() and poll()), by finalize(), and by the destructor.
//
// Layout of a file:
//   /                       attributes: format = "tensorscope-hdf5", format_version = 1
//   /<group>                one group per stream and layout (shape + stored dtype);
//                           attributes (variable-length UTF-8 strings unless noted):
//                             stream  the stream name, unchanged
//                             kind    e.g. "activation" (of the group's first record)
//                             dtype   the stored element type: "float32", "int8",
//                                     "bool", ..., "bfloat16" (see below)
//                             shape   int64 [ndim]: the tensor shape (absent when 0-d)
//   /<group>/values         [N, *shape] of the stored type, extendible along axis 0;
//                           chunked along axis 0 (as many tensors per chunk as fit in
//                           64 KiB, at least one; a tensor over 16 MiB is split into
//                           chunks of at most 16 MiB), gzip when gzip_level > 0
//   /<group>/steps          int64 [N]: the step of each stored value
//   /<group>/ranks          int32 [N]
//   /<group>/devices        fixed-length strings of 16 bytes, NUL-padded [N] ("cpu",
//                           "cuda0", ...; h5py gives bytes: numpy 'S16')
// Row i of the four datasets is one stored tensor; rows are in append order.
//
// Group names: the stream name with '%', '/', '@' and control bytes percent-escaped
// ("%25", "%2F", "%40", ...; a name made only of dots has its dots escaped as "%2E"),
// so "model/fc1.out" is the group "model%2Ffc1.out". When a stream's shape or stored
// dtype changes, its values continue in the group "<name>@1" (then "@2", ...): the
// k-th distinct layout of a stream goes to "<name>@k" (k = 0 is plain "<name>"), the
// same name in every file of this sink; a layout seen before goes back to its group.
//
// Stored element types (HDF5 file types, little-endian; h5py reads them as noted):
//   float32/64 IEEE (f4/f8); float16 a 16-bit IEEE float type (h5py: float16);
//   int8/16/32/64 and uint8 the standard integer types; bool an 8-bit enum
//   {FALSE = 0, TRUE = 1} (h5py: bool; any non-zero byte is stored as 1).
//   bfloat16 with dtype "keep": numpy and h5py have no bfloat16, so the bit patterns
//   are stored unchanged as uint16, the group's `dtype` attribute is "bfloat16" and
//   `values` has the attribute encoding = "bfloat16-bits"; the float32 values are
//   (v.astype('<u4') << 16).view('<f4').
//   With dtype "float32", "float16" or "float64" every element is converted on write
//   (ints and bool too; float16 rounds to nearest even, overflowing to +-Inf).
//
// Change detection (change_detection = true): a value whose bytes, dtype and shape are
// identical to the previous stored value of the same (stream, device, rank) is not
// stored, only counted (skipped_unchanged()); the steps of stored values are kept, so
// skipped steps are gaps in `steps`. Values are compared by a 64-bit hash and then
// byte by byte against a copy of the previous stored value; for values over
// kHdf5ExactCompareBytes (64 MiB) no copy is kept and equal hashes count as unchanged.
// The state lives in the sink, not the file: a value unchanged since the previous
// file is skipped in the next one too.
//
// Errors: every HDF5 failure becomes a Status naming the file and HDF5's messages (the
// library's automatic error printing is turned off); bad records (invalid dtype,
// bytes != numel * dtype size, a negative dim, more than 31 dims, an empty stream name,
// a device name over wire::kDeviceBytes (16) bytes) are refused with nothing written.
// A failed append leaves the datasets of the group as they were.
//
// Thread safety: an Hdf5Sink is used by one thread at a time. Several sinks in one
// process must use distinct (dir, base) pairs; Debian's HDF5 is built thread-safe
// (calls are serialized by a global lock).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "tensorscope/shared/status.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope::daemon {

// Values up to this size are compared byte by byte before being skipped as unchanged.
inline constexpr uint64_t kHdf5ExactCompareBytes = uint64_t{64} << 20;

struct Hdf5SinkOptions {
  // "keep" (the received type), or "float32" / "float16" / "float64": every value is
  // converted to that type on write (ints and bool too).
  std::string dtype = "keep";
  int gzip_level = 4;              // 0 = no compression, 1..9 deflate
  bool change_detection = true;    // skip a value identical to the stream's previous one
  // Finalize the current file once it holds this many bytes of values (as stored,
  // after conversion; 0 = no limit) ...
  uint64_t rotate_bytes = uint64_t{256} << 20;
  // ... or this many seconds after it was created (<= 0: no limit), whichever first.
  int rotate_seconds = 60;
};

// One received tensor. `data` (`bytes` bytes, C order, little-endian) is only read
// during append() and may still be in shared memory.
struct Hdf5Record {
  std::string stream;
  std::string kind;    // wire::tensor_kind_name(), e.g. "activation"
  std::string device;  // "cpu", "cuda0", ...
  int rank = 0;
  int64_t step = 0;
  wire::DType dtype = wire::DType::kInvalid;
  std::vector<int64_t> shape;  // empty: a 0-d tensor
  const void* data = nullptr;
  uint64_t bytes = 0;
};

class Hdf5Sink {
 public:
  // Creates `dir` (and parents) as needed and checks the options. Creates no file yet.
  // Errors: an empty base or one holding '/', an unknown dtype, gzip_level outside
  // 0..9, deflate not available in the HDF5 library, a directory that cannot be made.
  static StatusOr<std::unique_ptr<Hdf5Sink>> open(std::string dir, std::string base,
                                                  Hdf5SinkOptions options);

  Hdf5Sink(const Hdf5Sink&) = delete;
  Hdf5Sink& operator=(const Hdf5Sink&) = delete;
  // Finalizes the current file (errors are logged).
  ~Hdf5Sink();

  // Stores `record` (creating the next file first when none is open, and finalizing
  // the current one first when rotate_seconds passed), or skips it when it is
  // unchanged (see the top of this file). Finalizes the file afterwards when it holds
  // rotate_bytes. Errors: a bad record (nothing written), HDF5 and I/O errors.
  Status append(const Hdf5Record& record);

  // Finalizes the current file when rotate_seconds passed since it was created.
  Status poll();

  // Closes, fsyncs and renames the current file to its final name; no-op when no file
  // is open. The next append() creates the next file. On a failure the file keeps its
  // `.partial` name (and its number is not reused).
  Status finalize();

  // Values stored (not counting skipped ones), over the sink's life.
  uint64_t appended() const { return appended_; }
  // Values skipped by change detection, over the sink's life.
  uint64_t skipped_unchanged() const { return skipped_unchanged_; }
  // Paths of the files finalized so far, in order.
  std::vector<std::string> finished_files() const { return finished_files_; }

  // Where the sink writes: the final and temporary path of file `n`.
  std::string final_path(uint64_t n) const;
  std::string partial_path(uint64_t n) const;

 private:
  struct Layout;
  struct OpenGroup;
  struct StreamState;
  struct OpenFile;

  Hdf5Sink(std::string dir, std::string base, Hdf5SinkOptions options, wire::DType target,
           uint64_t next_index);

  Status open_file();
  Status write_record(const Hdf5Record& record, const std::string& group_name,
                      wire::DType stored, const void* values, uint64_t value_bytes);
  StatusOr<OpenGroup*> group_for(const Hdf5Record& record, const std::string& group_name,
                                 wire::DType stored);
  bool rotate_due() const;
  bool close_file_handles();

  std::string dir_;
  std::string base_;
  Hdf5SinkOptions options_;
  wire::DType target_ = wire::DType::kInvalid;  // kInvalid: keep the received type
  uint64_t next_index_ = 0;

  std::unique_ptr<OpenFile> file_;
  // Per (stream, device, rank): the previous stored value (change detection).
  std::map<std::tuple<std::string, std::string, int>, StreamState> last_;
  // Per stream: the layouts seen so far, in order (index k = group suffix "@k").
  std::map<std::string, std::vector<Layout>> layouts_;
  std::vector<unsigned char> scratch_;  // converted values

  uint64_t appended_ = 0;
  uint64_t skipped_unchanged_ = 0;
  std::vector<std::string> finished_files_;
};

}  // namespace tensorscope::daemon
