// append_file.cc — see append_file.h.
#include "tensorscope/recording/append_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <utility>

#include "tensorscope/base/posix_file.h"

namespace tensorscope::recording {
AppendFile::AppendFile(AppendFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

AppendFile& AppendFile::operator=(AppendFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<AppendFile> AppendFile::open(const std::string& path, const std::string& first_line, const std::string& what) {
  try {
    if (path.empty()) return Status::error(what + ": empty path");
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(parent, ec);
      if (ec) {
        return Status::error(path + ": cannot create directory " + parent.string() + ": " + ec.message());
      }
    }
    AppendFile file;
    file.path_ = path;
    file.fd_ = ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
    if (file.fd_ < 0) {
      const int err = errno;
      return Status::error(path + ": cannot open: " + errno_text(err));
    }
    struct stat st {};
    if (::fstat(file.fd_, &st) != 0) {
      const int err = errno;
      return Status::error(path + ": cannot stat: " + errno_text(err));
    }
    if (!S_ISREG(st.st_mode)) return Status::error(path + ": not a regular file");
    const int flags = ::fcntl(file.fd_, F_GETFL);
    if (flags >= 0) ::fcntl(file.fd_, F_SETFL, flags & ~O_NONBLOCK);

    const std::string header = first_line + "\n";
    const auto size = static_cast<uint64_t>(st.st_size);
    if (size == 0) {
      Status s = write_all(file.fd_, header, path);
      if (!s.is_ok()) return s;
      return file;
    }
    std::string first(std::min<uint64_t>(size, header.size()), '\0');
    Status s = pread_exact(file.fd_, first.data(), first.size(), 0, path);
    if (!s.is_ok()) return s;
    if (first != header) {
      return Status::error(path + ": exists and is not a " + what + " (its first line is not \"" + first_line +
                           "\"); not appending to it");
    }
    char last = '\n';
    s = pread_exact(file.fd_, &last, 1, static_cast<uint64_t>(size - 1), path);
    if (!s.is_ok()) return s;
    if (last != '\n') {
      // A writer died mid-line: end that line so the next block starts on its own.
      s = write_all(file.fd_, "\n", path);
      if (!s.is_ok()) return s;
    }
    return file;
  } catch (const std::exception& e) {
    return Status::error(path + ": cannot open " + what + ": " + e.what());
  } catch (...) {
    return Status::error(path + ": cannot open " + what + ": unknown error");
  }
}

Status AppendFile::append(std::string_view block) {
  if (fd_ < 0) return Status::error(path_ + ": not open");
  return write_all(fd_, block, path_);
}

}  // namespace tensorscope::recording
