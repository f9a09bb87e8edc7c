// torch_tensor_describer.h — describing one tensor of a PyTorch file from its rebuild
// call: dtype (from the storage type), shape, strides, storage offset and the storage
// entry of the zip archive, each checked (every element inside its storage).
//
// Internal to tools/compare/ (torch_file_source.cc's listing). A tensor that cannot be
// read gets TorchTensor::error, naming the file and the tensor. Thread safety: one
// describer, one thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "compare/pickle_machine.h"
#include "compare/torch_file_source.h"
#include "compare/zip_archive.h"

namespace tensorscope::compare {

class TensorDescriber {
 public:
  // The storages are the entries <prefix>/data/<key> of `zip`.
  TensorDescriber(const PickleMachine& m, const ZipArchive& zip, std::string prefix);
  ~TensorDescriber();
  TensorDescriber(const TensorDescriber&) = delete;
  TensorDescriber& operator=(const TensorDescriber&) = delete;

  // Fills t (name and file set) from the rebuild call `v`; problems go to t.error.
  void describe(PickleValue v, TorchTensor& t);
  // Memory held by the cache of storages (keys, messages), about.
  size_t cache_bytes() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensorscope::compare
