#include "board_poller.h"

#include <dirent.h>

#include "tensorscope/base/logging.h"
#include "tensorscope/shared/runtime_paths.h"

namespace tensorscope::view {
namespace {

constexpr int kDiscoverEveryRounds = 10;  // directory listings: every 10th poll
constexpr size_t kMaxFramesPerBoardPerPoll = 4096;
constexpr size_t kFramesPerBatch = 32;  // into the store as they are read: bounded copies in flight

}  // namespace

BoardPoller::BoardPoller(std::vector<SessionSource> sources, FrameStore* store)
    : sources_(std::move(sources)), store_(store) {}

void BoardPoller::discover(int source) {
  const SessionSource& s = sources_[static_cast<size_t>(source)];
  if (s.session.empty()) return;
  const std::string dir = default_runtime_dir(s.runtime_dir);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (!is_live_board_file_name(name, s.session)) continue;
    const std::string path = dir + "/" + name;
    auto it = readers_.find(path);
    if (it != readers_.end() && !it->second.second->replaced()) continue;
    auto reader = LiveBoardReader::open(path);
    if (!reader) {
      if (refused_[path] != reader.message()) TS_LOG_WARN("live view: {}", reader.message());
      refused_[path] = reader.message();
      continue;
    }
    refused_.erase(path);
    if (it != readers_.end()) {
      // A restarted worker's board: read what the old one still holds first.
      batch_.clear();
      it->second.second->poll(&batch_);
      for (auto& f : batch_) store_->add(source, std::move(f));
    }
    readers_[path] = {source, std::move(*reader)};
  }
  ::closedir(d);
}

size_t BoardPoller::poll() {
  if (rounds_++ % kDiscoverEveryRounds == 0) {
    for (size_t i = 0; i < sources_.size(); ++i) discover(static_cast<int>(i));
  }
  size_t moved = 0;
  uint64_t lost = 0;
  for (auto& [path, entry] : readers_) {
    size_t taken = 0;
    while (taken < kMaxFramesPerBoardPerPoll) {
      batch_.clear();
      entry.second->poll(&batch_, kFramesPerBatch);
      for (auto& f : batch_) store_->add(entry.first, std::move(f));
      taken += batch_.size();
      if (batch_.size() < kFramesPerBatch) break;
    }
    moved += taken;
    lost += entry.second->lost();
  }
  frames_read_.fetch_add(moved, std::memory_order_relaxed);
  frames_lost_.store(lost, std::memory_order_relaxed);
  boards_open_.store(readers_.size(), std::memory_order_relaxed);
  return moved;
}

}  // namespace tensorscope::view
