// fuzz_video_files.cc — the files a restarted daemon reads back to list videos: a steps
// journal (video_journal.h), a cut fragmented MP4 (fmp4_scan.h) and index.json entries.
#include <cstdlib>

#include "fuzz_target.h"
#include "supervisor/index_writer.h"
#include "tensorscope/plotting/fmp4_scan.h"
#include "video_journal.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tensorscope;
  const std::string bytes = fuzz::as_string(data, size);
  const std::string path = fuzz::file_with(bytes, ".bin");
  StatusOr<daemon::IndexEntry> journal = daemon::read_video_journal(path, 1000);
  if (journal.is_ok() && (journal->frames < 0 || journal->frames > 1000)) std::abort();
  const plotting::Fmp4Extent extent = plotting::scan_fmp4(path);
  if (extent.whole_bytes > extent.file_bytes || extent.frames < 0) std::abort();
  const nlohmann::json json = nlohmann::json::parse(bytes, nullptr, false);
  if (!json.is_discarded()) (void)daemon::index_entry_from_json(json);
  (void)daemon::final_name_of_temp(bytes);
  return 0;
}
