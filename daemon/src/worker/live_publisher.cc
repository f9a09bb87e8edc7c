#include "worker/live_publisher.h"

#include "tensorscope/base/clock.h"

#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include <opencv2/imgproc.hpp>

#include "tensorscope/base/logging.h"
#include "tensorscope/plotting/image_encoding.h"
#include "tensorscope/shared/runtime_paths.h"
#include "worker/stream_video.h"

namespace tensorscope::daemon {
uint64_t live_board_capacity(int board_mb, uint64_t free_bytes) {
  const uint64_t wanted = static_cast<uint64_t>(board_mb) << 20;
  const uint64_t capacity = std::min(wanted, free_bytes / 16) & ~uint64_t{7};
  return capacity < view::kMinBoardCapacity ? 0 : capacity;
}

std::unique_ptr<LivePublisher> LivePublisher::create(const DaemonConfig& config, int worker_index) {
  if (config.live.max_fps <= 0) return nullptr;
  BoardPlace place;
  place.dir = default_runtime_dir(config.runtime_dir);
  place.path = place.dir + "/" + view::live_board_file_name(config.session, worker_index);
  place.board_mb = config.live.board_mb;
  place.worker_index = worker_index;
  const std::string watch = place.dir + "/" + view::live_watch_file_name(config.session);
  return std::unique_ptr<LivePublisher>(new LivePublisher(std::move(place), watch,
                                                          static_cast<int64_t>(1e9 / config.live.max_fps),
                                                          config.live.jpeg_quality, config.live.width));
}

LivePublisher::LivePublisher(BoardPlace place, std::string watch_path, int64_t interval_ns, int quality, int width)
    : place_(std::move(place)),
      watch_path_(std::move(watch_path)),
      interval_ns_(interval_ns),
      quality_(quality),
      width_(width) {
  encoder_ = std::thread([this] { encode_loop(); });
}

view::LiveBoardWriter* LivePublisher::board() {
  constexpr int64_t kRetryNs = 30'000'000'000;
  if (board_ != nullptr) return board_.get();
  const int64_t now = steady_time_ns();
  if (board_tried_ns_ != 0 && now - board_tried_ns_ < kRetryNs) return nullptr;
  board_tried_ns_ = now;
  struct statvfs fs {};
  const uint64_t free_bytes =
      ::statvfs(place_.dir.c_str(), &fs) == 0 ? static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize : 0;
  const uint64_t capacity = live_board_capacity(place_.board_mb, free_bytes);
  if (capacity == 0) {
    TS_LOG_WARN("no live view from this worker for now: {} has {} bytes free, kept for the training's segments",
                place_.dir, free_bytes);
    return nullptr;
  }
  auto made = view::LiveBoardWriter::create(place_.path, capacity, place_.worker_index);
  if (!made) {
    TS_LOG_ERROR("no live view from this worker for now: {}", made.message());
    return nullptr;
  }
  board_ = std::move(*made);
  return board_.get();
}

bool LivePublisher::has_board() const {
  std::lock_guard<std::mutex> lock(mu_);
  return board_made_;
}

bool LivePublisher::watched() {
  const int64_t now = steady_time_ns();
  int64_t checked = watch_checked_ns_.load(std::memory_order_relaxed);
  // One thread of those that find the check due looks at the file; the others go on
  // with the last answer.
  if ((checked == 0 || now - checked >= 1'000'000'000) &&
      watch_checked_ns_.compare_exchange_strong(checked, now, std::memory_order_relaxed)) {
    watched_.store(view::watch_file_fresh(watch_path_), std::memory_order_relaxed);
  }
  return watched_.load(std::memory_order_relaxed);
}

LivePublisher::~LivePublisher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  encoder_.join();
  if (board_ != nullptr) board_->remove();
}

void LivePublisher::offer(const StreamKey& key, const std::string& kind, int64_t step, uint64_t push_unix_ns,
                          uint64_t frames_total, const cv::Mat& frame, const std::string& legend, int64_t* last_ns) {
  const int64_t now = steady_time_ns();
  if (*last_ns != 0 && now - *last_ns < interval_ns_) return;
  if (!watched()) return;
  PendingKey pk{key.producer_id, key.stream, key.device, key.rank, key.mode};
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(pk);
    if (it == pending_.end() && pending_.size() >= kMaxPending) {
      ++skipped_;  // the encoder is behind (a busy machine): this stream tries again next frame
      return;
    }
    *last_ns = now;
    if (it != pending_.end()) {
      ++skipped_;  // its older frame was never encoded: the newer one replaces it
    } else {
      it = pending_.emplace(pk, Pending{}).first;
      it->second.order = ++order_;
    }
    Pending& p = it->second;
    p.meta.stream = key.stream;
    p.meta.kind = kind;
    p.meta.device = key.device;
    p.meta.mode = key.mode;
    p.meta.rank = key.rank;
    p.meta.producer_pid = key.producer_pid;
    p.meta.step = step;
    p.meta.push_unix_ns = push_unix_ns;
    p.meta.frames_total = frames_total;
    p.meta.legend = legend;
    frame.copyTo(p.frame);
  }
  wake_.notify_one();
}

void LivePublisher::encode_loop() {
  // The lowest priority this thread can take: rendering comes first.
  (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 19);
  std::string jpeg;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
    if (stopping_) return;
    auto oldest = std::min_element(pending_.begin(), pending_.end(),
                                   [](const auto& a, const auto& b) { return a.second.order < b.second.order; });
    Pending p = std::move(oldest->second);
    pending_.erase(oldest);
    encoding_ = true;
    lock.unlock();
    bool ok = false;
    try {
      if (width_ > 0 && p.frame.cols > width_) {
        cv::Mat scaled;
        const int height = std::max(1, p.frame.rows * width_ / p.frame.cols);
        cv::resize(p.frame, scaled, cv::Size(width_, height), 0, 0, cv::INTER_AREA);
        p.frame = scaled;
      }
      StatusOr<std::string> encoded = plotting::encode_jpeg(p.frame, quality_);
      ok = encoded.is_ok();
      if (ok) {
        jpeg = std::move(*encoded);
      } else {
        TS_LOG_WARN("live view: cannot encode a frame of '{}': {}", p.meta.stream, encoded.message());
      }
    } catch (const cv::Exception& e) {
      TS_LOG_WARN("live view: cannot scale a frame of '{}': {}", p.meta.stream, e.what());
    }
    view::LiveBoardWriter* writer = ok ? board() : nullptr;
    if (writer != nullptr) {
      p.meta.width = p.frame.cols;
      p.meta.height = p.frame.rows;
      ok = writer->append(p.meta, jpeg);
    } else {
      ok = false;
    }
    lock.lock();
    board_made_ = board_ != nullptr;
    encoding_ = false;
    ++(ok ? published_ : failed_);
    if (pending_.empty()) idle_.notify_all();
  }
}

void LivePublisher::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return pending_.empty() && !encoding_; });
}

uint64_t LivePublisher::published() const {
  std::lock_guard<std::mutex> lock(mu_);
  return published_;
}

uint64_t LivePublisher::skipped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return skipped_;
}

}  // namespace tensorscope::daemon
