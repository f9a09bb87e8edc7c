// track_handle.h — TrackHandle: what Client::track_model / track_layer / track_tensor
// return. RAII: destroying (or reset()-ing) the handle removes every callback and hook it
// registered; a module call still waiting to be sent is sent first.
//
// Used in the training process. Thread safety: a handle is owned by one thread at a time
// (movable, not copyable); the tracking it stands for runs on any thread. Destroy or
// reset a handle (or the Client) outside backward: removing a gradient hook while
// autograd runs it on another thread is not safe in libtorch.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace tensorscope {

class Track;

// One stream a handle may send.
struct TrackedStream {
  std::string name;    // stream name, e.g. "model.features.0" or "model.fc.weight.grad"
  std::string kind;    // "activation", "gradient", "parameter", "parameter_gradient"
  std::string module;  // qualified module path ("" for the root or a tracked tensor)
};

class TrackHandle {
 public:
  TrackHandle() = default;
  explicit TrackHandle(std::shared_ptr<Track> track);
  ~TrackHandle();
  TrackHandle(TrackHandle&&) noexcept;
  TrackHandle& operator=(TrackHandle&&) noexcept;
  TrackHandle(const TrackHandle&) = delete;
  TrackHandle& operator=(const TrackHandle&) = delete;

  // False when the track could not be set up (bad regex, a tensor that does not require
  // grad, nothing matched, ...); error() says why. An inert handle sends nothing.
  bool ok() const;
  const std::string& error() const;

  // The streams this handle may send (calls after the first of a step add "#<k>").
  std::vector<TrackedStream> streams() const;

  // Sends module calls that are finished but still held (see Client::track_model).
  void flush();
  // Removes everything this handle registered; the handle becomes empty.
  void reset();

 private:
  std::shared_ptr<Track> track_;
};

}  // namespace tensorscope
