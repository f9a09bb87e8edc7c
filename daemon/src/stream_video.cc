#include "stream_video.h"

#include <unistd.h>

#include "file_naming.h"
#include "record_frame.h"
#include "tensorscope/plotting/frame_painter.h"
#include "tensorscope/shared/logging.h"

namespace tensorscope::daemon {

struct StreamVideo::Frame {
  plotting::FrameInfo info;
  plotting::TensorStats stats;
  plotting::Histogram histogram;
  std::string message;  // non-empty: draw a message frame instead of a plot
};

StreamVideo::StreamVideo(StreamKey key, std::string kind, const DaemonConfig& config,
                         std::string session_dir, FileFinished on_finished,
                         OpenVideoLimit* open_limit)
    : key_(std::move(key)),
      kind_(std::move(kind)),
      config_(config),
      session_dir_(std::move(session_dir)),
      on_finished_(std::move(on_finished)),
      open_limit_(open_limit) {}

StreamVideo::~StreamVideo() {
  if (open_limit_ != nullptr) open_limit_->forget(this);
}

std::function<void()> StreamVideo::prepare(const RecordView& record) {
  auto frame = std::make_shared<Frame>();
  frame->info = frame_info(record.header);
  last_step_seen_.store(record.header.step, std::memory_order_relaxed);
  const plotting::TensorView view = tensor_view(record);
  if (view.numel() == 0) {
    frame->message = "empty tensor: nothing to plot";
  } else {
    const plotting::HistogramRange* fixed = range_ ? &*range_ : nullptr;
    plotting::summarize(view, fixed, config_.render.histogram_bins, config_.render.histogram_margin,
                        &frame->stats, &frame->histogram);
    // Bins are fixed from the first frame that has a spread of finite values (a constant
    // first frame, e.g. a zero-initialized bias, would give a uselessly narrow range).
    if (!range_ && frame->stats.finite_count > 0 && frame->stats.min < frame->stats.max) {
      range_ = frame->histogram.range;
    }
  }
  return [self = shared_from_this(), frame] { self->render(*frame); };
}

bool StreamVideo::open_segment(std::string* error) {
  final_name_ = video_file_name(key_.stream, key_.device, key_.rank, key_.mode, segment_);
  const std::string temp = temp_video_file_name(final_name_, static_cast<int>(::getpid()));
  writer_ = std::make_unique<plotting::VideoWriter>();
  if (!writer_->open(session_dir_ + "/" + final_name_, session_dir_ + "/" + temp,
                     config_.video.width, config_.video.height, config_.video.fps,
                     config_.video.codec, error)) {
    writer_.reset();
    return false;
  }
  return true;
}

void StreamVideo::render(const Frame& frame) {
  if (!writer_) {
    std::string error;
    if (!open_segment(&error)) {
      if (!open_failed_logged_) TS_LOG_ERROR("cannot open video for '{}': {}", key_.stream, error);
      open_failed_logged_ = true;
      throw std::runtime_error("video open failed: " + error);
    }
    first_step_ = frame.info.step;
  }
  plotting::FrameStyle style;
  style.width = config_.video.width;
  style.height = config_.video.height;
  const cv::Mat image = frame.message.empty()
                            ? plotting::draw_histogram_frame(frame.info, frame.stats,
                                                             frame.histogram, style)
                            : plotting::draw_message_frame(frame.info, frame.message, style);
  if (!writer_->write(image)) throw std::runtime_error("video write failed for " + key_.stream);
  last_step_ = frame.info.step;
  frames_total_.fetch_add(1, std::memory_order_relaxed);
  if (writer_->frames() >= config_.video.max_frames) {
    finish();
  } else if (open_limit_ != nullptr) {
    open_limit_->touch(this);
  }
}

void StreamVideo::finish() {
  if (open_limit_ != nullptr) open_limit_->forget(this);
  if (!writer_) return;
  const int64_t frames = writer_->frames();
  std::string final_path, error;
  if (frames == 0) {
    writer_->abandon();
    writer_.reset();
    return;
  }
  if (!writer_->finalize(&final_path, &error)) {
    TS_LOG_ERROR("cannot finalize video for '{}': {}", key_.stream, error);
    writer_.reset();
    ++segment_;
    return;
  }
  writer_.reset();
  ++segment_;
  IndexEntry entry;
  const size_t slash = final_path.find_last_of('/');
  entry.path = slash == std::string::npos ? final_path : final_path.substr(slash + 1);
  entry.stream = key_.stream;
  entry.kind = kind_;
  entry.device = key_.device;
  entry.rank = key_.rank;
  entry.mode = key_.mode;
  entry.frames = frames;
  entry.first_step = first_step_;
  entry.last_step = last_step_;
  on_finished_(entry);
}

}  // namespace tensorscope::daemon
