// video_writer.cc — Fmp4Encoder behind a temp name: codec choice, suspend/resume, no-replace rename.
#include "tensorscope/plotting/video_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <utility>

#include <opencv2/imgproc.hpp>

#include "fmp4_encoder.h"
#include "tensorscope/base/posix_file.h"

namespace tensorscope::plotting {

VideoWriter::VideoWriter() = default;

VideoWriter::~VideoWriter() { abandon(); }

VideoWriter::VideoWriter(VideoWriter&& other) noexcept { *this = std::move(other); }

VideoWriter& VideoWriter::operator=(VideoWriter&& other) noexcept {
  if (this != &other) {
    abandon();
    encoder_ = std::move(other.encoder_);
    fd_ = std::exchange(other.fd_, -1);
    open_ = std::exchange(other.open_, false);
    header_ = std::move(other.header_);
    final_path_ = std::move(other.final_path_);
    temp_path_ = std::exchange(other.temp_path_, std::string());
    codec_ = std::exchange(other.codec_, std::string());
    fps_ = other.fps_;
    size_ = other.size_;
    frames_ = std::exchange(other.frames_, 0);
    last_error_ = std::move(other.last_error_);
  }
  return *this;
}

bool VideoWriter::is_open() const { return open_; }

Status VideoWriter::open(const std::string& final_path, const std::string& temp_path, int width, int height, double fps,
                         const std::string& codec) {
  if (is_open()) return Status::error("video writer already open on '" + temp_path_ + "'");
  if (final_path.empty() || temp_path.empty() || final_path == temp_path) {
    return Status::error("video paths must be non-empty and differ (final '" + final_path + "', temp '" + temp_path +
                         "')");
  }
  width &= ~1;
  height &= ~1;
  if (width < 2 || height < 2 || width > 16384 || height > 16384) {
    return Status::error("bad video size " + std::to_string(width) + "x" + std::to_string(height));
  }
  if (!std::isfinite(fps) || fps <= 0 || fps > 1000) return Status::error("bad video fps " + std::to_string(fps));
  std::string chosen = codec;
  if (codec == "auto" || codec.empty()) {
    chosen = Fmp4Encoder::codec_available("avc1") ? "avc1" : "mp4v";
  } else if (codec != "avc1" && codec != "mp4v") {
    return Status::error("unknown video codec '" + codec + "' (want auto, avc1, mp4v)");
  }
  const int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    last_errno_ = errno;
    return Status::error("cannot create '" + temp_path + "': " + errno_text(last_errno_));
  }
  auto encoder = std::make_unique<Fmp4Encoder>();
  if (Status why = encoder->open_new(fd, Fmp4Settings{width, height, fps, chosen}); !why) {
    last_errno_ = encoder->write_errno() != 0 ? encoder->write_errno() : EIO;
    ::close(fd);
    ::unlink(temp_path.c_str());
    return Status::error("cannot start '" + temp_path + "': " + why.message());
  }
  encoder_ = std::move(encoder);
  fd_ = fd;
  open_ = true;
  header_ = encoder_->header();
  final_path_ = final_path;
  temp_path_ = temp_path;
  codec_ = chosen;
  fps_ = fps;
  size_ = cv::Size(width, height);
  frames_ = 0;
  last_error_.clear();
  return Status::ok();
}

Status VideoWriter::resume() {
  const int fd = ::open(temp_path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) {
    last_errno_ = errno;
    return Status::error("cannot reopen '" + temp_path_ + "': " + errno_text(last_errno_));
  }
  auto encoder = std::make_unique<Fmp4Encoder>();
  if (Status s = encoder->open_continued(fd, Fmp4Settings{size_.width, size_.height, fps_, codec_}, frames_, header_);
      !s) {
    last_errno_ = encoder->write_errno() != 0 ? encoder->write_errno() : EIO;
    ::close(fd);
    return s;
  }
  encoder_ = std::move(encoder);
  fd_ = fd;
  return Status::ok();
}

bool VideoWriter::write(const cv::Mat& frame) {
  if (!is_open() || frame.empty()) {
    last_error_ = is_open() ? "empty frame" : "video writer is not open";
    return false;
  }
  last_errno_ = 0;
  if (encoder_ == nullptr) {
    if (Status s = resume(); !s) {
      last_error_ = s.message();
      return false;
    }
  }
  try {
    const cv::Mat* image = &frame;
    cv::Mat converted;
    if (frame.depth() != CV_8U) {
      frame.convertTo(converted, CV_8U);
      image = &converted;
    }
    if (image->channels() == 1) {
      cv::cvtColor(*image, scratch_, cv::COLOR_GRAY2BGR);
      image = &scratch_;
    } else if (image->channels() == 4) {
      cv::cvtColor(*image, scratch_, cv::COLOR_BGRA2BGR);
      image = &scratch_;
    } else if (image->channels() != 3) {
      last_error_ = "frames must have 1, 3 or 4 channels";
      return false;
    }
    cv::Mat resized;
    if (image->size() != size_) {
      cv::resize(*image, resized, size_, 0, 0, cv::INTER_AREA);
      image = &resized;
    }
    if (Status s = encoder_->write_frame(image->data, static_cast<int64_t>(image->step[0])); !s) {
      last_error_ = s.message();
      last_errno_ = encoder_->write_errno();
      suspend();  // the file ends with its last whole frame; the next write() starts a new encoder
      return false;
    }
    ++frames_;
    return true;
  } catch (const std::exception& e) {
    last_error_ = std::string("frame conversion failed: ") + e.what();
    return false;
  }
}

void VideoWriter::suspend() {
  if (encoder_ == nullptr) return;
  encoder_.reset();  // every frame is a whole fragment already: nothing to flush
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void VideoWriter::release() {
  encoder_.reset();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  open_ = false;
}

StatusOr<std::string> VideoWriter::finalize() {
  if (!is_open()) return Status::error("video writer is not open");
  if (frames_ == 0) {
    abandon();
    return Status::error("no frames written; video abandoned");
  }
  last_errno_ = 0;
  std::string failure;
  if (encoder_ != nullptr) {
    // The fragment index at the end helps seeking; without it (no room for it) the file
    // still ends with its last whole frame and plays.
    if (Status s = encoder_->finish(); !s) failure = s.message();
    encoder_.reset();
  } else {
    fd_ = ::open(temp_path_.c_str(), O_RDONLY | O_CLOEXEC);  // a suspended video: only sync it
  }
  bool ok = fd_ >= 0;
  if (!ok) {
    last_errno_ = errno;
    failure = "cannot reopen '" + temp_path_ + "': " + errno_text(errno);
  } else if (::fsync(fd_) != 0) {
    ok = false;
    last_errno_ = errno;
    failure = "cannot sync '" + temp_path_ + "': " + errno_text(errno);
  }
  release();
  if (ok) {
    StatusOr<std::string> used = rename_to_free_name(temp_path_, final_path_);
    const int rename_errno = errno;
    if (used) {
      temp_path_.clear();
      return used;
    }
    last_errno_ = rename_errno != 0 ? rename_errno : EIO;
    failure = used.message();
  }
  // The frames written stay in the temporary file (whole, never under a final name).
  Status kept = Status::error("could not finalize video: " + failure + "; kept as '" + temp_path_ + "'");
  temp_path_.clear();
  return kept;
}

void VideoWriter::abandon() {
  release();
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
  temp_path_.clear();
}

}  // namespace tensorscope::plotting
