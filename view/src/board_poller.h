// board_poller.h — follows the live boards of the view's sessions into its FrameStore.
//
// Used by the view server on a thread of its own: every poll it lists the runtime
// directory for the boards of each session (live_board.h), opens new ones, opens a
// restarted worker's board again, and moves the frames published since the last poll
// into the store. A board that cannot be opened or read is skipped and named in
// problems(). Thread safety: poll() from one thread; counters from any.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensorscope/view/frame_store.h"
#include "tensorscope/view/live_board.h"
#include "tensorscope/view/view_server.h"

namespace tensorscope::view {

class BoardPoller {
 public:
  BoardPoller(std::vector<SessionSource> sources, FrameStore* store);

  // One round; returns the number of frames moved into the store.
  size_t poll();

  uint64_t frames_read() const { return frames_read_.load(std::memory_order_relaxed); }
  uint64_t frames_lost() const { return frames_lost_.load(std::memory_order_relaxed); }
  size_t boards() const { return boards_open_.load(std::memory_order_relaxed); }

 private:
  void discover(int source);

  std::vector<SessionSource> sources_;
  FrameStore* store_;
  std::map<std::string, std::pair<int, std::unique_ptr<LiveBoardReader>>> readers_;  // by path
  std::map<std::string, std::string> refused_;                                       // path -> why (logged once)
  int rounds_ = 0;
  std::vector<LiveFrame> batch_;
  std::atomic<uint64_t> frames_read_{0};
  std::atomic<uint64_t> frames_lost_{0};
  std::atomic<size_t> boards_open_{0};
};

}  // namespace tensorscope::view
