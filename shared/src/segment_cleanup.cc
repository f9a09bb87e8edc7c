#include "tensorscope/shared/segment_cleanup.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "tensorscope/shared/file_lock.h"
#include "tensorscope/shared/runtime_paths.h"

namespace tensorscope {
namespace {

bool process_alive(long pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM; }

}  // namespace

SegmentCleanup remove_dead_segments(const std::string& runtime_dir) {
  SegmentCleanup result;
  try {
    std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(runtime_dir.c_str()), &::closedir);
    if (!dir) return result;
    std::vector<std::pair<std::string, long>> candidates;
    while (dirent* e = ::readdir(dir.get())) {
      const std::string name = e->d_name;
      const long pid = segment_file_pid(name);
      if (pid > 0) candidates.emplace_back(name, pid);
    }
    dir.reset();
    for (const auto& [name, pid] : candidates) {
      const std::string path = runtime_dir + "/" + name;
      if (lock_state(path) != LockState::kFree || process_alive(pid)) continue;
      struct stat st {};
      const bool sized = ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
      if (!sized) continue;
      if (::unlink(path.c_str()) == 0) {
        result.removed.push_back(name);
        result.bytes += static_cast<uint64_t>(st.st_blocks) * 512;
      }
    }
  } catch (...) {}
  return result;
}

}  // namespace tensorscope
