// fmp4_scan.cc — see fmp4_scan.h.
#include "tensorscope/plotting/fmp4_scan.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "tensorscope/base/posix_file.h"

namespace tensorscope::plotting {
namespace {

constexpr uint64_t kMaxMoofBytes = 1 << 20;  // a moof of one frame is ~100 bytes

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

uint64_t be64(const uint8_t* p) { return (uint64_t{be32(p)} << 32) | be32(p + 4); }

bool read_at(int fd, uint64_t offset, void* out, size_t bytes) {
  auto* dst = static_cast<uint8_t*>(out);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, dst, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    dst += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

struct Box {
  char type[5] = {};
  uint64_t size = 0;    // header included
  uint32_t header = 8;  // 8, or 16 with a 64-bit size
};

// The box at `offset`, if its header is in the file and its size is sane (the box may
// still extend past the end of the file).
bool box_at(int fd, uint64_t offset, uint64_t file_bytes, Box* box) {
  uint8_t h[16];
  if (offset + 8 > file_bytes || !read_at(fd, offset, h, 8)) return false;
  std::memcpy(box->type, h + 4, 4);
  box->size = be32(h);
  box->header = 8;
  if (box->size == 1) {
    if (offset + 16 > file_bytes || !read_at(fd, offset + 8, h + 8, 8)) return false;
    box->size = be64(h + 8);
    box->header = 16;
  } else if (box->size == 0) {
    box->size = file_bytes - offset;  // "to the end of the file"
  }
  return box->size >= box->header;
}

// Samples in the trun boxes of the traf boxes of a moof's payload; -1 when malformed.
int64_t samples_in_moof(const std::vector<uint8_t>& moof) {
  int64_t samples = 0;
  auto children = [&](size_t begin, size_t end, auto&& visit) -> bool {
    size_t at = begin;
    while (at + 8 <= end) {
      const uint64_t size = be32(&moof[at]);
      if (size < 8 || size > end - at) return false;
      if (!visit(at, static_cast<size_t>(size))) return false;
      at += static_cast<size_t>(size);
    }
    return at == end;
  };
  const bool ok = children(0, moof.size(), [&](size_t at, size_t size) {
    if (std::memcmp(&moof[at + 4], "traf", 4) != 0) return true;
    return children(at + 8, at + size, [&](size_t t, size_t tsize) {
      if (std::memcmp(&moof[t + 4], "trun", 4) != 0) return true;
      if (tsize < 16) return false;
      samples += be32(&moof[t + 12]);  // after size, type, version and flags
      return true;
    });
  });
  return ok ? samples : -1;
}

}  // namespace

Fmp4Extent scan_fmp4(const std::string& path, int64_t max_frames) {
  Fmp4Extent out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    out.error = "cannot open '" + path + "': " + errno_text(errno);
    return out;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    out.error = std::string("cannot stat: ") + errno_text(errno);
    ::close(fd);
    return out;
  }
  out.file_bytes = static_cast<uint64_t>(st.st_size);
  uint64_t at = 0;
  Box box;
  // The header: ftyp, then moov (an empty one: the samples are in the fragments).
  for (const char* expected : {"ftyp", "moov"}) {
    if (!box_at(fd, at, out.file_bytes, &box) || std::strcmp(box.type, expected) != 0 ||
        box.size > out.file_bytes - at) {
      out.error = std::string("no whole ") + expected + " box where one must be";
      ::close(fd);
      return out;
    }
    at += box.size;
  }
  out.valid = true;
  out.whole_bytes = at;
  while (at < out.file_bytes) {
    if (!box_at(fd, at, out.file_bytes, &box)) {
      out.error = "a cut or malformed box header at byte " + std::to_string(at);
      break;
    }
    if (box.size > out.file_bytes - at) {
      out.error = std::string("a cut ") + box.type + " box at byte " + std::to_string(at);
      break;
    }
    if (std::strcmp(box.type, "moof") == 0) {
      const uint64_t payload = box.size - box.header;
      Box mdat;
      const uint64_t next = at + box.size;
      if (payload > kMaxMoofBytes) {
        out.error = "a moof of " + std::to_string(payload) + " bytes at byte " + std::to_string(at);
        break;
      }
      std::vector<uint8_t> moof(static_cast<size_t>(payload));
      if (!read_at(fd, at + box.header, moof.data(), moof.size())) {
        out.error = "cannot read the moof at byte " + std::to_string(at);
        break;
      }
      const int64_t samples = samples_in_moof(moof);
      if (samples < 0) {
        out.error = "a malformed moof at byte " + std::to_string(at);
        break;
      }
      if (!box_at(fd, next, out.file_bytes, &mdat) || std::strcmp(mdat.type, "mdat") != 0 ||
          mdat.size > out.file_bytes - next) {
        out.error = "the fragment at byte " + std::to_string(at) + " has no whole mdat";
        break;
      }
      if (samples > max_frames - out.frames) break;  // the caller wants no more
      at = next + mdat.size;
      out.frames += samples;
    } else if (std::strcmp(box.type, "mdat") == 0) {
      out.error = "an mdat without a moof at byte " + std::to_string(at);
      break;
    } else {
      at += box.size;  // free, sidx, mfra, ...
    }
    out.whole_bytes = at;
  }
  ::close(fd);
  return out;
}

}  // namespace tensorscope::plotting
