// track.h — Track: what a TrackHandle stands for (a tracked model, layer gradients, a
// tracked tensor's gradient). The concrete tracks are ModuleTrack and GradHookTrack.
//
// Used inside the training process. Thread safety: every method may be called from any
// thread; stop() is idempotent and, once it returns, the track sends nothing more.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tensorscope/track_handle.h"

namespace tensorscope {

class Track {
 public:
  virtual ~Track() = default;
  // Removes every callback and hook; sends module calls still held first.
  virtual void stop() = 0;
  // Ends the current module calls (their outputs are sent); no-op for other tracks.
  virtual void end_calls() {}
  // The client's step is about to change to `next` (after end_calls()).
  virtual void step_changed(int64_t /*next*/) {}
  // Empty once stopped.
  virtual std::vector<TrackedStream> streams() const = 0;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

 protected:
  std::string error_;
};

// A track that could not be set up: sends nothing, says why.
class FailedTrack : public Track {
 public:
  explicit FailedTrack(std::string why) { error_ = std::move(why); }
  void stop() override {}
  std::vector<TrackedStream> streams() const override { return {}; }
};

}  // namespace tensorscope
