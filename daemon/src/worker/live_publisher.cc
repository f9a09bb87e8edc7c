#include "worker/live_publisher.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>

#include <opencv2/imgcodecs.hpp>

#include "tensorscope/base/logging.h"
#include "tensorscope/shared/runtime_paths.h"
#include "worker/stream_video.h"

namespace tensorscope::daemon {
namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

uint64_t live_board_capacity(int board_mb, uint64_t free_bytes) {
  const uint64_t wanted = static_cast<uint64_t>(board_mb) << 20;
  const uint64_t capacity = std::min(wanted, free_bytes / 16) & ~uint64_t{7};
  return capacity < view::kMinBoardCapacity ? 0 : capacity;
}

std::unique_ptr<LivePublisher> LivePublisher::create(const DaemonConfig& config, int worker_index) {
  if (config.live.max_fps <= 0) return nullptr;
  const std::string dir = default_runtime_dir(config.runtime_dir);
  struct statvfs fs{};
  const uint64_t free_bytes =
      ::statvfs(dir.c_str(), &fs) == 0 ? static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize : 0;
  const uint64_t capacity = live_board_capacity(config.live.board_mb, free_bytes);
  if (capacity == 0) {
    TS_LOG_WARN("no live view from this worker: {} has {} bytes free, kept for the training's segments", dir,
                free_bytes);
    return nullptr;
  }
  const std::string path = dir + "/" + view::live_board_file_name(config.session, worker_index);
  auto board = view::LiveBoardWriter::create(path, capacity, worker_index);
  if (!board) {
    TS_LOG_ERROR("no live view from this worker: {}", board.message());
    return nullptr;
  }
  return std::unique_ptr<LivePublisher>(new LivePublisher(
      std::move(*board), static_cast<int64_t>(1e9 / config.live.max_fps), config.live.jpeg_quality));
}

LivePublisher::LivePublisher(std::unique_ptr<view::LiveBoardWriter> board, int64_t interval_ns, int quality)
    : board_(std::move(board)), interval_ns_(interval_ns), params_{cv::IMWRITE_JPEG_QUALITY, quality} {}

LivePublisher::~LivePublisher() { board_->remove(); }

void LivePublisher::offer(const StreamKey& key, const std::string& kind, int64_t step, uint64_t push_unix_ns,
                          uint64_t frames_total, const cv::Mat& frame, int64_t* last_ns) {
  const int64_t now = steady_ns();
  if (*last_ns != 0 && now - *last_ns < interval_ns_) return;
  *last_ns = now;
  try {
    if (!cv::imencode(".jpg", frame, jpeg_, params_)) {
      ++failed_;
      return;
    }
  } catch (const cv::Exception& e) {
    if (failed_++ == 0) TS_LOG_WARN("live view: cannot encode a frame of '{}': {}", key.stream, e.what());
    return;
  }
  view::FrameMeta meta;
  meta.stream = key.stream;
  meta.kind = kind;
  meta.device = key.device;
  meta.mode = key.mode;
  meta.rank = key.rank;
  meta.producer_pid = key.producer_pid;
  meta.step = step;
  meta.push_unix_ns = push_unix_ns;
  meta.frames_total = frames_total;
  meta.width = frame.cols;
  meta.height = frame.rows;
  if (board_->append(meta, std::string_view(reinterpret_cast<const char*>(jpeg_.data()), jpeg_.size()))) {
    ++published_;
  } else {
    ++failed_;
  }
}

}  // namespace tensorscope::daemon
