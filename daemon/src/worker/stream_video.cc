#include "worker/stream_video.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "tensorscope/recording/file_naming.h"
#include "tensorscope/base/clock.h"
#include "worker/record_frame.h"
#include "tensorscope/base/logging.h"

namespace tensorscope::daemon {
namespace {

constexpr int kMaxSegment = 1 << 30;

}  // namespace

StreamVideo::StreamVideo(StreamKey key, std::string kind, std::unique_ptr<FrameRenderer> renderer,
                         const DaemonConfig& config, std::string session_dir, FileFinished on_finished, size_t lane,
                         OpenVideoLimit* open_limit, OutputHealth* health, LivePublisher* live)
    : key_(std::move(key)),
      kind_(std::move(kind)),
      config_(config),
      style_(frame_style(config)),
      session_dir_(std::move(session_dir)),
      on_finished_(std::move(on_finished)),
      lane_(lane),
      open_limit_(open_limit),
      health_(health),
      live_(live),
      renderer_(std::move(renderer)) {}

StreamVideo::~StreamVideo() {
  if (open_limit_ != nullptr) open_limit_->forget(this);
  journal_.remove();  // a video never finished is abandoned with its journal (no-op after finish)
}

IndexEntry StreamVideo::entry_meta() const {
  IndexEntry entry;
  entry.stream = key_.stream;
  entry.kind = kind_;
  entry.device = key_.device;
  entry.rank = key_.rank;
  entry.pid = key_.producer_pid;
  entry.mode = key_.mode;
  return entry;
}

RenderJob StreamVideo::prepare(const RecordView& record) {
  last_step_seen_.store(record.header.step, std::memory_order_relaxed);
  return frame_job(renderer_->prepare(record, frame_info(record.header)), record.header.step,
                   record.header.timestamp_unix_ns);
}

RenderJob StreamVideo::frame_job(DrawFrame draw, int64_t step, uint64_t push_unix_ns) {
  last_step_seen_.store(step, std::memory_order_relaxed);
  return {lane_,
          [self = shared_from_this(), draw = std::move(draw), step, push_unix_ns] {
            self->render(draw, step, push_unix_ns);
          },
          /*frame=*/true};
}

bool StreamVideo::open_segment(std::string* error, int* err) {
  // A process that registers again (after a daemon restart or a fork) comes back with
  // the same pid: its segment numbers go on after the files it already has.
  for (;;) {
    final_name_ =
        recording::video_file_name(key_.stream, key_.device, key_.rank, key_.producer_pid, key_.mode, segment_);
    struct stat st;
    if (segment_ >= kMaxSegment || ::stat((session_dir_ + "/" + final_name_).c_str(), &st) != 0) break;
    ++segment_;
  }
  const std::string temp = recording::temp_video_file_name(final_name_, static_cast<int>(::getpid()), key_.producer_id);
  writer_ = std::make_unique<plotting::VideoWriter>();
  if (Status s = writer_->open(session_dir_ + "/" + final_name_, session_dir_ + "/" + temp, config_.video.width,
                               config_.video.height, config_.video.fps, std::string(choice_name(config_.video.codec)));
      !s) {
    *error = s.message();
    *err = writer_->last_errno();
    writer_.reset();
    return false;
  }
  // Without its journal a video still plays, but a killed worker's cut copy cannot be listed.
  if (Status s = journal_.create(session_dir_ + "/" + temp, entry_meta()); !s && !journal_failed_logged_) {
    TS_LOG_ERROR("video of '{}': {}", key_.stream, s.message());
    journal_failed_logged_ = true;
  }
  return true;
}

plotting::FrameStyle frame_style(const DaemonConfig& config) {
  auto color = [](const Rgb& c) { return cv::Scalar(c.b, c.g, c.r); };  // OpenCV's BGR
  plotting::FrameStyle style;
  style.width = config.video.width;
  style.height = config.video.height;
  style.background = color(config.style.background);
  style.foreground = color(config.style.foreground);
  style.bar = color(config.style.bar);
  style.grid = color(config.style.grid);
  style.accent = color(config.style.accent);
  return style;
}

void StreamVideo::output_failed(int err, const std::string& what) {
  if (err != 0 && health_ != nullptr) {
    health_->failed(err, what, steady_time_ms());
    return;
  }
  throw std::runtime_error(what);
}

void StreamVideo::record_separation(int64_t step, const FrameNotes& notes) {
  if (separation_failed_) return;
  if (!separation_) {
    auto opened = recording::SeparationTableWriter::open(
        session_dir_ + "/" +
        recording::separation_table_path(key_.stream, key_.device, key_.rank, key_.producer_pid, key_.mode));
    if (!opened) {
      TS_LOG_ERROR("separation table of '{}': {}", key_.stream, opened.message());
      separation_failed_ = true;
      return;
    }
    separation_.emplace(std::move(*opened));
  }
  const recording::SeparationRow row{step,      key_.stream,   key_.device,  key_.rank,       key_.producer_pid,
                                     key_.mode, notes.classes, notes.points, notes.silhouette};
  if (Status s = separation_->append(row); !s) {
    TS_LOG_ERROR("separation table of '{}': {}", key_.stream, s.message());
    separation_failed_ = true;
  }
}

void StreamVideo::render(const DrawFrame& draw, int64_t step, uint64_t push_unix_ns) {
  if (health_ != nullptr && !health_->may_try(steady_time_ms())) {
    health_->skipped(steady_time_ms());  // the output is full or unwritable: tried again soon
    return;
  }
  if (!writer_) {
    std::string error;
    int err = 0;
    if (!open_segment(&error, &err)) {
      if (err == 0 && !open_failed_logged_) TS_LOG_ERROR("cannot open video for '{}': {}", key_.stream, error);
      open_failed_logged_ = true;
      return output_failed(err, "video open failed: " + error);
    }
    first_step_ = step;
  }
  FrameNotes notes;
  const cv::Mat image = draw(style_, &notes);
  if (live_ != nullptr) {
    live_->offer(key_, kind_, step, push_unix_ns, frames_total() + 1, image, notes.legend, &live_last_ns_);
  }
  if (notes.classes_shown) record_separation(step, notes);
  if (!writer_->write(image)) {
    return output_failed(writer_->last_errno(),
                         "video write failed for '" + key_.stream + "': " + writer_->last_error());
  }
  if (health_ != nullptr) health_->succeeded(steady_time_ms());
  if (Status s = journal_.append(step); !s && !journal_failed_logged_) {
    TS_LOG_ERROR("video of '{}': {}", key_.stream, s.message());
    journal_failed_logged_ = true;
  }
  last_step_ = step;
  frames_total_.fetch_add(1, std::memory_order_relaxed);
  if (writer_->frames() >= config_.video.max_frames) {
    finish();
  } else if (open_limit_ != nullptr) {
    open_limit_->touch(this);
  }
}

void StreamVideo::suspend() {
  if (open_limit_ != nullptr) open_limit_->forget(this);
  if (writer_) writer_->suspend();
  journal_.close();
}

void StreamVideo::finish() {
  if (open_limit_ != nullptr) open_limit_->forget(this);
  if (!writer_) return;
  const int64_t frames = writer_->frames();
  if (frames == 0) {
    writer_->abandon();
    writer_.reset();
    journal_.remove();
    return;
  }
  StatusOr<std::string> finalized = writer_->finalize();
  if (!finalized.is_ok()) {
    const std::string& error = finalized.message();
    // Its frames stay whole under the temporary name, with the journal: never listed
    // by this worker, recovered when the worker or the daemon starts again.
    const int err = writer_->last_errno();
    writer_.reset();
    journal_.close();
    journal_.forget();
    ++segment_;
    if (err != 0 && health_ != nullptr) {
      health_->failed(err, "cannot finalize the video of '" + key_.stream + "': " + error, steady_time_ms());
    } else {
      TS_LOG_ERROR("cannot finalize video for '{}': {}", key_.stream, error);
    }
    return;
  }
  const std::string final_path = std::move(finalized).value();
  writer_.reset();
  ++segment_;
  if (Status s = journal_.keep(session_dir_, final_path); !s) {
    TS_LOG_ERROR("video of '{}': {}", key_.stream, s.message());
    journal_.remove();
  }
  IndexEntry entry = entry_meta();
  const size_t slash = final_path.find_last_of('/');
  entry.path = slash == std::string::npos ? final_path : final_path.substr(slash + 1);
  entry.frames = frames;
  entry.first_step = first_step_;
  entry.last_step = last_step_;
  on_finished_(entry);
}

}  // namespace tensorscope::daemon
