// video_writer.cc — Fmp4Encoder behind a temp name: codec choice, suspend/resume, no-replace rename.
#include "tensorscope/plotting/video_writer.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

#include <opencv2/imgproc.hpp>

#include "fmp4_encoder.h"
#include "tensorscope/base/posix_file.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

namespace tensorscope::plotting {
namespace {

constexpr int kMaxSuffix = 100000;

void set_error(std::string* error, const std::string& message) {
  if (error != nullptr) *error = message;
}

// "dir/name.mp4" + 2 -> "dir/name-2.mp4"; the extension is the last '.' in the file
// name part (a leading dot, as in ".hidden", is not an extension).
std::string with_suffix(const std::string& path, int n) {
  const size_t slash = path.find_last_of('/');
  const size_t name_start = slash == std::string::npos ? 0 : slash + 1;
  size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || dot <= name_start) dot = path.size();
  return path.substr(0, dot) + "-" + std::to_string(n) + path.substr(dot);
}

}  // namespace

bool rename_no_replace(const std::string& from, const std::string& to, bool* exists, std::string* error) {
  if (exists != nullptr) *exists = false;
#ifdef SYS_renameat2
  if (syscall(SYS_renameat2, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) {
    return true;
  }
  const int err = errno;
  if (err == EEXIST) {
    if (exists != nullptr) *exists = true;
    set_error(error, "'" + to + "' exists");
    return false;
  }
  if (err != ENOSYS && err != EINVAL && err != EOPNOTSUPP) {
    set_error(error, "rename '" + from + "' -> '" + to + "': " + errno_text(err));
    return false;
  }
#endif
  // Filesystems without RENAME_NOREPLACE: link() fails with EEXIST instead of replacing.
  if (::link(from.c_str(), to.c_str()) != 0) {
    const int link_err = errno;
    if (link_err == EEXIST && exists != nullptr) *exists = true;
    set_error(error, "link '" + from + "' -> '" + to + "': " + errno_text(link_err));
    return false;
  }
  if (::unlink(from.c_str()) != 0) {
    // The video is in place under its final name; the temp name is a harmless leftover.
  }
  return true;
}

bool rename_to_free_name(const std::string& from, const std::string& to, std::string* used, std::string* error) {
  std::string target = to;
  std::string failure;
  for (int n = 1; n <= kMaxSuffix; ++n) {
    bool exists = false;
    if (rename_no_replace(from, target, &exists, &failure)) {
      if (used != nullptr) *used = target;
      return true;
    }
    if (!exists) break;
    target = with_suffix(to, n);
  }
  set_error(error, failure);
  return false;
}

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

bool VideoWriter::open(const std::string& final_path, const std::string& temp_path, int width, int height, double fps,
                       const std::string& codec, std::string* error) {
  if (is_open()) {
    set_error(error, "video writer already open on '" + temp_path_ + "'");
    return false;
  }
  if (final_path.empty() || temp_path.empty() || final_path == temp_path) {
    set_error(error, "video paths must be non-empty and differ (final '" + final_path + "', temp '" + temp_path + "')");
    return false;
  }
  width &= ~1;
  height &= ~1;
  if (width < 2 || height < 2 || width > 16384 || height > 16384) {
    set_error(error, "bad video size " + std::to_string(width) + "x" + std::to_string(height));
    return false;
  }
  if (!std::isfinite(fps) || fps <= 0 || fps > 1000) {
    set_error(error, "bad video fps " + std::to_string(fps));
    return false;
  }
  std::string chosen = codec;
  if (codec == "auto" || codec.empty()) {
    chosen = Fmp4Encoder::codec_available("avc1") ? "avc1" : "mp4v";
  } else if (codec != "avc1" && codec != "mp4v") {
    set_error(error, "unknown video codec '" + codec + "' (want auto, avc1, mp4v)");
    return false;
  }
  const int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    last_errno_ = errno;
    set_error(error, "cannot create '" + temp_path + "': " + errno_text(errno));
    return false;
  }
  auto encoder = std::make_unique<Fmp4Encoder>();
  std::string why;
  if (!encoder->open_new(fd, Fmp4Settings{width, height, fps, chosen}, &why)) {
    last_errno_ = encoder->write_errno() != 0 ? encoder->write_errno() : EIO;
    ::close(fd);
    ::unlink(temp_path.c_str());
    set_error(error, "cannot start '" + temp_path + "': " + why);
    return false;
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
  return true;
}

bool VideoWriter::resume(std::string* error) {
  const int fd = ::open(temp_path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) {
    last_errno_ = errno;
    *error = "cannot reopen '" + temp_path_ + "': " + errno_text(errno);
    return false;
  }
  auto encoder = std::make_unique<Fmp4Encoder>();
  if (!encoder->open_continued(fd, Fmp4Settings{size_.width, size_.height, fps_, codec_}, frames_, header_, error)) {
    last_errno_ = encoder->write_errno() != 0 ? encoder->write_errno() : EIO;
    ::close(fd);
    return false;
  }
  encoder_ = std::move(encoder);
  fd_ = fd;
  return true;
}

bool VideoWriter::write(const cv::Mat& frame) {
  if (!is_open() || frame.empty()) {
    last_error_ = is_open() ? "empty frame" : "video writer is not open";
    return false;
  }
  last_errno_ = 0;
  if (encoder_ == nullptr && !resume(&last_error_)) return false;
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
    if (!encoder_->write_frame(image->data, static_cast<int64_t>(image->step[0]), &last_error_)) {
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

bool VideoWriter::finalize(std::string* final_path_out, std::string* error) {
  if (!is_open()) {
    set_error(error, "video writer is not open");
    return false;
  }
  if (frames_ == 0) {
    abandon();
    set_error(error, "no frames written; video abandoned");
    return false;
  }
  last_errno_ = 0;
  std::string failure;
  if (encoder_ != nullptr) {
    // The fragment index at the end helps seeking; without it (no room for it) the file
    // still ends with its last whole frame and plays.
    (void)encoder_->finish(&failure);
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
  std::string used;
  if (ok && rename_to_free_name(temp_path_, final_path_, &used, &failure)) {
    if (final_path_out != nullptr) *final_path_out = used;
    temp_path_.clear();
    return true;
  }
  if (ok) last_errno_ = errno != 0 ? errno : EIO;
  // The frames written stay in the temporary file (whole, never under a final name).
  set_error(error, "could not finalize video: " + failure + "; kept as '" + temp_path_ + "'");
  temp_path_.clear();
  return false;
}

void VideoWriter::abandon() {
  release();
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
  temp_path_.clear();
}

}  // namespace tensorscope::plotting
