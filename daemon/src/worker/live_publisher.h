// live_publisher.h — a worker's side of the live view: puts the newest frame of each
// stream, as a JPEG, on the worker's live board (tensorscope/view/live_board.h).
//
// Used inside a worker process. The render thread offers each frame it draws. Nothing is
// taken while no page watches (the view server's watch file, live_board.h, looked at
// once a second); then at most live.max_fps a second per stream are taken (the others
// cost one clock read), as a copy into a small pending set where a stream's newer frame
// replaces its older one. A thread of its own, at the lowest CPU priority (nice 19),
// scales them to live.width, encodes them and writes the board: when the machine is busy
// rendering, live frames get sparser, rendering does not get slower. The board never
// blocks; nothing is written to the output directory. The board (shared memory) is made
// when the first frame is to be written, i.e. once a page watches: a daemon nobody
// watches leaves all of the runtime directory to the training's segments.
// Thread safety: offer() from any render thread; the encoder thread is internal.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
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
  // The publisher of worker `worker_index`; null when live.max_fps is 0. Its board is made
  // when first needed; when it cannot be (or would not fit: said in the log, tried again
  // every 30 s), the frames are counted as failed and the videos go on.
  static std::unique_ptr<LivePublisher> create(const DaemonConfig& config, int worker_index);
  ~LivePublisher();  // encodes nothing more, removes the board

  // Whether the board exists (tests).
  bool has_board() const;

  // Offers the frame just drawn of stream `key` (with its class legend, frame_renderer.h's
  // legend_json, "" for none); `last_ns` is that stream's time of its last taken frame
  // (steady clock), updated when this one is taken.
  void offer(const StreamKey& key, const std::string& kind, int64_t step, uint64_t push_unix_ns, uint64_t frames_total,
             const cv::Mat& frame, const std::string& legend, int64_t* last_ns);

  // Waits until every taken frame is on the board (tests).
  void flush();

  uint64_t published() const;
  uint64_t skipped() const;  // taken frames replaced by a newer one, or beyond the pending cap

  static constexpr size_t kMaxPending = 16;  // frames waiting for the encoder (~1 MB each)

 private:
  struct Pending {
    view::LiveFrame meta;  // what the board is told of the frame
    uint64_t order = 0;    // taken first, encoded first
    cv::Mat frame;
  };
  using PendingKey = std::tuple<uint64_t, std::string, std::string, int, std::string>;

  struct BoardPlace {
    std::string dir;   // the runtime directory
    std::string path;  // the board's file in it
    int board_mb = 0;
    int worker_index = 0;
  };

  LivePublisher(BoardPlace place, std::string watch_path, int64_t interval_ns, int quality, int width);
  void encode_loop();
  // Encoder thread: the board, made now if it is not yet (null when it cannot be).
  view::LiveBoardWriter* board();
  bool watched();  // render threads: a page watches (the watch file, looked at once a second)

  const BoardPlace place_;
  std::unique_ptr<view::LiveBoardWriter> board_;  // made and written by the encoder thread only
  int64_t board_tried_ns_ = 0;                    // encoder thread: the last failed attempt
  const std::string watch_path_;
  const int64_t interval_ns_;
  const int quality_;                         // JPEG quality, 1..100
  const int width_;                           // frames wider are scaled down to this (0: never)
  std::atomic<int64_t> watch_checked_ns_{0};  // render threads
  std::atomic<bool> watched_{false};          // render threads

  mutable std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::map<PendingKey, Pending> pending_;
  uint64_t order_ = 0;
  bool encoding_ = false;
  bool stopping_ = false;
  uint64_t published_ = 0, skipped_ = 0, failed_ = 0;
  bool board_made_ = false;  // board_ != nullptr, for has_board() from other threads
  std::thread encoder_;
};

}  // namespace tensorscope::daemon
