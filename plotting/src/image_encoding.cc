// image_encoding.cc — PNG by libpng's simplified API, JPEG by libjpeg(-turbo) into memory.
#include "tensorscope/plotting/image_encoding.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <jpeglib.h>
#include <png.h>

#ifndef JCS_EXTENSIONS
#error "image_encoding.cc needs libjpeg-turbo's BGR input (JCS_EXT_BGR)"
#endif

namespace tensorscope::plotting {
namespace {

Status check_frame(const cv::Mat& frame) {
  if (frame.empty()) return Status::error("the frame is empty");
  if (frame.depth() != CV_8U || frame.dims != 2) return Status::error("the frame is not a 2-d 8-bit image");
  const int channels = frame.channels();
  if (channels != 1 && channels != 3 && channels != 4) {
    return Status::error("the frame has " + std::to_string(channels) + " channels (1, 3 or 4 can be encoded)");
  }
  return Status::ok();
}

// libjpeg reports a fatal error by calling error_exit, which must not return: it jumps back
// to compress_jpeg with the library's message.
struct JpegErrors {
  jpeg_error_mgr manager;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_fail(j_common_ptr info) {
  auto* errors = reinterpret_cast<JpegErrors*>(info->err);
  (*info->err->format_message)(info, errors->message);
  std::longjmp(errors->jump, 1);
}

void jpeg_quiet(j_common_ptr /*info*/, int /*level*/) {}  // warnings and traces: not logged

// C only between setjmp and longjmp (no object with a destructor lives across the jump).
// On return *out is malloc's (or null), for the caller to free, whatever the result.
bool compress_jpeg(const cv::Mat& frame, int quality, unsigned char** out, unsigned long* size, char* message) {
  jpeg_compress_struct info;
  JpegErrors errors;
  info.err = jpeg_std_error(&errors.manager);
  errors.manager.error_exit = jpeg_fail;
  errors.manager.emit_message = jpeg_quiet;
  errors.message[0] = '\0';
  if (setjmp(errors.jump) != 0) {
    jpeg_destroy_compress(&info);
    std::snprintf(message, JMSG_LENGTH_MAX, "%s", errors.message);
    return false;
  }
  jpeg_create_compress(&info);
  jpeg_mem_dest(&info, out, size);
  info.image_width = static_cast<JDIMENSION>(frame.cols);
  info.image_height = static_cast<JDIMENSION>(frame.rows);
  const int channels = frame.channels();
  info.input_components = channels;
  info.in_color_space = channels == 1 ? JCS_GRAYSCALE : channels == 3 ? JCS_EXT_BGR : JCS_EXT_BGRX;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, quality, TRUE);
  jpeg_start_compress(&info, TRUE);
  while (info.next_scanline < info.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(frame.ptr<unsigned char>(static_cast<int>(info.next_scanline)));
    jpeg_write_scanlines(&info, &row, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  return true;
}

}  // namespace

StatusOr<std::string> encode_png(const cv::Mat& frame) {
  if (Status checked = check_frame(frame); !checked.is_ok()) return checked;
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(frame.cols);
  image.height = static_cast<png_uint_32>(frame.rows);
  const int channels = frame.channels();
  image.format = channels == 1 ? PNG_FORMAT_GRAY : channels == 3 ? PNG_FORMAT_BGR : PNG_FORMAT_BGRA;
  // 8-bit samples: the stride in components is the stride in bytes.
  const auto stride = static_cast<png_int_32>(frame.step[0]);
  png_alloc_size_t size = 0;  // first the size, then the bytes
  if (png_image_write_to_memory(&image, nullptr, &size, 0, frame.data, stride, nullptr) == 0) {
    return Status::error(std::string("PNG: ") + image.message);
  }
  std::string bytes(size, '\0');
  if (png_image_write_to_memory(&image, bytes.data(), &size, 0, frame.data, stride, nullptr) == 0) {
    return Status::error(std::string("PNG: ") + image.message);
  }
  bytes.resize(size);
  return bytes;
}

StatusOr<std::string> encode_jpeg(const cv::Mat& frame, int quality) {
  if (Status checked = check_frame(frame); !checked.is_ok()) return checked;
  if (frame.cols > JPEG_MAX_DIMENSION || frame.rows > JPEG_MAX_DIMENSION) {
    return Status::error("the frame is larger than JPEG allows (" + std::to_string(JPEG_MAX_DIMENSION) + " pixels)");
  }
  unsigned char* out = nullptr;
  unsigned long size = 0;  // NOLINT(google-runtime-int): libjpeg's type
  std::vector<char> message(JMSG_LENGTH_MAX, '\0');
  const bool ok = compress_jpeg(frame, std::clamp(quality, 1, 100), &out, &size, message.data());
  std::string bytes;
  if (ok && out != nullptr) bytes.assign(reinterpret_cast<const char*>(out), size);
  std::free(out);
  if (!ok) return Status::error(std::string("JPEG: ") + message.data());
  return bytes;
}

}  // namespace tensorscope::plotting
