#include "worker/open_video_limit.h"

#include "worker/stream_video.h"

namespace tensorscope::daemon {

void OpenVideoLimit::touch(StreamVideo* video) {
  auto it = where_.find(video);
  if (it != where_.end()) {
    order_.splice(order_.end(), order_, it->second);
  } else {
    where_[video] = order_.insert(order_.end(), video);
  }
  while (order_.size() > max_open_) {
    StreamVideo* oldest = order_.front();
    if (oldest == video) break;  // cannot happen with max_open_ >= 1; never evict the caller
    ++evictions_;
    oldest->suspend();  // calls forget(oldest)
  }
}

void OpenVideoLimit::forget(StreamVideo* video) {
  auto it = where_.find(video);
  if (it == where_.end()) return;
  order_.erase(it->second);
  where_.erase(it);
}

}  // namespace tensorscope::daemon
