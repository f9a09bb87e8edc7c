// open_video_limit.h — caps how many videos a worker keeps open at once.
//
// Used inside a worker process. Every open video holds an encoder (megabytes of frame
// buffers) and a file descriptor, so a worker with thousands of streams would run out
// of memory or descriptors. When one more video is open than allowed, the least
// recently written one is suspended (its encoder and file closed, the file kept); its
// stream's next frame reopens them and continues the same file.
// Thread safety: render thread only (StreamVideo's render-thread state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>

namespace tensorscope::daemon {

class StreamVideo;

class OpenVideoLimit {
 public:
  explicit OpenVideoLimit(size_t max_open) : max_open_(max_open < 1 ? 1 : max_open) {}

  // `video` has an open file and just wrote a frame: it becomes the most recent, and the
  // least recent others are finalized while more than the limit are open.
  void touch(StreamVideo* video);
  // `video` closed its file (or is going away).
  void forget(StreamVideo* video);

  size_t open_count() const { return order_.size(); }
  uint64_t evictions() const { return evictions_; }  // suspensions so far

 private:
  const size_t max_open_;
  std::list<StreamVideo*> order_;  // front = least recently written
  std::unordered_map<StreamVideo*, std::list<StreamVideo*>::iterator> where_;
  uint64_t evictions_ = 0;
};

}  // namespace tensorscope::daemon
