// torch_file_source.h — reading tensors for `tensorscope compare` from files written by
// torch.save (Python, PyTorch >= 1.6 zip format), torch::save and torch::pickle_save
// (C++), without libtorch: a zip reader (compare/zip_archive.h) and a safe unpickler
// (compare/pickle_machine.h).
//
// Used by the `tensorscope compare` command-line tool (compare/dump_compare.cc); no
// daemon process uses it.
// File layout: a zip archive holding <prefix>/data.pkl (the pickled object), the
// storages as <prefix>/data/<key> and optionally <prefix>/byteorder ("little"; "big"
// is refused). <prefix> varies ("archive" for torch::pickle_save, the file's stem for
// torch.save / torch::save); the archive must hold exactly one top-level */data.pkl.
// Tensor names (in pickle order; containers nest with '.'):
//   - a lone tensor (torch.save(t), torch::pickle_save(t)) is named "" (the empty name);
//   - a dict / OrderedDict (state_dict, torch.save({'a': t})) names each value by its
//     key (str keys as they are, int/bool/None/float keys as Python prints them, other
//     keys by position), e.g. "encoder.weight" or "optimizer.state.0.exp_avg";
//   - a list / tuple / set names each element by its index: "0", "1", ...;
//   - C++ torch::save(tensor) and torch::save(std::vector<Tensor>) write a TorchScript
//     module whose attributes "0", "1", ... are the tensors: named "0", "1", ... (a
//     single tensor saved this way is "0");
//   - torch::pickle_save of a typed dict/list (restore_type_tag) is named like the
//     dict/list; a Parameter like its tensor;
//   - a pickled torch.nn.Module is named like its state_dict ("fc.weight"); any other
//     object by its BUILD state (dict keys), its SETITEM/APPEND items and its
//     constructor arguments (by index).
//   The same name twice (e.g. a non-string key repeated) gets "#2", "#3", ... appended.
// dtypes: float32/64/16, bfloat16, int8/16/32/64, uint8, bool (from the storage type,
// e.g. torch.FloatStorage, or a dtype global such as torch.float32). Complex,
// quantized, sparse and other tensors are listed with `error` set (naming the file and
// the tensor); reading them is refused.
// Reading streams the elements in logical (row-major) order: contiguous tensors are
// read straight from the stored entry, at most about chunk_bytes at a time;
// non-contiguous views (storage offset, any non-negative strides, including 0) are
// gathered a chunk of consecutive logical elements at a time (at most chunk_bytes of
// them, and 2^20 elements), visited in storage order (dims by decreasing stride) and
// read in runs of nearby storage elements (gaps under 8 KiB read through, each read at
// most chunk_bytes). Listing checks that every element of every tensor lies inside its
// storage entry.
// Thread safety: a TensorSource is used by one thread at a time; the free functions are
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compare/hdf5_source.h"
#include "tensorscope/base/status.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope::compare {

// Largest data.pkl read (a state_dict of 100000 tensors pickles to about 10 MB; the
// unpickler's memory is bounded separately, see compare/pickle_machine.h).
inline constexpr uint64_t kMaxTorchPickleBytes = uint64_t{32} << 20;
// Most dims of one tensor.
inline constexpr size_t kMaxTorchDims = 255;
// Most tensors in one file, counting a tensor again each time a shared container
// (the pickle's memo) reaches it.
inline constexpr size_t kMaxTorchTensors = size_t{1} << 18;
// Longest tensor name (containers' names joined with '.').
inline constexpr size_t kMaxTorchNameBytes = 4096;
// Most bytes of all the tensor names of one file (counted as kMaxTorchTensors is).
inline constexpr size_t kMaxTorchNameTotalBytes = size_t{32} << 20;
// Most memory the listing of one file takes (its TorchTensor records with their names,
// shapes, storage entry names and messages, about), besides the unpickler's.
inline constexpr size_t kMaxTorchListingBytes = size_t{128} << 20;

// One tensor of a PyTorch file.
struct TorchTensor {
  std::string file;  // path of the .pt file
  std::string name;  // see the top of this file; "" for a lone tensor
  wire::DType dtype = wire::DType::kInvalid;
  std::vector<int64_t> shape;   // empty: a 0-d tensor
  std::vector<int64_t> stride;  // in elements, one per dim
  int64_t storage_offset = 0;   // in elements
  std::string storage_entry;    // zip entry of the storage, e.g. "archive/data/0"
  uint64_t data_offset = 0;     // where the storage's bytes start in the file
  uint64_t storage_bytes = 0;   // size of the storage entry
  // Non-empty when the tensor cannot be read (unsupported dtype or kind, a layout
  // outside its storage, a missing or compressed storage entry): a message naming
  // the file and the tensor. The other fields may then be unset.
  std::string error;

  // Elements are stored row-major and dense from storage_offset on.
  bool contiguous() const;
  // "x.pt (tensor 'fc.weight')", or "x.pt" for the lone tensor "".
  std::string display_name() const;
};

// True when the path ends in .pt or .pth (any case).
bool is_torch_path(const std::string& path);

// Lists the tensors of one file, in pickle order. Errors (each names the file): not a
// regular file / cannot be opened, the legacy format (PyTorch < 1.6 or
// _use_new_zipfile_serialization=False), not a zip archive, a corrupt or truncated
// archive, no or several */data.pkl, a big-endian byteorder, a data.pkl over
// kMaxTorchPickleBytes, a pickle that is corrupt, truncated, uses unsupported opcodes
// or needs more memory than the unpickler's bounds (pickle_machine.h), objects nested
// deeper than 200 containers, more than 2^25 objects and container items to visit
// (shared containers are walked again wherever they are reached), over
// kMaxTorchTensors tensors, a tensor name over kMaxTorchNameBytes, names over
// kMaxTorchNameTotalBytes in all, a listing over kMaxTorchListingBytes, running out of
// memory (never an exception). Memory, whatever the file: data.pkl (at most 32 MiB),
// the unpickler (at most 256 MiB more, and its allocator's overhead), the names found
// (at most 32 MiB, and 12 MiB of records) and the listing (at most 128 MiB): about
// half a GiB at the very most, plus the zip directory (zip_archive.h). Time: linear in
// the pickle, the walk's steps and the tensors listed (the "#<n>" suffixes of repeated
// names included).
StatusOr<std::vector<TorchTensor>> list_torch_tensors(const std::string& file);

// A contiguous tensor is read from the file's mapping (`reads` kMapped: peek() hands out
// up to kMappedStepBytes at a time, and shrunk() says when the file was cut short under
// it), else through a buffer of `chunk_bytes`; other tensors are gathered through one.
// Errors: the tensor's `error`; the file cannot be opened or is now shorter than the
// storage; running out of memory; later read errors come from peek() (naming the file
// and tensor; no exception escapes it either).
StatusOr<std::unique_ptr<TensorSource>> open_torch_source(const TorchTensor& tensor, size_t chunk_bytes,
                                                          CompareReads reads = CompareReads::kMapped);

}  // namespace tensorscope::compare
