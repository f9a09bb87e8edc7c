// fuzz_hdf5.cc — an HDF5 recording as `tensorscope compare` reads it: libhdf5 opens
// the file, then the recording's layout (groups, attributes, datasets) is checked and
// every listed tensor is read.
// Under libFuzzer the reading runs in this process (hdf5_recording.h), so its coverage
// guides the fuzzer and a libhdf5 loop shows as a timeout. The replay in the test suite
// goes through the HDF5 reader process as the tool does (hdf5_source.h), with a short
// timeout: every input must give a result or an error, never a hang.
#include <chrono>

#include "compare/hdf5_reader_process.h"
#include "compare/hdf5_recording.h"
#include "compare/hdf5_source.h"
#include "fuzz_target.h"

namespace {

using namespace tensorscope;

#ifdef TENSORSCOPE_LIBFUZZER
void read_all(const std::string& path) {
  StatusOr<std::vector<compare::Hdf5Tensor>> tensors = compare::list_recording(path);
  if (!tensors.is_ok()) return;
  compare::Hdf5RowReader reader;
  std::vector<unsigned char> buffer;
  for (size_t i = 0; i < tensors->size() && i < 8; ++i) {
    const compare::Hdf5Tensor& t = (*tensors)[i];
    uint64_t bytes = wire::dtype_size(t.dtype);
    for (size_t d = 1; d < t.shape.size(); ++d) bytes *= static_cast<uint64_t>(t.shape[d]);
    if (bytes == 0 || bytes > (1u << 20)) continue;
    buffer.resize(bytes);
    (void)reader.read(t, 0, 1, buffer.data());
  }
}
#else
void read_all(const std::string& path) {
  compare::Hdf5ReaderProcess::shared().set_timeout(std::chrono::seconds(2));
  StatusOr<std::vector<compare::Hdf5Tensor>> tensors = compare::list_hdf5_tensors(path);
  if (!tensors.is_ok()) return;
  for (size_t i = 0; i < tensors->size() && i < 8; ++i) {
    StatusOr<std::unique_ptr<compare::TensorSource>> source = compare::open_hdf5_source((*tensors)[i], 4096);
    if (!source.is_ok()) continue;
    for (int chunk = 0; chunk < 64; ++chunk) {
      const unsigned char* bytes = nullptr;
      StatusOr<size_t> n = (*source)->peek(&bytes);
      if (!n.is_ok() || *n == 0) break;
      (*source)->consume(*n);
    }
  }
}
#endif

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  read_all(fuzz::file_with(fuzz::as_string(data, size), ".h5"));
  return 0;
}
