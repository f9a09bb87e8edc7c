// output_dir.cc — see output_dir.h.
#include "tensorscope/shared/output_dir.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>

#include "tensorscope/shared/session_name.h"

namespace tensorscope {
namespace {

// The modification time of `path` in nanoseconds; -1 when it cannot be read.
int64_t modified_ns(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

}  // namespace

std::string run_info_base_name(int rank, long pid) {
  return "rank" + std::to_string(rank) + "_pid" + std::to_string(pid);
}

std::string latest_session_dir(const std::string& output_dir) {
  DIR* dir = ::opendir(output_dir.c_str());
  if (dir == nullptr) return {};
  std::string latest, latest_name;  // (of two written at once, the greater name)
  int64_t latest_ns = -1;
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (!validate_session_name(name).is_ok()) continue;  // (".", "..", hidden files, others)
    const std::string path = output_dir + "/" + name;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    const int64_t ns = std::max(modified_ns(path), modified_ns(path + "/index.json"));
    if (ns > latest_ns || (ns == latest_ns && name > latest_name)) {
      latest_ns = ns;
      latest = path;
      latest_name = name;
    }
  }
  ::closedir(dir);
  return latest;
}

bool is_session_dir(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  return std::any_of(kSessionMarks.begin(), kSessionMarks.end(),
                     [&](const char* mark) { return ::stat((dir + "/" + mark).c_str(), &st) == 0; });
}

std::vector<std::string> session_dirs_under(const std::string& dir) {
  if (is_session_dir(dir)) return {dir};
  std::vector<std::string> level = {dir};
  for (int depth = 1; depth <= kSessionSearchDepth && !level.empty(); ++depth) {
    std::vector<std::string> next, found;
    for (const std::string& parent : level) {
      DIR* d = ::opendir(parent.c_str());
      if (d == nullptr) continue;
      std::vector<std::string> names;
      while (const dirent* e = ::readdir(d)) {
        if (e->d_name[0] != '.') names.push_back(e->d_name);
      }
      ::closedir(d);
      std::sort(names.begin(), names.end());
      for (const std::string& name : names) {
        const std::string path = parent + "/" + name;
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        (is_session_dir(path) ? found : next).push_back(path);
      }
    }
    if (!found.empty()) return found;
    level = std::move(next);
  }
  return {};
}

}  // namespace tensorscope
