// client_impl.h — ClientImpl: the state behind tensorscope::Client: the libtorch face of
// a ClientCore (at::Tensor in, transforms, tracks), shared with the tracks
// (track_model, track_layer, track_tensor) that send through it.
//
// Used inside the training process. Tracks hold a weak_ptr to it; the Client's
// destructor stops every track before the impl goes away. Thread safety: send(), push()
// and every accessor may be called from any thread, including from inside ATen's op
// callbacks and autograd hooks.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "client_core.h"
#include "tensorscope/client_options.h"
#include "tensorscope/push_result.h"
#include "tensorscope/shared/wire_format.h"
#include "tensorscope/track_handle.h"

namespace tensorscope {

class Track;

// The ClientCore options of `options` (every field but the transform).
CoreOptions core_options(const ClientOptions& options);

class ClientImpl : public std::enable_shared_from_this<ClientImpl> {
 public:
  explicit ClientImpl(ClientOptions options);

  // Client::push: gated by the client's every_n / max_hz, then pacing (pacer.h); with
  // one label per row when `labels` is defined (row_labels_from_tensor).
  PushResult push(const std::string& name, const at::Tensor& tensor, const at::Tensor& labels = at::Tensor());
  // For tracks, which gate on their own (then pacing, when the daemon is behind: kGated):
  // copies `tensor` as a record of `kind`.
  // `transform` (may be null or empty) replaces the client's transform. Never throws.
  PushResult send(const std::string& name, const at::Tensor& tensor, wire::TensorKind kind, uint8_t render_hint,
                  const TransformFn* transform, const at::Tensor& labels = at::Tensor()) noexcept;

  // The first non-finite summary (at `step`): module tracks send whole tensors through
  // step + anomaly_capture_steps. Later calls change nothing.
  void non_finite_seen(int64_t step) {
    int64_t none = kNoCapture;
    const int64_t until = step + std::max<int64_t>(0, options_.anomaly_capture_steps());
    if (capture_until_.compare_exchange_strong(none, until)) core_.hold_evidence(step, until);  // held, not dropped
  }
  bool capture_started() const { return capture_until_.load(std::memory_order_relaxed) != kNoCapture; }
  bool capturing(int64_t step) const {
    const int64_t until = capture_until_.load(std::memory_order_relaxed);
    return until != kNoCapture && step <= until;
  }

  // A module tree record (module_tree_format.h) of step `step`, named after the track.
  // Never throws.
  PushResult send_summaries(const std::string& track, const std::string& payload, int64_t step) noexcept {
    return core_.send_summaries(track, payload, step);
  }
  PushResult send_module_tree(const std::string& track, const std::string& payload, int64_t step) noexcept {
    return core_.send_module_tree(track, payload, step);
  }

  // A push that was not admitted by a track's own gate; a push that failed outside send().
  void count_gated() { core_.count_gated(); }
  void count_refused(const std::string& name, const std::string& why) { core_.refuse(name, why); }
  // The hint set with Client::set_render_mode for `name` (0 when none).
  uint8_t render_hint_for(const std::string& name) { return core_.render_hint_for(name); }

  // Tracks: registered on creation, stopped when the client goes away; the step setters
  // end the current module calls of every track and tell them when the step changes.
  void add_track(const std::shared_ptr<Track>& track);
  // Ends the tracks' module calls; with `next`, the step changes to it.
  void end_module_calls(std::optional<int64_t> next) noexcept;
  // Stops every track (the Client is going away).
  void stop_tracks() noexcept;
  std::vector<TrackedStream> tracked() const;

  ClientCore& core() { return core_; }
  const ClientCore& core() const { return core_; }
  bool enabled() const { return core_.enabled(); }
  int64_t step() const { return core_.step(); }

  const ClientOptions options_;

 private:
  static constexpr int64_t kNoCapture = std::numeric_limits<int64_t>::min();
  std::atomic<int64_t> capture_until_{kNoCapture};
  PushResult stage(const std::string& name, const at::Tensor& input, wire::TensorKind kind, uint8_t render_hint,
                   const TransformFn& transform, const at::Tensor& labels = at::Tensor()) noexcept;
  std::vector<std::shared_ptr<Track>> live_tracks() const;

  ClientCore core_;
  mutable std::mutex tracks_mutex_;
  std::vector<std::weak_ptr<Track>> tracks_;
};

}  // namespace tensorscope
