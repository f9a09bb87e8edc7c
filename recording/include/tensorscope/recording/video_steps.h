// video_steps.h — a video's steps file: the training step of every frame, beside what
// index.json needs to list the video (stream, kind, device, rank, pid, mode).
//
// The worker appends a line per frame while it writes the video (the daemon's
// VideoJournal); once the video is finalized the file stays at
// <session>/steps/<video name>.steps, so a frame maps to its exact step even when frames
// were gated or dropped. The live view reads it to show a finished video's frame at a
// step; the daemon reads it to list a video again after a crash.
// Format (text):
//   tensorscope video steps 1
//   {"stream": ..., "kind": ..., "device": ..., "rank": ..., "pid": ..., "mode": ...}
//   <step of frame 0>
//   <step of frame 1>
//   ...
// A last line without its newline (cut by a crash) is ignored.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorscope/base/status.h"
#include "tensorscope/recording/video_index.h"

namespace tensorscope::recording {

inline constexpr char kStepsMagic[] = "tensorscope video steps 1";
inline constexpr char kStepsSuffix[] = ".steps";
inline constexpr char kStepsDirName[] = "steps";

// Where the steps of finished video `video_name` (a file name) are kept.
std::string kept_steps_path(const std::string& session_dir, const std::string& video_name);

struct VideoSteps {
  IndexEntry meta;             // stream, kind, device, rank, pid, mode; path empty; frames,
                               // first_step, last_step from the steps read
  std::vector<int64_t> steps;  // one per frame
};

// Reads a steps file, at most `max_frames` steps. Errors name the file and the line.
StatusOr<VideoSteps> read_video_steps(const std::string& path, int64_t max_frames = INT64_MAX);

}  // namespace tensorscope::recording
