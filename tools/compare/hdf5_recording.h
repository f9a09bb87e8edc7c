// hdf5_recording.h — reads a tensorscope HDF5 recording (the files Hdf5Sink writes, see
// tensorscope/recording/hdf5_sink.h) with libhdf5, in the calling process.
//
// Used inside the HDF5 reader process (hdf5_reader_process.h), which is how
// `tensorscope compare` reads recordings: libhdf5 can loop forever or crash on a
// corrupt file, so the tool never calls these functions itself. Also used by the
// fuzz target, which needs the parsing in its own process.
// A recording holds, per group (one per stream and layout), the rows of `values`
// [N, *shape] with their `steps`, `ranks` (and devices). Each row is one tensor: stream
// = the group's `stream` attribute, at (step, rank). The element type comes from the
// group's `dtype` attribute ("bfloat16" rows are uint16 bit patterns); the shape from
// the dataset.
// Thread safety: list_recording is thread-safe (HDF5 calls are serialized by the
// library); an Hdf5RowReader is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensorscope/base/status.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope::compare {

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

// Lists the tensors of one recording: group by group (in name order), row by row.
// Errors (each names the file): not a regular file, not an HDF5 file / corrupt or
// truncated, not a tensorscope recording (root attribute format !=
// "tensorscope-hdf5"), a group without the stream/dtype attributes or the values/steps
// datasets, an unknown dtype, datasets whose lengths or element sizes disagree.
StatusOr<std::vector<Hdf5Tensor>> list_recording(const std::string& file);

// Reads parts of listed tensors, keeping the last file and dataset open between calls
// (reopened when the file was replaced or changed since). libhdf5 shares one open file
// between opens of the same file: close() before listing a file that may have
// changed, so the listing does not see the old one.
class Hdf5RowReader {
 public:
  Hdf5RowReader();
  ~Hdf5RowReader();

  // Reads `count` slices of `tensor` along its first dimension, starting at slice
  // `first` (a 0-d tensor: first 0, count 1), into `out` (count * the elements of one
  // slice * the element size bytes). Errors name the file, group and row.
  Status read(const Hdf5Tensor& tensor, uint64_t first, uint64_t count, unsigned char* out);
  // Closes the open file, if any.
  void close();

 private:
  struct Open;  // the open file and dataset (keeps hdf5.h out of this header)
  std::unique_ptr<Open> open_;
};

}  // namespace tensorscope::compare
