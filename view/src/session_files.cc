#include "session_files.h"

#include <sys/stat.h>

#include <algorithm>

#include "tensorscope/recording/video_steps.h"

namespace tensorscope::view {

SessionFiles::SessionFiles(std::string session_dir) : dir_(std::move(session_dir)) {}

bool SessionFiles::refresh() {
  struct stat st {};
  const std::string path = dir_ + "/" + recording::kIndexFileName;
  int64_t size = -1, mtime = -1;
  if (::stat(path.c_str(), &st) == 0) {
    size = st.st_size;
    mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  }
  if (size == index_size_ && mtime == index_mtime_ns_) return false;
  index_size_ = size;
  index_mtime_ns_ = mtime;
  auto read = recording::read_index(dir_);
  if (!read) {
    last_error_ = read.message();
    return false;  // keep what was read before: a corrupt index is replaced by the daemon
  }
  last_error_.clear();
  entries_ = std::move(*read);
  // Segments of a stream in step order, so that frame_at can stop at the first one past.
  std::stable_sort(
      entries_.begin(), entries_.end(),
      [](const recording::IndexEntry& a, const recording::IndexEntry& b) { return a.first_step < b.first_step; });
  by_path_.clear();
  for (size_t i = 0; i < entries_.size(); ++i) by_path_[entries_[i].path] = i;
  return true;
}

bool SessionFiles::listed(const std::string& path) const { return by_path_.count(path) != 0; }

const std::vector<int64_t>* SessionFiles::steps_of(const recording::IndexEntry& entry) {
  auto it = steps_.find(entry.path);
  if (it != steps_.end()) return &it->second;
  auto read = recording::read_video_steps(recording::kept_steps_path(dir_, entry.path), entry.frames);
  if (!read) return nullptr;  // a video without its steps file: its frames cannot be placed
  if (steps_.size() >= kMaxCachedSteps) {
    steps_.erase(steps_order_.front());
    steps_order_.pop_front();
  }
  steps_order_.push_back(entry.path);
  return &steps_.emplace(entry.path, std::move(read->steps)).first->second;
}

std::optional<VideoFrameRef> SessionFiles::frame_at(const std::string& stream, const std::string& device, int rank,
                                                    const std::string& mode, int64_t step) {
  std::optional<VideoFrameRef> best;
  for (const auto& e : entries_) {
    if (e.first_step > step) break;
    if (e.frames <= 0 || e.stream != stream || e.device != device || e.rank != rank || e.mode != mode) continue;
    if (best && best->step >= e.last_step) continue;
    const std::vector<int64_t>* steps = steps_of(e);
    if (steps == nullptr || steps->empty()) continue;
    // Steps within a video only grow; the last one <= step.
    auto pos = std::upper_bound(steps->begin(), steps->end(), step);
    if (pos == steps->begin()) continue;
    const int64_t found = *(pos - 1);
    if (!best || found > best->step) {
      best = VideoFrameRef{e.path, static_cast<int64_t>(pos - steps->begin()) - 1, static_cast<int64_t>(steps->size()),
                           found};
    }
  }
  return best;
}

}  // namespace tensorscope::view
