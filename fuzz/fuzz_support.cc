// fuzz_support.cc — see fuzz_target.h.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include "fuzz_target.h"

namespace tensorscope::fuzz {

const std::string& private_dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/ts-fuzz-XXXXXX";
    const char* made = ::mkdtemp(tmpl);
    return std::string(made != nullptr ? made : "/tmp");
  }();
  return dir;
}

std::string file_with(const std::string& bytes, const char* suffix) {
  return file_at(std::string("input") + suffix, bytes);
}

std::string file_at(const std::string& relative, const std::string& bytes) {
  const std::string path = private_dir() + "/" + relative;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd >= 0) {
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  return path;
}

}  // namespace tensorscope::fuzz
