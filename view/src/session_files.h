// session_files.h — what the view finds in a session directory: the finished videos
// (index.json) and the step of each of their frames (steps/<video>.steps).
//
// Used by the view server on its network thread only. index.json is read again when it
// changes (size or modification time); steps files are read when first needed and kept
// (at most kMaxCachedSteps files). Thread safety: none; one thread.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tensorscope/recording/video_index.h"

namespace tensorscope::view {

// A frame of a finished video: the page seeks `path` to frame `frame` of `frames`.
struct VideoFrameRef {
  std::string path;  // relative to the session dir, listed in index.json
  int64_t frame = 0;
  int64_t frames = 0;
  int64_t step = 0;
};

class SessionFiles {
 public:
  explicit SessionFiles(std::string session_dir);

  // Reads index.json again when it changed; returns true when the list changed.
  bool refresh();
  const std::vector<recording::IndexEntry>& entries() const { return entries_; }
  const std::string& dir() const { return dir_; }
  const std::string& last_error() const { return last_error_; }

  // The finished frame of (stream, device, rank, mode) with the largest step <= `step`.
  std::optional<VideoFrameRef> frame_at(const std::string& stream, const std::string& device, int rank,
                                        const std::string& mode, int64_t step);
  // True when `path` is listed in index.json (only such files are served).
  bool listed(const std::string& path) const;

  static constexpr size_t kMaxCachedSteps = 512;

 private:
  const std::vector<int64_t>* steps_of(const recording::IndexEntry& entry);

  std::string dir_;
  int64_t index_size_ = -1;
  int64_t index_mtime_ns_ = -1;
  std::vector<recording::IndexEntry> entries_;
  std::map<std::string, size_t> by_path_;
  std::string last_error_;
  std::map<std::string, std::vector<int64_t>> steps_;  // by video path
  std::list<std::string> steps_order_;                 // oldest first
};

}  // namespace tensorscope::view
