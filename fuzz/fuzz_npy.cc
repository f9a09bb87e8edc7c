// fuzz_npy.cc — a .npy file as compare and the tests read it (npy_file.h: the header's
// dict, its shape and dtype, the payload's size).
#include "fuzz_target.h"
#include "tensorscope/recording/npy_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tensorscope;
  StatusOr<recording::NpyReader> reader =
      recording::NpyReader::open(fuzz::file_with(fuzz::as_string(data, size), ".npy"));
  if (!reader.is_ok()) return 0;
  char buffer[4096];
  for (int i = 0; i < 64; ++i) {
    StatusOr<size_t> n = reader->read(buffer, sizeof(buffer));
    if (!n.is_ok() || *n == 0) break;
  }
  return 0;
}
