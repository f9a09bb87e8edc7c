#include "video_frames.h"

#include <opencv2/core.hpp>
#include <opencv2/videoio.hpp>

namespace tensorscope::itest {

int64_t count_decodable_frames(const std::string& path) {
  cv::VideoCapture capture(path, cv::CAP_FFMPEG);
  if (!capture.isOpened()) return -1;
  int64_t frames = 0;
  cv::Mat frame;
  while (capture.read(frame)) {
    if (frame.empty()) break;
    ++frames;
  }
  return frames;
}

}  // namespace tensorscope::itest
