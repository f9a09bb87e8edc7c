// video_frames.h — how many frames a finished video really holds, counted by decoding it
// with OpenCV (its FFmpeg backend), as a player would.
//
// Used only by the integration tests; apart from daemon_process.h so that the CUDA tests,
// which share that harness, build without OpenCV.
#pragma once

#include <cstdint>
#include <string>

namespace tensorscope::itest {

// Number of frames cv::VideoCapture decodes from `path` (every frame read); -1 when it
// cannot be opened.
int64_t count_decodable_frames(const std::string& path);

}  // namespace tensorscope::itest
