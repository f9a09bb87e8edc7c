// grad_hook.h — GradHook, a gradient hook on one tensor that removes itself, and
// GradHookTrack, what Client::track_tensor returns: the tensor's gradient as a stream.
//
// Used inside the training process. The hook runs in backward, on autograd's thread.
// A GradHook does not keep its tensor alive; destroying it removes the hook when the
// tensor still exists. Thread safety: hooks may run on any thread; create and destroy a
// GradHook on one thread, not while backward runs through its tensor.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <ATen/core/Tensor.h>

#include "stream_gate.h"
#include "track.h"
#include "tensorscope/shared/wire_format.h"
#include "tensorscope/track_options.h"

namespace tensorscope {

class ClientImpl;

class GradHook {
 public:
  // Registers `on_grad` on `tensor`, which must require grad.
  GradHook(const at::Tensor& tensor, std::function<void(const at::Tensor&)> on_grad);
  ~GradHook();
  GradHook(const GradHook&) = delete;
  GradHook& operator=(const GradHook&) = delete;

 private:
  c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> tensor_;
  unsigned index_ = 0;
};

// Sends gradients as one stream of `kind`, gated by its own every_n. Shared by
// track_tensor and the parameter gradients of module tracks.
class GradSender {
 public:
  GradSender(std::weak_ptr<ClientImpl> client, TrackOptions options);
  void send(const std::string& stream, const at::Tensor& grad, wire::TensorKind kind);
  uint8_t render_hint(ClientImpl& client, const std::string& stream) const;

 private:
  std::weak_ptr<ClientImpl> client_;
  const TrackOptions options_;
  StreamGate gate_;
};

// A track's gate settings: its every_n (else the client's) and the client's max_hz.
int64_t track_every_n(const std::weak_ptr<ClientImpl>& client, const TrackOptions& options);
double track_max_hz(const std::weak_ptr<ClientImpl>& client);

class GradHookTrack : public Track, public std::enable_shared_from_this<GradHookTrack> {
 public:
  // An inert FailedTrack when `tensor` is undefined or does not require grad.
  static std::shared_ptr<Track> create(std::weak_ptr<ClientImpl> client, const std::string& name,
                                       const at::Tensor& tensor, TrackOptions options);
  GradHookTrack(std::weak_ptr<ClientImpl> client, std::string name, TrackOptions options);
  void stop() override;
  std::vector<TrackedStream> streams() const override;

 private:
  const std::string name_;
  GradSender sender_;
  mutable std::mutex mutex_;
  bool stopped_ = false;
  std::unique_ptr<GradHook> hook_;
};

}  // namespace tensorscope
