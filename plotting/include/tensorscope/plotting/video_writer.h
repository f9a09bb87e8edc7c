// video_writer.h — writes frames to a fragmented MP4 under a temporary name, then
// renames it to its final name without ever replacing an existing file.
//
// Used by the daemon's worker processes, one writer per open video segment. Until
// finalize() the file only exists under temp_path, so every file with a final name is
// complete. Every frame is written as its own fragment before write() returns: a file
// cut off by a crash (kill -9 of the worker) still plays up to its last whole frame.
// suspend() closes the encoder and the file of an idle video (memory and descriptors)
// and the next write() continues the same file. Codecs: "avc1" (H.264 through libx264,
// plays in browsers), "mp4v" (MPEG-4 part 2), or "auto" = avc1 when this FFmpeg has
// libx264, else mp4v. Frame width and height are rounded down to even numbers (4:2:0
// needs them even). No exception escapes: open() and finalize() fail with a Status that
// says why, write() returns false and keeps the reason in last_error(). The no-replace
// renames are tensorscope::rename_no_replace / rename_to_free_name (base/posix_file.h).
// Thread safety: none; use one writer from one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <opencv2/core.hpp>

#include "tensorscope/base/status.h"

namespace tensorscope::plotting {

class Fmp4Encoder;

class VideoWriter {
 public:
  VideoWriter();
  ~VideoWriter();  // abandon()s a writer that was opened and not finalized
  VideoWriter(VideoWriter&& other) noexcept;
  VideoWriter& operator=(VideoWriter&& other) noexcept;
  VideoWriter(const VideoWriter&) = delete;
  VideoWriter& operator=(const VideoWriter&) = delete;

  // Starts a video at temp_path (truncated if it exists). codec: "auto", "avc1" or
  // "mp4v". Fails if already open, on bad sizes/fps, or when the file or the encoder
  // cannot be opened (the error says which).
  Status open(const std::string& final_path, const std::string& temp_path, int width, int height, double fps,
              const std::string& codec);

  // Open: between open() and finalize()/abandon(), suspended or not.
  bool is_open() const;
  bool is_suspended() const { return is_open() && encoder_ == nullptr; }
  // The codec the last successful open() chose ("avc1", "mp4v"); kept after finalize()
  // so it can be logged; empty before the first open().
  const std::string& codec() const { return codec_; }
  cv::Size frame_size() const { return size_; }
  const std::string& temp_path() const { return temp_path_; }

  // Appends one frame (resuming a suspended writer first). Grey/BGRA and other depths
  // are converted to 8-bit BGR, other sizes are resized to frame_size(). False when not
  // open, the frame is empty, or the file cannot be written (last_error() says why;
  // the frames written before stay whole).
  bool write(const cv::Mat& bgr_frame);
  int64_t frames() const { return frames_; }
  const std::string& last_error() const { return last_error_; }
  // The errno of the last failed open(), write() or finalize() when the file system
  // refused it (ENOSPC, EACCES, ...); 0 for other failures.
  int last_errno() const { return last_errno_; }

  // Closes the encoder and the file, keeping everything written; the next write()
  // reopens them and continues the same file. No-op when suspended already.
  void suspend();

  // Closes the file (after syncing it to disk) and renames temp_path to final_path; if
  // that name exists, to "<stem>-1<ext>", "<stem>-2<ext>", ... (no existing file is
  // ever replaced): the name used. A writer with no frames is abandoned and fails. When
  // the sync or the rename fails, the file stays under its temporary name (its frames
  // whole) and finalize fails ("could not finalize video: ...; kept as '<temp>'"). After
  // finalize (success or not) the writer is closed.
  StatusOr<std::string> finalize();

  // Closes the file and deletes temp_path. Safe to call at any time.
  void abandon();

 private:
  Status resume();
  void release();

  std::unique_ptr<Fmp4Encoder> encoder_;  // null while suspended or closed
  int fd_ = -1;
  bool open_ = false;
  std::string header_;  // the file's first bytes, which a resumed encoder must match
  std::string final_path_;
  std::string temp_path_;
  std::string codec_;
  double fps_ = 0;
  cv::Size size_;
  int64_t frames_ = 0;
  std::string last_error_;
  int last_errno_ = 0;
  cv::Mat scratch_;
};

}  // namespace tensorscope::plotting
