#include "tensorscope/base/posix_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tensorscope/base/posix_file.h"

namespace tensorscope {

Status make_directories(const std::string& path) {
  if (path.empty()) return Status::error("cannot create a directory with an empty name");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    return S_ISDIR(st.st_mode) ? Status::ok() : Status::error(path + ": exists and is not a directory");
  }
  const std::string parent = parent_path(path);
  if (parent != path && parent != "." && parent != "/") {
    if (Status s = make_directories(parent); !s) return s;
  }
  if (::mkdir(path.c_str(), 0777) != 0 && errno != EEXIST) {
    return Status::error(path + ": cannot create the directory: " + errno_text(errno));
  }
  return Status::ok();
}

std::string normalized_path(const std::string& path) {
  const bool absolute = !path.empty() && path[0] == '/';
  std::vector<std::string> parts;
  size_t begin = 0;
  while (begin <= path.size()) {
    const size_t end = std::min(path.find('/', begin), path.size());
    const std::string part = path.substr(begin, end - begin);
    begin = end + 1;
    if (part.empty() || part == ".") continue;
    if (part == ".." && !parts.empty() && parts.back() != "..") {
      parts.pop_back();
    } else if (part != ".." || !absolute) {  // "/.." is "/"
      parts.push_back(part);
    }
  }
  std::string out = absolute ? "/" : "";
  for (size_t i = 0; i < parts.size(); ++i) out += (i > 0 ? "/" : "") + parts[i];
  return out.empty() ? "." : out;
}

std::string absolute_path(const std::string& path) {
  if (!path.empty() && path[0] == '/') return normalized_path(path);
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return normalized_path(path);
  return normalized_path(std::string(cwd) + "/" + path);
}

std::string resolved_path(const std::string& path) {
  char* real = ::realpath(path.c_str(), nullptr);
  if (real == nullptr) return absolute_path(path);
  std::string out(real);
  std::free(real);
  return out;
}

std::string parent_path(const std::string& path) {
  size_t end = path.size();
  while (end > 1 && path[end - 1] == '/') --end;  // "a/b/" is "a/b"
  const size_t slash = path.find_last_of('/', end - 1);
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string shell_word(const std::string& path) {
  const bool plain = !path.empty() && std::all_of(path.begin(), path.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || (c != '\0' && std::strchr("_./-+,:@%=", c) != nullptr);
  });
  if (plain) return path;
  std::string out = "'";
  for (char c : path) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace tensorscope
