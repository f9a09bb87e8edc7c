#include "tensorscope/base/posix_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tensorscope {
namespace {

// One system call moves at most this much (Linux caps a transfer near 2 GiB anyway).
constexpr size_t kMaxTransfer = size_t{1} << 30;

// The error Status, with errno restored to `err` after the message was built.
Status failed(const std::string& path, const char* what, int err) {
  Status s = Status::error(path + ": " + what + ": " + errno_text(err));
  errno = err;
  return s;
}

}  // namespace

std::string errno_text(int err) {
  char buffer[256];
  // GNU strerror_r returns the text (maybe not in buffer).
  return ::strerror_r(err, buffer, sizeof buffer);
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0 && fd_ != fd) {
    const int saved = errno;
    ::close(fd_);
    errno = saved;
  }
  fd_ = fd;
}

Status UniqueFd::close(const std::string& what) {
  if (fd_ < 0) return Status::ok();
  if (::close(std::exchange(fd_, -1)) != 0) return failed(what, "close failed", errno);
  return Status::ok();
}

Status write_all(int fd, const void* data, size_t bytes, const std::string& path) {
  const auto* p = static_cast<const unsigned char*>(data);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::write(fd, p + done, std::min(bytes - done, kMaxTransfer));
    if (n < 0) {
      if (errno == EINTR) continue;
      return failed(path, "cannot write", errno);
    }
    if (n == 0) return failed(path, "cannot write", EIO);
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

Status pwrite_all(int fd, const void* data, size_t bytes, uint64_t offset, const std::string& path) {
  const auto* p = static_cast<const unsigned char*>(data);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pwrite(fd, p + done, std::min(bytes - done, kMaxTransfer),
                               static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return failed(path, "cannot write", errno);
    }
    if (n == 0) return failed(path, "cannot write", EIO);
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

StatusOr<size_t> pread_full(int fd, void* dst, size_t bytes, uint64_t offset, const std::string& path) {
  auto* p = static_cast<unsigned char*>(dst);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd, p + done, std::min(bytes - done, kMaxTransfer),
                              static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return failed(path, "cannot read", errno);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

Status pread_exact(int fd, void* dst, size_t bytes, uint64_t offset, const std::string& path) {
  auto got = pread_full(fd, dst, bytes, offset, path);
  if (!got) return got.status();
  if (*got < bytes) {
    Status s = Status::error(path + ": cannot read: the file ends at byte " + std::to_string(offset + *got) +
                             ", before byte " + std::to_string(offset + bytes));
    errno = 0;
    return s;
  }
  return Status::ok();
}

Status fsync_path(const std::string& path, bool directory) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0)));
  if (!fd.valid()) return failed(path, "cannot open for fsync", errno);
  if (::fsync(fd.get()) != 0) return failed(path, "fsync failed", errno);
  return Status::ok();
}

}  // namespace tensorscope
