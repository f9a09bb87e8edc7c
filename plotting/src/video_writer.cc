// video_writer.cc — cv::VideoWriter behind a temp name, codec fallback, no-replace rename.
#include "tensorscope/plotting/video_writer.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

namespace tensorscope::plotting {
namespace {

constexpr int kMaxSuffix = 100000;

void set_error(std::string* error, const std::string& message) {
  if (error != nullptr) *error = message;
}

std::string errno_text(int err) { return std::strerror(err); }

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

bool rename_no_replace(const std::string& from, const std::string& to, bool* exists,
                       std::string* error) {
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

VideoWriter::VideoWriter() = default;

VideoWriter::~VideoWriter() { abandon(); }

VideoWriter::VideoWriter(VideoWriter&& other) noexcept
    : writer_(std::move(other.writer_)),
      final_path_(std::move(other.final_path_)),
      temp_path_(std::move(other.temp_path_)),
      codec_(std::move(other.codec_)),
      size_(other.size_),
      frames_(other.frames_) {
  other.frames_ = 0;
  other.codec_.clear();
  other.temp_path_.clear();
}

VideoWriter& VideoWriter::operator=(VideoWriter&& other) noexcept {
  if (this != &other) {
    abandon();
    writer_ = std::move(other.writer_);
    final_path_ = std::move(other.final_path_);
    temp_path_ = std::move(other.temp_path_);
    codec_ = std::move(other.codec_);
    size_ = other.size_;
    frames_ = other.frames_;
    other.frames_ = 0;
    other.codec_.clear();
    other.temp_path_.clear();
  }
  return *this;
}

bool VideoWriter::is_open() const { return writer_ != nullptr; }

bool VideoWriter::open(const std::string& final_path, const std::string& temp_path, int width,
                       int height, double fps, const std::string& codec, std::string* error) {
  if (is_open()) {
    set_error(error, "video writer already open on '" + temp_path_ + "'");
    return false;
  }
  if (final_path.empty() || temp_path.empty() || final_path == temp_path) {
    set_error(error, "video paths must be non-empty and differ (final '" + final_path +
                         "', temp '" + temp_path + "')");
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
  std::vector<std::string> candidates;
  if (codec == "auto" || codec.empty()) {
    candidates = {"avc1", "mp4v"};
  } else if (codec.size() == 4) {
    candidates = {codec};
  } else {
    set_error(error, "unknown video codec '" + codec + "' (want auto, avc1, mp4v)");
    return false;
  }
  std::string failures;
  for (const std::string& cc : candidates) {
    try {
      auto writer = std::make_unique<cv::VideoWriter>();
      const int fourcc = cv::VideoWriter::fourcc(cc[0], cc[1], cc[2], cc[3]);
      if (writer->open(temp_path, cv::CAP_FFMPEG, fourcc, fps, cv::Size(width, height), true) &&
          writer->isOpened()) {
        writer_ = std::move(writer);
        final_path_ = final_path;
        temp_path_ = temp_path;
        codec_ = cc;
        size_ = cv::Size(width, height);
        frames_ = 0;
        return true;
      }
      failures += (failures.empty() ? "" : ", ") + cc;
    } catch (const std::exception& e) {
      failures += (failures.empty() ? "" : ", ") + cc + " (" + e.what() + ")";
    }
    ::unlink(temp_path.c_str());  // a failed open may leave an empty file behind
  }
  set_error(error, "OpenCV could not open '" + temp_path + "' for writing with codec " + failures);
  return false;
}

bool VideoWriter::write(const cv::Mat& frame) {
  if (!is_open() || frame.empty()) return false;
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
      return false;
    }
    if (image->size() != size_) {
      cv::Mat resized;
      cv::resize(*image, resized, size_, 0, 0, cv::INTER_AREA);
      writer_->write(resized);
    } else {
      writer_->write(*image);
    }
    ++frames_;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

void VideoWriter::release() {
  if (writer_ == nullptr) return;
  try {
    writer_->release();
  } catch (...) {
  }
  writer_.reset();
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
  release();
  std::string target = final_path_;
  std::string failure;
  for (int n = 1; n <= kMaxSuffix; ++n) {
    bool exists = false;
    if (rename_no_replace(temp_path_, target, &exists, &failure)) {
      if (final_path_out != nullptr) *final_path_out = target;
      temp_path_.clear();
      return true;
    }
    if (!exists) break;
    target = with_suffix(final_path_, n);
  }
  set_error(error, "could not finalize video: " + failure);
  ::unlink(temp_path_.c_str());
  temp_path_.clear();
  return false;
}

void VideoWriter::abandon() {
  release();
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
  temp_path_.clear();
}

}  // namespace tensorscope::plotting
