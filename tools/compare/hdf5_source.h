// hdf5_source.h — reading tensors for `tensorscope compare` from HDF5 recordings (the
// files Hdf5Sink writes, see tensorscope/recording/hdf5_sink.h) and from .npy files through one
// streaming interface, and comparing two such tensors.
//
// Used by the `tensorscope compare` command-line tool (compare/dump_compare.cc); no
// daemon process uses it.
// A recording's layout is described in compare/hdf5_recording.h. libhdf5 runs only in
// the HDF5 reader process (compare/hdf5_reader_process.h), so a corrupt recording that
// makes libhdf5 loop or crash is an error naming the file after at most the reader's
// timeout, never a hang of the tool. bfloat16 rows (uint16 bit patterns) are decoded
// like the rest through convert_to_double. Values are read row by row, at most about
// `chunk_bytes` at a time (split along the tensor's first dimension; one slice of the
// remaining dimensions is read whole).
// Thread safety: a TensorSource is used by one thread at a time; the free functions
// are thread-safe (the reader process serializes requests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compare/hdf5_recording.h"
#include "compare/tensor_compare.h"
#include "tensorscope/base/status.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope::compare {

// True when the path ends in .h5 or .hdf5 (any case).
bool is_hdf5_path(const std::string& path);

// Lists the tensors of one recording: group by group (in name order), row by row.
// Errors (each names the file): those of list_recording (hdf5_recording.h), and those
// of the reader process (libhdf5 did not finish in time, the reader crashed).
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
  // True when the source reads a mapped file that is now shorter than when it was mapped
  // (see mapped_file.h); sources that read into buffers say so in peek()'s errors.
  virtual bool shrunk() const { return false; }
};

// Errors: those of NpyReader::open (naming the file).
StatusOr<std::unique_ptr<TensorSource>> open_npy_source(const std::string& path, size_t chunk_bytes);
// Errors: an invalid dtype; read errors (the file or its group can no longer be
// opened, the reader process's errors) come from peek(), naming the file.
StatusOr<std::unique_ptr<TensorSource>> open_hdf5_source(const Hdf5Tensor& tensor, size_t chunk_bytes);

// Compares a with b like compare_npy_files (shape mismatch: nothing read).
StatusOr<TensorCompareResult> compare_sources(TensorSource& a, TensorSource& b, const CompareTolerance& tolerance);

}  // namespace tensorscope::compare
