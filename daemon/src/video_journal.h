// video_journal.h — a video's sidecar: what index.json needs to list it (stream, kind,
// device, rank, pid, mode) and the training step of every frame, appended as the frames
// are written.
//
// While a video is written the journal sits beside its temporary file
// ("<temp>.steps"); when the video is finalized it moves to
// <session>/steps/<video name>.steps and stays: the exact step of every frame, even when
// frames were gated or dropped, and what a restarted daemon needs to list the video
// again (rebuild_index). When a worker is killed, recover_cut_video turns its temporary
// video into a finished one: the file is cut back to its last whole frame, renamed to its
// final name and listed with its real frame count.
//
// Format: tensorscope/recording/video_steps.h (the live view reads the kept files).
//
// Used by the worker (StreamVideo, render thread) and the supervisor (recovery, at
// start and when a worker dies). Thread safety: a VideoJournal is used by one thread;
// the free functions are independent.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "supervisor/index_writer.h"
#include "tensorscope/base/status.h"
#include "tensorscope/recording/video_steps.h"

namespace tensorscope::daemon {

inline constexpr const char* kJournalSuffix = recording::kStepsSuffix;
using recording::kStepsDirName;

class VideoJournal {
 public:
  VideoJournal() = default;
  ~VideoJournal() { close(); }
  VideoJournal(const VideoJournal&) = delete;
  VideoJournal& operator=(const VideoJournal&) = delete;

  // Starts the journal of the video at `video_path` (its temporary name): `meta`'s
  // stream, kind, device, rank, pid and mode.
  Status create(const std::string& video_path, const IndexEntry& meta);
  // Appends the step of the frame just written (reopening a closed journal).
  Status append(int64_t step);
  // Releases the descriptor (a suspended video); append() reopens it.
  void close();
  // After the video was finalized as `final_path`: moves the journal to
  // <session_dir>/steps/<final name>.steps.
  Status keep(const std::string& session_dir, const std::string& final_path);
  // Deletes the journal (an abandoned video).
  void remove();
  // Leaves the journal where it is (its video was kept under its temporary name).
  void forget() {
    close();
    path_.clear();
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

// Where the journal of finished video `video_name` (a file name) is kept.
inline std::string kept_journal_path(const std::string& session_dir, const std::string& video_name) {
  return recording::kept_steps_path(session_dir, video_name);
}

// The entry a journal describes: frames = the steps listed (at most `max_frames`),
// first/last step from them; `path` is left empty.
StatusOr<IndexEntry> read_video_journal(const std::string& journal_path, int64_t max_frames = INT64_MAX);

// The final name a temporary video name stands for (".tmp-<worker>-<producer>-<final>"),
// or "" when `temp_name` is not one.
std::string final_name_of_temp(const std::string& temp_name);

// A temporary video left by a worker that died: cut back to its last whole frame, renamed
// to its final name (never replacing a file), its journal kept; the entry to list.
// Errors (no journal, no whole frame, a rename failure) leave both files deleted.
StatusOr<IndexEntry> recover_cut_video(const std::string& session_dir, const std::string& temp_name);

}  // namespace tensorscope::daemon
