// video_writer.h — writes frames to an MP4 under a temporary name, then renames it to
// its final name without ever replacing an existing file.
//
// Used by the daemon's worker processes, one writer per open video segment. Until
// finalize() the file only exists under temp_path (give a name ending in ".mp4", e.g.
// ".tmp-<name>.mp4", so OpenCV picks the MP4 container), so every file with a final
// name is complete and plays. Codecs: "avc1" (H.264, plays in browsers), "mp4v"
// (MPEG-4 part 2), or "auto" = avc1 if OpenCV can open it, else mp4v. Frame width and
// height are rounded down to even numbers (H.264 4:2:0 needs them even).
// No exception escapes; failures return false with a message in *error.
// Thread safety: none; use one writer from one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <opencv2/core.hpp>

namespace cv {
class VideoWriter;
}

namespace tensorscope::plotting {

class VideoWriter {
 public:
  VideoWriter();
  ~VideoWriter();  // abandon()s a writer that was opened and not finalized
  VideoWriter(VideoWriter&& other) noexcept;
  VideoWriter& operator=(VideoWriter&& other) noexcept;
  VideoWriter(const VideoWriter&) = delete;
  VideoWriter& operator=(const VideoWriter&) = delete;

  // Starts a video at temp_path (truncated if it exists). codec: "auto", "avc1",
  // "mp4v" (or another 4-character fourcc). Fails if already open, on bad sizes/fps,
  // or when OpenCV cannot open the file with that codec.
  bool open(const std::string& final_path, const std::string& temp_path, int width, int height,
            double fps, const std::string& codec, std::string* error);

  bool is_open() const;
  // The fourcc the last successful open() chose ("avc1", "mp4v"); kept after
  // finalize() so it can be logged; empty before the first open().
  const std::string& codec() const { return codec_; }
  cv::Size frame_size() const { return size_; }
  const std::string& temp_path() const { return temp_path_; }

  // Appends one frame. Grey/BGRA and other depths are converted to 8-bit BGR, other
  // sizes are resized to frame_size(). False when not open or the frame is empty.
  bool write(const cv::Mat& bgr_frame);
  int64_t frames() const { return frames_; }

  // Closes the file and renames temp_path to final_path; if that name exists, to
  // "<stem>-1<ext>", "<stem>-2<ext>", ... (no existing file is ever replaced). Returns
  // the name used in *final_path_out. A writer with no frames is abandoned and fails.
  // After finalize (success or not) the writer is closed.
  bool finalize(std::string* final_path_out, std::string* error);

  // Closes the file and deletes temp_path. Safe to call at any time.
  void abandon();

 private:
  void release();

  std::unique_ptr<cv::VideoWriter> writer_;
  std::string final_path_;
  std::string temp_path_;
  std::string codec_;
  cv::Size size_;
  int64_t frames_ = 0;
  cv::Mat scratch_;
};

// Renames `from` to `to` only if `to` does not exist (renameat2 RENAME_NOREPLACE, or
// link()+unlink() where the filesystem lacks it). false with errno-style *error
// otherwise; *exists is set when the failure was that `to` exists.
bool rename_no_replace(const std::string& from, const std::string& to, bool* exists,
                       std::string* error);

}  // namespace tensorscope::plotting
