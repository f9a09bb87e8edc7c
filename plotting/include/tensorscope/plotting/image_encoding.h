// image_encoding.h — a frame as PNG or JPEG bytes, with libpng and libjpeg(-turbo).
//
// Used by the daemon's workers: the overview's whole-run PNGs (overview_videos.cc) and the
// live page's JPEG frames (live_publisher.cc). The daemon draws with OpenCV's core and
// imgproc only and encodes here, so what it links stays small (no OpenCV codec module and
// the image libraries it pulls in): python/README.md, "Requirements". Never throws: a
// library error (a frame too large, out of memory) comes back as a Status.
// Thread safety: pure functions; any number of threads may encode at once.
#pragma once

#include <string>

#include <opencv2/core.hpp>

#include "tensorscope/base/status.h"

namespace tensorscope::plotting {

// 8-bit frames of 1 (grey), 3 (BGR) or 4 (BGRA) channels, any row stride; anything else
// (another depth, an empty frame) is an error.
StatusOr<std::string> encode_png(const cv::Mat& frame);

// `quality` 1..100 (clamped), as libjpeg's quality scale. 4 channels: the alpha is dropped.
StatusOr<std::string> encode_jpeg(const cv::Mat& frame, int quality);

}  // namespace tensorscope::plotting
