// video_index.h — the session's index.json: what each listed output file is.
//
// index.json lists every finished output file of a session with its stream, kind,
// device, rank, mode, frame count and first/last step:
//   {"files": [{"path": ..., "stream": ..., "kind": ..., "device": ..., "rank": ...,
//               "pid": ..., "mode": ..., "frames": ..., "first_step": ...,
//               "last_step": ...}, ...]}
// ("pid": the training process that sent the frames; 0 in indexes written before it
// was recorded), sorted by path. The daemon writes it (daemon/src/supervisor/
// index_writer.h, atomically); the live view and the tools read it.
// Thread safety: plain values and pure functions (read_index reads one file).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tensorscope/base/status.h"

namespace tensorscope::recording {

inline constexpr char kIndexFileName[] = "index.json";

struct IndexEntry {
  std::string path;    // relative to the session dir, e.g. "conv1__cpu__rank0__histogram__0000.mp4"
  std::string stream;  // the stream name as the client gave it
  std::string device;  // "cpu", "cuda0", ...
  std::string kind;    // what the file holds, e.g. "video"
  std::string mode;    // render mode, e.g. "histogram"
  int rank = 0;
  int64_t pid = 0;         // the producer's process id (0: unknown)
  int64_t frames = 0;      // >= 0
  int64_t first_step = 0;  // training step of the first frame
  int64_t last_step = 0;   // training step of the last frame
  bool operator==(const IndexEntry&) const = default;
};

// Checks that `path` is a safe relative path inside the session dir: non-empty, not
// absolute, no "", "." or ".." component, no NUL or backslash.
Status validate_index_path(const std::string& path);

// JSON object with exactly the keys listed above. Does not throw.
nlohmann::json to_json(const IndexEntry& entry);

// Validates an entry received from a worker or read from disk: an object holding every
// key with the right type (strings; rank an int; frames an integer >= 0; steps int64;
// pid an integer >= 0, optional), a safe path (validate_index_path). Keys it does not
// know are ignored. Never throws.
StatusOr<IndexEntry> index_entry_from_json(const nlohmann::json& json);

// The entries of an index document (in the file's order). Errors: "not valid JSON",
// "expected an object with a \"files\" array", "files[3]: index entry: ...". Never throws.
StatusOr<std::vector<IndexEntry>> parse_index(const std::string& text);

// index.json's largest accepted size (a very long run with many streams stays far below).
inline constexpr size_t kMaxIndexBytes = size_t{256} << 20;

// The entries of <session_dir>/index.json; none when it does not exist. `missing`, when
// given, tells whether it existed. Errors name the file.
StatusOr<std::vector<IndexEntry>> read_index(const std::string& session_dir, bool* missing = nullptr);

}  // namespace tensorscope::recording
