// fuzz_hdf5.cc — an HDF5 recording as `tensorscope compare` reads it (hdf5_source.h):
// libhdf5 opens the file, then the recording's layout (groups, attributes, datasets)
// is checked and every listed tensor is read.
#include "compare/hdf5_source.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tensorscope;
  const std::string path = fuzz::file_with(fuzz::as_string(data, size), ".h5");
  StatusOr<std::vector<daemon::Hdf5Tensor>> tensors = daemon::list_hdf5_tensors(path);
  if (!tensors.is_ok()) return 0;
  for (size_t i = 0; i < tensors->size() && i < 8; ++i) {
    StatusOr<std::unique_ptr<daemon::TensorSource>> source = daemon::open_hdf5_source((*tensors)[i], 4096);
    if (!source.is_ok()) continue;
    for (int chunk = 0; chunk < 64; ++chunk) {
      const unsigned char* bytes = nullptr;
      StatusOr<size_t> n = (*source)->peek(&bytes);
      if (!n.is_ok() || *n == 0) break;
      (*source)->consume(*n);
    }
  }
  return 0;
}
