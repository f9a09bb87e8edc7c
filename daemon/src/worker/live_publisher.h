// live_publisher.h — a worker's side of the live view: puts the newest frame of each
// stream, as a JPEG, on the worker's live board (tensorscope/view/live_board.h).
//
// Used inside a worker process, on its render thread, right after a frame is drawn. At
// most live.max_fps frames a second per stream are encoded (the others cost one clock
// read); the board never blocks and nothing is written to the output directory.
// Thread safety: render thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "config/daemon_config.h"
#include "tensorscope/view/live_board.h"

namespace tensorscope::daemon {

struct StreamKey;

// The size of a worker's board: live.board_mb, but never more than a sixteenth of what
// the runtime directory's file system has free (shared memory belongs to the training's
// segments first: in a 64 MiB /dev/shm a board takes 4 MiB); 0 when that is below the
// smallest board (no live frames from that worker).
uint64_t live_board_capacity(int board_mb, uint64_t free_bytes);

class LivePublisher {
 public:
  // The publisher of worker `worker_index`; null when live.max_fps is 0 or the board
  // cannot be created or would not fit (said in the log: the videos go on without the
  // live view).
  static std::unique_ptr<LivePublisher> create(const DaemonConfig& config, int worker_index);
  ~LivePublisher();  // removes the board

  // Offers the frame just drawn of stream `key`; `last_ns` is that stream's time of its
  // last published frame (steady clock), updated when this one is published.
  void offer(const StreamKey& key, const std::string& kind, int64_t step, uint64_t push_unix_ns,
             uint64_t frames_total, const cv::Mat& frame, int64_t* last_ns);

  uint64_t published() const { return published_; }
  uint64_t failed() const { return failed_; }

 private:
  LivePublisher(std::unique_ptr<view::LiveBoardWriter> board, int64_t interval_ns, int quality);

  std::unique_ptr<view::LiveBoardWriter> board_;
  const int64_t interval_ns_;
  std::vector<int> params_;
  std::vector<unsigned char> jpeg_;
  uint64_t published_ = 0;
  uint64_t failed_ = 0;
};

}  // namespace tensorscope::daemon
