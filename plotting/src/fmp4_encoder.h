// fmp4_encoder.h — one video encoder and fragmented-MP4 muxer (FFmpeg's libavcodec and
// libavformat) writing to a file descriptor, one fragment per frame.
//
// Used by VideoWriter (video_writer.cc) only. Every frame is a complete moof+mdat
// fragment as soon as write_frame() returns, so a file cut off by a crash plays up to its
// last whole frame. A video can be continued by a new encoder on the same file
// (open_continued): the new muxer's header is compared with the file's, not written, and
// its fragments go on with the next fragment number and decode time — so a worker can close the encoders of idle
// streams and reopen them later without splitting their files. Errors (a full disk, an
// encoder failure) come back as a Status with a message; nothing throws.
// Thread safety: none; one instance, one thread.
#pragma once

#include <cstdint>
#include <string>

#include "tensorscope/base/status.h"

struct AVCodecContext;
struct AVFormatContext;
struct AVIOContext;
struct AVFrame;
struct AVPacket;
struct AVStream;
struct SwsContext;

namespace tensorscope::plotting {

struct Fmp4Settings {
  int width = 0;   // even
  int height = 0;  // even
  double fps = 10;
  std::string codec;  // "avc1" (H.264 through libx264) or "mp4v" (MPEG-4 part 2)
};

class Fmp4Encoder {
 public:
  Fmp4Encoder() = default;
  ~Fmp4Encoder();  // releases libav state; never closes the descriptor
  Fmp4Encoder(const Fmp4Encoder&) = delete;
  Fmp4Encoder& operator=(const Fmp4Encoder&) = delete;

  // True when this FFmpeg build has an encoder for `codec`.
  static bool codec_available(const std::string& codec);

  // A new video on `fd` (empty, positioned at 0): writes the header (ftyp, empty moov).
  Status open_new(int fd, const Fmp4Settings& settings);
  // Continues the video on `fd` (opened for appending) whose first `frames` frames are
  // already written there by an encoder with the same settings. `header` is what
  // open_new wrote (header()); a new encoder whose header differs cannot continue the
  // file and fails.
  Status open_continued(int fd, const Fmp4Settings& settings, int64_t frames, const std::string& header);

  // Encodes one BGR 8-bit frame of exactly width x height and writes its fragment. On
  // failure (a full disk, ...) the file is cut back to its last whole frame and the
  // encoder is closed: continue with a new one (open_continued).
  Status write_frame(const uint8_t* bgr, int64_t stride);
  // Writes the trailer (a fragment index for seeking). The encoder is closed afterwards,
  // and on failure the file ends with its last whole frame.
  Status finish();
  bool is_open() const { return encoder_ != nullptr; }

  int64_t frames() const { return frames_; }
  // errno of the last failed write to the file (0: none, or the failure was not the file's).
  int write_errno() const { return write_errno_; }
  // The bytes open_new wrote before the first frame (ftyp + moov).
  const std::string& header() const { return header_; }

 private:
  static int write_packet(void* opaque, const uint8_t* data, int size);
  Status open(int fd, const Fmp4Settings& settings, int64_t frames);
  Status drain();
  // Cuts the file back to its last whole frame, closes the encoder and returns `why`.
  Status fail(Status why);
  std::string io_error(int code) const;
  void release();

  int fd_ = -1;
  AVCodecContext* encoder_ = nullptr;
  AVFormatContext* muxer_ = nullptr;
  AVIOContext* io_ = nullptr;
  AVStream* stream_ = nullptr;
  SwsContext* scaler_ = nullptr;
  AVFrame* frame_ = nullptr;
  AVPacket* packet_ = nullptr;
  int64_t frames_ = 0;
  bool capture_header_ = false;  // write_packet keeps the bytes in header_ instead
  std::string header_;
  int write_errno_ = 0;
  uint64_t pending_bytes_ = 0;  // the file's size as written so far
  uint64_t whole_bytes_ = 0;    // its size after the last whole frame
};

}  // namespace tensorscope::plotting
