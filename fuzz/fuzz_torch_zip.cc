// fuzz_torch_zip.cc — a PyTorch file (.pt, a zip archive holding a pickle) as compare
// reads it without libtorch: the zip directory, the entries, the pickle program, the
// tensors it describes.
#include "compare/torch_file_source.h"
#include "compare/zip_archive.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tensorscope;
  const std::string path = fuzz::file_with(fuzz::as_string(data, size), ".pt");
  StatusOr<compare::ZipArchive> zip = compare::ZipArchive::open(path);
  if (zip.is_ok()) {
    for (const auto& entry : zip->entries()) (void)zip->read_entry(entry, 1 << 20);
  }
  (void)compare::list_torch_tensors(path);
  return 0;
}
