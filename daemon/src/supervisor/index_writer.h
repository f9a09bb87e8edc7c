// index_writer.h — IndexEntry and IndexWriter: the session's index.json.
//
// index.json lists every finished output file of a session with its stream, kind,
// device, rank, mode, frame count and first/last step:
//   {"files": [{"path": ..., "stream": ..., "kind": ..., "device": ..., "rank": ...,
//               "pid": ..., "mode": ..., "frames": ..., "first_step": ...,
//               "last_step": ...}, ...]}
// ("pid": the training process that sent the frames; 0 in indexes written before it
// was recorded).
// sorted by path. It is always replaced atomically (write index.json.tmp, fsync,
// rename), so a reader never sees a partial file.
// Used by the daemon: workers send IndexEntry values to the supervisor as JSON
// (to_json / index_entry_from_json); only the supervisor owns an IndexWriter.
// Thread safety: IndexEntry and the free functions are plain values / pure functions.
// IndexWriter is single-threaded: one instance, one thread, one process per session dir.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tensorscope/base/status.h"

namespace tensorscope::daemon {

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
// pid an integer >= 0, optional),
// a safe path (validate_index_path). Keys it does not know are ignored. Never throws.
StatusOr<IndexEntry> index_entry_from_json(const nlohmann::json& json);

class IndexWriter {
 public:
  // `session_dir` must exist before write() is called; IndexWriter does not create it.
  explicit IndexWriter(std::string session_dir);

  // Replaces the entries in memory with those of an existing <session_dir>/index.json.
  // A missing file is fine (no entries). A corrupt one (not JSON, wrong shape, a bad
  // entry) is renamed to index.json.corrupt-<n> (smallest free n >= 1) with a warning in
  // the log, and we start empty. Errors: the file exists but cannot be read, or the
  // corrupt file cannot be renamed.
  Status load();

  // Adds `entry`, or replaces the entry with the same path, then rewrites the file.
  // An invalid entry (see index_entry_from_json) is refused and nothing changes. If the
  // rewrite fails the entry stays in memory (the next write includes it) and the error
  // is returned.
  Status add(const IndexEntry& entry);
  // Adds or replaces `entry` in memory only; a later write() publishes it. For callers
  // that receive many entries at once and rewrite once.
  Status stage(const IndexEntry& entry);

  // Atomically rewrites <session_dir>/index.json from the entries in memory.
  Status write();
  // The errno of write()'s last failure (0 after a success).
  int last_errno() const { return last_errno_; }
  // Drops the entries whose file is gone (the output directory was deleted); how many.
  size_t forget_missing_files();

  // Entries sorted by path.
  std::vector<IndexEntry> entries() const;
  std::string index_path() const;
  // The file name the last load() moved a corrupt index to ("" if none).
  const std::string& last_corrupt_path() const { return last_corrupt_path_; }

 private:
  std::string session_dir_;
  std::map<std::string, IndexEntry> entries_;  // by path, hence sorted
  int last_errno_ = 0;
  std::string last_corrupt_path_;
};

}  // namespace tensorscope::daemon
