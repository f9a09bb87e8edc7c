// open_video_limit.h — caps how many videos a worker keeps open at once.
//
// Used inside a worker process. Every open video holds an encoder (x264 keeps tens of
// frames of lookahead, threads and a descriptor), so a worker with thousands of
// streams would run out of memory or descriptors. When one more video opens than
// allowed, the least recently written one is finalized (a complete, playable file in
// index.json); its stream opens its next segment file when its next frame comes.
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
  uint64_t evictions() const { return evictions_; }

 private:
  const size_t max_open_;
  std::list<StreamVideo*> order_;  // front = least recently written
  std::unordered_map<StreamVideo*, std::list<StreamVideo*>::iterator> where_;
  uint64_t evictions_ = 0;
};

}  // namespace tensorscope::daemon
