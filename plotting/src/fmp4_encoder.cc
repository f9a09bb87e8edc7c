// fmp4_encoder.cc — see fmp4_encoder.h.
#include "fmp4_encoder.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <mutex>
#include <utility>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/dict.h>
#include <libavutil/error.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
}

#include "tensorscope/base/posix_file.h"

namespace tensorscope::plotting {
namespace {

constexpr int kIoBufferBytes = 64 << 10;

std::string av_text(int code) {
  char text[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(code, text, sizeof(text));
  return text;
}

const char* encoder_name(const std::string& codec) {
  if (codec == "avc1") return "libx264";
  if (codec == "mp4v") return "mpeg4";
  return nullptr;
}

// libavformat's write callback lost its const in FFmpeg 6.1 (libavformat 61).
#if LIBAVFORMAT_VERSION_MAJOR >= 61
using WriteBuffer = const uint8_t*;
#else
using WriteBuffer = uint8_t*;
#endif

}  // namespace

Fmp4Encoder::~Fmp4Encoder() { release(); }

bool Fmp4Encoder::codec_available(const std::string& codec) {
  const char* name = encoder_name(codec);
  return name != nullptr && avcodec_find_encoder_by_name(name) != nullptr;
}

int Fmp4Encoder::write_packet(void* opaque, const uint8_t* data, int size) {
  auto* self = static_cast<Fmp4Encoder*>(opaque);
  if (self->capture_header_) {
    self->header_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(size));
    return size;
  }
  int done = 0;
  while (done < size) {
    const ssize_t n = ::write(self->fd_, data + done, static_cast<size_t>(size - done));
    if (n < 0) {
      if (errno == EINTR) continue;
      self->write_errno_ = errno;
      return AVERROR(errno);
    }
    done += static_cast<int>(n);
    self->pending_bytes_ += static_cast<uint64_t>(n);
  }
  return size;
}

std::string Fmp4Encoder::io_error(int code) const {
  if (write_errno_ != 0) return errno_text(write_errno_);
  return av_text(code);
}

Status Fmp4Encoder::open_new(int fd, const Fmp4Settings& settings) {
  if (Status s = open(fd, settings, 0); !s) return s;
  // The header was captured; now it goes to the file like every later byte.
  const int rc = write_packet(this, reinterpret_cast<const uint8_t*>(header_.data()), static_cast<int>(header_.size()));
  if (rc < 0) {
    Status s = Status::error("cannot write the video header: " + io_error(rc));
    release();
    return s;
  }
  whole_bytes_ = pending_bytes_;
  return Status::ok();
}

Status Fmp4Encoder::open_continued(int fd, const Fmp4Settings& settings, int64_t frames, const std::string& header) {
  if (Status s = open(fd, settings, frames); !s) return s;
  if (header_ != header) {
    release();
    return Status::error("a new " + settings.codec + " encoder made a different header; the video cannot be continued");
  }
  const off_t end = ::lseek(fd, 0, SEEK_END);
  if (end < 0) {
    Status s = Status::error(std::string("cannot find the end of the video: ") + errno_text(errno));
    release();
    return s;
  }
  whole_bytes_ = pending_bytes_ = static_cast<uint64_t>(end);
  return Status::ok();
}

Status Fmp4Encoder::open(int fd, const Fmp4Settings& settings, int64_t frames) {
  static std::once_flag quiet;
  std::call_once(quiet, [] { av_log_set_level(AV_LOG_ERROR); });  // no per-file encoder statistics
  release();
  fd_ = fd;
  write_errno_ = 0;
  pending_bytes_ = whole_bytes_ = 0;
  header_.clear();
  const char* name = encoder_name(settings.codec);
  const AVCodec* codec = name != nullptr ? avcodec_find_encoder_by_name(name) : nullptr;
  if (codec == nullptr) return Status::error("no " + settings.codec + " encoder in this FFmpeg build");
  encoder_ = avcodec_alloc_context3(codec);
  frame_ = av_frame_alloc();
  packet_ = av_packet_alloc();
  if (encoder_ == nullptr || frame_ == nullptr || packet_ == nullptr) {
    release();
    return Status::error("out of memory for the video encoder");
  }
  const AVRational rate = av_d2q(settings.fps, 100000);
  encoder_->width = settings.width;
  encoder_->height = settings.height;
  encoder_->pix_fmt = AV_PIX_FMT_YUV420P;
  encoder_->time_base = av_inv_q(rate);
  encoder_->framerate = rate;
  // No B-frames and no lookahead: every frame's packet comes out of the encoder at once
  // and becomes its own fragment, so a killed worker loses no frame it has written.
  encoder_->max_b_frames = 0;
  encoder_->thread_count = 1;
  encoder_->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  AVDictionary* codec_options = nullptr;
  if (settings.codec == "avc1") {
    av_dict_set(&codec_options, "preset", "veryfast", 0);
    av_dict_set(&codec_options, "tune", "zerolatency", 0);
    // A plot's frames differ from the last in a few places (bars, a line, the step's
    // text) and often repeat an earlier one: the settings that keep such videos small
    // at the same look (bench/README.md, "Video size"). x264's default keyframe distance
    // (250 frames: a seek decodes at most that many, ~0.3 s at 640x480); four reference
    // frames (a frame like one a few steps back costs little); a keyframe kept sharp
    // (I/P quantizer ratio 2.5: the static axes and labels that every later frame
    // copies); adaptive quantization with its bias to dark, flat areas (mode 3).
    encoder_->gop_size = 250;
    encoder_->refs = 4;
    encoder_->i_quant_factor = 0.4f;
    av_dict_set(&codec_options, "aq-mode", "3", 0);
  } else {
    encoder_->gop_size = std::max(1, static_cast<int>(std::lround(settings.fps)));  // a keyframe per second
    encoder_->bit_rate = 0;
    encoder_->global_quality = FF_QP2LAMBDA * 4;  // constant quality: sharp text and lines
    encoder_->flags |= AV_CODEC_FLAG_QSCALE;
  }
  int rc = avcodec_open2(encoder_, codec, &codec_options);
  av_dict_free(&codec_options);
  if (rc < 0) {
    release();
    return Status::error(std::string("cannot open the ") + name + " encoder: " + av_text(rc));
  }
  frame_->format = AV_PIX_FMT_YUV420P;
  frame_->width = settings.width;
  frame_->height = settings.height;
  if ((rc = av_frame_get_buffer(frame_, 0)) < 0) {
    release();
    return Status::error("cannot allocate a video frame: " + av_text(rc));
  }
  scaler_ = sws_getContext(settings.width, settings.height, AV_PIX_FMT_BGR24, settings.width, settings.height,
                           AV_PIX_FMT_YUV420P, SWS_BILINEAR, nullptr, nullptr, nullptr);
  if ((rc = avformat_alloc_output_context2(&muxer_, nullptr, "mp4", nullptr)) < 0 || scaler_ == nullptr) {
    release();
    return Status::error("cannot set up the MP4 muxer: " + (rc < 0 ? av_text(rc) : std::string("no pixel converter")));
  }
  muxer_->flags |= AVFMT_FLAG_BITEXACT;  // the same header from every encoder of a video
  // Without edit lists the muxer would otherwise move a continued video's first decode
  // time to 0 ("make zero"), before frag_discont could keep it.
  muxer_->avoid_negative_ts = AVFMT_AVOID_NEG_TS_MAKE_NON_NEGATIVE;
  auto* buffer = static_cast<unsigned char*>(av_malloc(kIoBufferBytes));
  io_ = buffer != nullptr
      ? avio_alloc_context(buffer, kIoBufferBytes, 1, this, nullptr,
                           reinterpret_cast<int (*)(void*, WriteBuffer, int)>(&write_packet), nullptr)
      : nullptr;
  stream_ = avformat_new_stream(muxer_, nullptr);
  if (io_ == nullptr || stream_ == nullptr) {
    if (io_ == nullptr) av_free(buffer);
    release();
    return Status::error("out of memory for the MP4 muxer");
  }
  muxer_->pb = io_;
  muxer_->flags |= AVFMT_FLAG_CUSTOM_IO;
  stream_->time_base = encoder_->time_base;
  avcodec_parameters_from_context(stream_->codecpar, encoder_);
  AVDictionary* mux_options = nullptr;
  // A continued video's first fragment starts at its frame's decode time
  // (frag_discont), not at 0; no edit list, so every encoder writes the same header.
  av_dict_set(
      &mux_options, "movflags",
      frames > 0 ? "frag_custom+empty_moov+default_base_moof+frag_discont" : "frag_custom+empty_moov+default_base_moof",
      0);
  av_dict_set_int(&mux_options, "use_editlist", 0, 0);
  av_dict_set_int(&mux_options, "fragment_index", frames + 1, 0);
  capture_header_ = true;
  rc = avformat_write_header(muxer_, &mux_options);
  av_dict_free(&mux_options);
  if (rc >= 0) avio_flush(io_);
  capture_header_ = false;
  if (rc < 0) {
    release();
    return Status::error("cannot write the MP4 header: " + av_text(rc));
  }
  frames_ = frames;
  return Status::ok();
}

Status Fmp4Encoder::write_frame(const uint8_t* bgr, int64_t stride) {
  if (encoder_ == nullptr) return Status::error("the video encoder is not open");
  int rc = av_frame_make_writable(frame_);
  if (rc < 0) return Status::error("video frame: " + av_text(rc));
  const uint8_t* planes[1] = {bgr};
  const int strides[1] = {static_cast<int>(stride)};
  sws_scale(scaler_, planes, strides, 0, encoder_->height, frame_->data, frame_->linesize);
  frame_->pts = frames_;
  if ((rc = avcodec_send_frame(encoder_, frame_)) < 0) return fail(Status::error("video encoder: " + av_text(rc)));
  if (Status s = drain(); !s) return fail(std::move(s));
  // Cut the fragment: this frame is on disk, whole, before the call returns.
  rc = av_write_frame(muxer_, nullptr);
  if (rc >= 0) avio_flush(io_);
  if (rc < 0 || io_->error < 0 || write_errno_ != 0) {
    return fail(Status::error("cannot write the video: " + io_error(rc < 0 ? rc : io_->error)));
  }
  whole_bytes_ = pending_bytes_;
  ++frames_;
  return Status::ok();
}

Status Fmp4Encoder::fail(Status why) {
  // Whatever part of the frame reached the file goes: the file ends with a whole frame.
  if (fd_ >= 0 && pending_bytes_ != whole_bytes_) {
    if (::ftruncate(fd_, static_cast<off_t>(whole_bytes_)) == 0) pending_bytes_ = whole_bytes_;
  }
  release();
  return why;
}

Status Fmp4Encoder::drain() {
  for (;;) {
    int rc = avcodec_receive_packet(encoder_, packet_);
    if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return Status::ok();
    if (rc < 0) return Status::error("video encoder: " + av_text(rc));
    av_packet_rescale_ts(packet_, encoder_->time_base, stream_->time_base);
    packet_->duration = av_rescale_q(1, encoder_->time_base, stream_->time_base);
    packet_->stream_index = stream_->index;
    rc = av_write_frame(muxer_, packet_);
    av_packet_unref(packet_);
    if (rc < 0) return Status::error("cannot write the video: " + io_error(rc));
  }
}

Status Fmp4Encoder::finish() {
  if (encoder_ == nullptr) return Status::error("the video encoder is not open");
  if (const int rc = avcodec_send_frame(encoder_, nullptr); rc < 0) {
    return fail(Status::error("video encoder: " + av_text(rc)));
  }
  if (Status s = drain(); !s) return fail(std::move(s));
  const int rc = av_write_trailer(muxer_);
  if (rc >= 0) avio_flush(io_);
  if (rc < 0 || io_->error < 0 || write_errno_ != 0) {
    return fail(Status::error("cannot write the end of the video: " + io_error(rc < 0 ? rc : io_->error)));
  }
  release();
  return Status::ok();
}

void Fmp4Encoder::release() {
  if (muxer_ != nullptr) {
    muxer_->pb = nullptr;
    avformat_free_context(muxer_);
    muxer_ = nullptr;
  }
  if (io_ != nullptr) {
    av_freep(&io_->buffer);
    avio_context_free(&io_);
  }
  stream_ = nullptr;
  if (encoder_ != nullptr) avcodec_free_context(&encoder_);
  if (frame_ != nullptr) av_frame_free(&frame_);
  if (packet_ != nullptr) av_packet_free(&packet_);
  if (scaler_ != nullptr) {
    sws_freeContext(scaler_);
    scaler_ = nullptr;
  }
}

}  // namespace tensorscope::plotting
