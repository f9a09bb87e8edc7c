// fmp4_scan.h — how much of a fragmented MP4 (as VideoWriter writes them) is whole.
//
// Used by the daemon to recover videos whose writer was killed: a file cut off mid-write
// keeps its whole fragments; scan_fmp4 counts their frames and says where they end, so
// the file can be cut there and listed with its real frame count. The file is untrusted
// (any bytes): sizes are checked, nothing is allocated from them beyond a bounded box.
// Thread safety: a pure function over a file.
#pragma once

#include <cstdint>
#include <string>

namespace tensorscope::plotting {

struct Fmp4Extent {
  bool valid = false;        // an ftyp and a moov came first
  int64_t frames = 0;        // samples in the whole fragments
  uint64_t whole_bytes = 0;  // where the last whole box ends (the header, a fragment, the index)
  uint64_t file_bytes = 0;
  std::string error;  // why not valid, or what ended the scan early ("" at a clean end)
};

// Walks the top-level boxes of `path`: ftyp, moov, then moof+mdat pairs (one fragment
// each) and optional free/sidx/mfra boxes. A fragment counts when both its boxes are in
// the file whole. With `max_frames`, the scan stops before a fragment that would pass it
// (whole_bytes is then where the first max_frames frames end).
Fmp4Extent scan_fmp4(const std::string& path, int64_t max_frames = INT64_MAX);

}  // namespace tensorscope::plotting
