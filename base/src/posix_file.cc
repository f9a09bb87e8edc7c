#include "tensorscope/base/posix_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

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

// Moves `bytes` in calls of `io(done, n)` (at most kMaxTransfer each), retrying EINTR:
// the count moved, short only when a call moved nothing (end of file, or a write that
// made no progress); nullopt on an error, with errno set.
template <typename Io>
std::optional<size_t> transfer(size_t bytes, Io io) {
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = io(done, std::min(bytes - done, kMaxTransfer));
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::nullopt;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

// The most names rename_to_free_name tries: `to`, then "<stem>-1<ext>", ...
constexpr int kMaxSuffix = 100000;

// "dir/name.mp4" + 2 -> "dir/name-2.mp4"; the extension is the last '.' in the file
// name part (a leading dot, as in ".hidden", is not an extension).
std::string with_suffix(const std::string& path, int n) {
  const size_t slash = path.find_last_of('/');
  const size_t name_start = slash == std::string::npos ? 0 : slash + 1;
  size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || dot <= name_start) dot = path.size();
  return path.substr(0, dot) + "-" + std::to_string(n) + path.substr(dot);
}

// Status::error(message), with errno restored to `err` after the message was built.
Status failed_with(std::string message, int err) {
  Status s = Status::error(std::move(message));
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
  auto got = transfer(
      bytes, [&](size_t done, size_t n) { return ::write(fd, static_cast<const unsigned char*>(data) + done, n); });
  if (!got) return failed(path, "cannot write", errno);
  return *got == bytes ? Status::ok() : failed(path, "cannot write", EIO);
}

Status pwrite_all(int fd, const void* data, size_t bytes, uint64_t offset, const std::string& path) {
  auto got = transfer(bytes, [&](size_t done, size_t n) {
    return ::pwrite(fd, static_cast<const unsigned char*>(data) + done, n, static_cast<off_t>(offset + done));
  });
  if (!got) return failed(path, "cannot write", errno);
  return *got == bytes ? Status::ok() : failed(path, "cannot write", EIO);
}

StatusOr<size_t> pread_full(int fd, void* dst, size_t bytes, uint64_t offset, const std::string& path) {
  auto got = transfer(bytes, [&](size_t done, size_t n) {
    return ::pread(fd, static_cast<unsigned char*>(dst) + done, n, static_cast<off_t>(offset + done));
  });
  if (!got) return failed(path, "cannot read", errno);
  return *got;
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

bool is_same_file(int fd, const std::string& path) {
  struct stat a {};
  struct stat b {};
  return ::fstat(fd, &a) == 0 && ::lstat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

Status rename_no_replace(const std::string& from, const std::string& to, bool* exists) {
  if (exists != nullptr) *exists = false;
#ifdef SYS_renameat2
  if (::syscall(SYS_renameat2, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) {
    return Status::ok();
  }
  const int err = errno;
  if (err == EEXIST) {
    if (exists != nullptr) *exists = true;
    return failed_with("'" + to + "' exists", err);
  }
  if (err != ENOSYS && err != EINVAL && err != EOPNOTSUPP) {
    return failed_with("rename '" + from + "' -> '" + to + "': " + errno_text(err), err);
  }
#endif
  // Filesystems without RENAME_NOREPLACE: link() fails with EEXIST instead of replacing.
  if (::link(from.c_str(), to.c_str()) != 0) {
    const int link_err = errno;
    if (link_err == EEXIST && exists != nullptr) *exists = true;
    return failed_with("link '" + from + "' -> '" + to + "': " + errno_text(link_err), link_err);
  }
  if (::unlink(from.c_str()) != 0) {
    // The file is in place under its new name; the old name is a harmless leftover.
  }
  return Status::ok();
}

StatusOr<std::string> rename_to_free_name(const std::string& from, const std::string& to) {
  std::string target = to;
  Status failure;
  for (int n = 1; n <= kMaxSuffix; ++n) {
    bool exists = false;
    failure = rename_no_replace(from, target, &exists);
    if (failure.is_ok()) return target;
    if (!exists) break;
    target = with_suffix(to, n);
  }
  return failure;
}

}  // namespace tensorscope
