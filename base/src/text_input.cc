#include "tensorscope/base/text_input.h"

#include "tensorscope/base/posix_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tensorscope {

StatusOr<std::string> read_text_file(const std::string& path, size_t max_bytes, const std::string& what,
                                     bool* missing) {
  if (missing != nullptr) *missing = false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT && missing != nullptr) {
      *missing = true;
      return std::string();
    }
    return Status::from_errno(path + ": cannot open " + what, err);
  }
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return Status::error(path + ": is a directory, not a " + what);
  }
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return Status::from_errno(path + ": cannot read " + what, err);
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > max_bytes) {
      ::close(fd);
      return Status::error(path + ": " + what + " is larger than " + std::to_string(max_bytes) +
                           " bytes; refusing to read it (is this the right file?)");
    }
  }
  ::close(fd);
  return text;
}

StatusOr<std::string> read_text_tail(const std::string& path, size_t max_bytes, const std::string& what,
                                     bool* missing) {
  if (missing != nullptr) *missing = false;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    if (err == ENOENT && missing != nullptr) {
      *missing = true;
      return std::string();
    }
    return Status::from_errno(path + ": cannot open " + what, err);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Status::from_errno(path + ": cannot stat " + what, errno);
  if (!S_ISREG(st.st_mode)) return Status::error(path + ": not a file, not a " + what);
  const auto size = static_cast<uint64_t>(st.st_size);
  const uint64_t from = size > max_bytes ? size - max_bytes : 0;
  std::string text(size - from, '\0');
  StatusOr<size_t> got = pread_full(fd.get(), text.data(), text.size(), from, path);
  if (!got) return got.status();
  text.resize(*got);
  if (from > 0) {  // from the first line that begins in it
    const size_t nl = text.find('\n');
    text.erase(0, nl == std::string::npos ? text.size() : nl + 1);
  }
  return text;
}

std::string escape_for_message(std::string_view s, size_t max_shown, char quote) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size() && i < max_shown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\\' || (quote != '\0' && c == static_cast<unsigned char>(quote))) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  if (s.size() > max_shown) out += "...";
  return out;
}

std::string quote_for_message(std::string_view s, size_t max_shown) {
  return '"' + escape_for_message(s, max_shown, '"') + '"';
}

}  // namespace tensorscope
