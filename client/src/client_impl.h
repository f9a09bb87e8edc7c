// client_impl.h — ClientImpl: the state behind tensorscope::Client, shared with the
// tracks (track_model, track_layer, track_tensor) that send through it.
//
// Used inside the training process. Tracks hold a weak_ptr to it; the Client's
// destructor stops every track before the impl goes away. Thread safety: send(), push()
// and every accessor may be called from any thread, including from inside ATen's op
// callbacks and autograd hooks.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include <ATen/core/Tensor.h>

#include "connection.h"
#include "stream_gate.h"
#include "tensorscope/client_options.h"
#include "tensorscope/push_result.h"
#include "tensorscope/shared/wire_format.h"
#include "tensorscope/track_handle.h"

namespace tensorscope {

class Track;
class CudaStaging;

class ClientImpl : public std::enable_shared_from_this<ClientImpl> {
 public:
  explicit ClientImpl(ClientOptions options);
  ~ClientImpl();

  // Client::push: gated by the client's every_n / max_hz.
  PushResult push(const std::string& name, const at::Tensor& tensor);
  // For tracks, which gate on their own: copies `tensor` as a record of `kind`.
  // `transform` (may be null or empty) replaces the client's transform. Never throws.
  PushResult send(const std::string& name, const at::Tensor& tensor, wire::TensorKind kind,
                  uint8_t render_hint, const TransformFn* transform) noexcept;

  // A module tree record (module_tree_format.h) of step `step`, named after the track.
  // Never throws.
  PushResult send_module_tree(const std::string& track, const std::string& payload, int64_t step) noexcept;

  // A push that was not admitted by a track's own gate.
  void count_gated() { gated_.fetch_add(1, std::memory_order_relaxed); }
  // The hint set with Client::set_render_mode for `name` (0 when none).
  uint8_t render_hint_for(const std::string& name) { return gate_.render_hint(name); }

  // Tracks: registered on creation, stopped when the client goes away; the step setters
  // end the current module calls of every track and tell them when the step changes.
  void add_track(const std::shared_ptr<Track>& track);
  void end_module_calls(bool step_changes) noexcept;
  // Stops every track (the Client is going away).
  void stop_tracks() noexcept;
  std::vector<TrackedStream> tracked() const;

  void set_label(const std::string& text);
  ClientStats stats() const;
  bool connected() const;
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  int64_t step() const { return step_.load(std::memory_order_relaxed); }

  const ClientOptions options_;
  const int rank_;
  StreamGate gate_;
  std::atomic<bool> enabled_;
  std::atomic<int64_t> step_{0};
  std::atomic<uint64_t> refused_{0};

 private:
  PushResult stage(Connection::Active& active, const std::string& name, const at::Tensor& input,
                   wire::TensorKind kind, uint8_t render_hint, const TransformFn& transform,
                   std::optional<int64_t> step = std::nullopt);
  // Copies the payload into the ring (CPU tensors; CUDA tensors without CUDA staging).
  PushResult stage_in_ring(Connection::Active& active, const std::string& name,
                           const wire::RecordHeader& fields, const at::Tensor& tensor, uint64_t bytes);
  // Counts `result` of a push of `bytes` (locally and in the segment); logs refusals.
  PushResult counted(Connection::Active& active, const std::string& name, PushResult result,
                     const std::string& why, uint64_t bytes);
  PushResult refuse(Connection::Active& active, const std::string& name, const std::string& why);
  using SegmentCounter = std::atomic<uint64_t> wire::SegmentHeader::*;
  PushResult count(std::atomic<uint64_t>& local, PushResult result,
                   SegmentCounter mirrored = nullptr, Connection::Active* active = nullptr);
  std::vector<std::shared_ptr<Track>> live_tracks() const;
  // Checks shared by push and send; kPushed means "go on".
  PushResult precheck();

  const uint64_t fork_generation_;
  bool session_error_ = false;
#ifdef TENSORSCOPE_WITH_CUDA
  // Declared before connection_, so destroyed after it: the connection's retirement
  // waits for the pinned copies that still hold its segment.
  std::unique_ptr<CudaStaging> cuda_;
#else
  std::atomic<uint64_t> sync_cuda_copies_{0};
#endif
  std::unique_ptr<Connection> connection_;

  std::mutex label_mutex_;
  char label_[wire::kLabelBytes] = {};
  std::mutex refusal_mutex_;
  std::unordered_set<std::string> refused_streams_;

  mutable std::mutex tracks_mutex_;
  std::vector<std::weak_ptr<Track>> tracks_;

  std::atomic<uint64_t> pushed_{0}, gated_{0}, dropped_full_{0}, not_connected_{0}, bytes_{0};
};

}  // namespace tensorscope
