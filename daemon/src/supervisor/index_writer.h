// index_writer.h — IndexWriter: the supervisor's writer of the session's index.json
// (format and IndexEntry: tensorscope/recording/video_index.h).
//
// index.json is sorted by path. It is always replaced atomically (write index.json.tmp, fsync,
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
#include "tensorscope/recording/video_index.h"

namespace tensorscope::daemon {

// The entry and its JSON form live with the other output formats.
using recording::index_entry_from_json;
using recording::IndexEntry;
using recording::kIndexFileName;
using recording::to_json;
using recording::validate_index_path;

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
  // Drops the entry of `path` in memory (a later write() publishes it); false when none.
  bool remove(const std::string& path) { return entries_.erase(path) > 0; }

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
