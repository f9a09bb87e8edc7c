#include "tensorscope/track_handle.h"

#include "track.h"

namespace tensorscope {

TrackHandle::TrackHandle(std::shared_ptr<Track> track) : track_(std::move(track)) {}
TrackHandle::~TrackHandle() { reset(); }
TrackHandle::TrackHandle(TrackHandle&& other) noexcept : track_(std::move(other.track_)) {}
TrackHandle& TrackHandle::operator=(TrackHandle&& other) noexcept {
  if (this != &other) {
    reset();
    track_ = std::move(other.track_);
  }
  return *this;
}

bool TrackHandle::ok() const { return track_ && track_->ok(); }

const std::string& TrackHandle::error() const {
  static const std::string kEmpty = "empty handle";
  return track_ ? track_->error() : kEmpty;
}

std::vector<TrackedStream> TrackHandle::streams() const {
  return track_ ? track_->streams() : std::vector<TrackedStream>{};
}

void TrackHandle::flush() {
  if (!track_) return;
  try {
    track_->end_calls();
  } catch (...) {}
}

void TrackHandle::reset() {
  if (!track_) return;
  try {
    track_->stop();
  } catch (...) {}
  track_.reset();
}

}  // namespace tensorscope
