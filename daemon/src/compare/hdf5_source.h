// hdf5_source.h — reading tensors for `tensorscope compare` from HDF5 recordings (the
// files Hdf5Sink writes, see sinks/hdf5_sink.h) and from .npy files through one
// streaming interface, and comparing two such tensors.
//
// Used by the `tensorscope compare` command-line tool (compare/dump_compare.cc); no
// daemon process uses it.
// An HDF5 recording holds, per group (one per stream and layout), the rows of
// `values` [N, *shape] with their `steps`, `ranks` (and devices). Each row is one
// tensor: stream = the group's `stream` attribute, at (step, rank). The element type
// comes from the group's `dtype` attribute ("bfloat16" rows are uint16 bit patterns,
// decoded like the rest through convert_to_double); the shape from the dataset.
// Values are read row by row, at most about `chunk_bytes` at a time (split along the
// tensor's first dimension; one slice of the remaining dimensions is read whole).
// Thread safety: a TensorSource is used by one thread at a time; the free functions
// are thread-safe (HDF5 calls are serialized by the library).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compare/tensor_compare.h"
#include "tensorscope/shared/status.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope::daemon {

// One stored tensor of an HDF5 recording.
struct Hdf5Tensor {
  std::string file;    // path of the .h5 file
  std::string group;   // HDF5 group name, e.g. "model%2Ffc1@1"
  std::string stream;  // the group's `stream` attribute (unescaped stream name)
  uint64_t row = 0;    // row of values/steps/ranks
  int64_t step = 0;
  int rank = 0;
  wire::DType dtype = wire::DType::kInvalid;  // bfloat16 for "bfloat16-bits" rows
  std::vector<int64_t> shape;                 // empty: a 0-d tensor
};

// True when the path ends in .h5 or .hdf5 (any case).
bool is_hdf5_path(const std::string& path);

// Lists the tensors of one recording: group by group (in name order), row by row.
// Errors (each names the file): not an HDF5 file / corrupt or truncated, not a
// tensorscope recording (root attribute format != "tensorscope-hdf5"), a group
// without the stream/dtype attributes or the values/steps datasets, an unknown dtype,
// datasets whose lengths or element sizes disagree.
StatusOr<std::vector<Hdf5Tensor>> list_hdf5_tensors(const std::string& file);

// A tensor whose elements are read in pieces.
class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual const std::string& name() const = 0;  // for messages: file (and group/row)
  virtual wire::DType dtype() const = 0;
  virtual const std::vector<int64_t>& shape() const = 0;
  uint64_t numel() const;
  // The next elements not consumed yet (at least one, unless all were consumed: 0);
  // *data stays valid until the next peek(). Errors: read errors naming the file.
  virtual StatusOr<size_t> peek(const unsigned char** data) = 0;
  // Marks the first n (<= the last peek()'s count) elements as consumed.
  virtual void consume(size_t n) = 0;
};

// Errors: those of NpyReader::open (naming the file).
StatusOr<std::unique_ptr<TensorSource>> open_npy_source(const std::string& path,
                                                        size_t chunk_bytes);
// Errors: the file or its group can no longer be opened (naming the file).
StatusOr<std::unique_ptr<TensorSource>> open_hdf5_source(const Hdf5Tensor& tensor,
                                                         size_t chunk_bytes);

// Compares a with b like compare_npy_files (shape mismatch: nothing read).
StatusOr<TensorCompareResult> compare_sources(TensorSource& a, TensorSource& b,
                                              const CompareTolerance& tolerance);

}  // namespace tensorscope::daemon
