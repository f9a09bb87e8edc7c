// client_core.h — ClientCore: the framework-neutral heart of a tensorscope client. It
// owns the connection to the daemon, the per-stream gate, the counters, and the copy of
// a TensorRef into the shared-memory ring (CPU tensors) or a CUDA staging pool.
//
// Used inside the training process by the libtorch client (ClientImpl: at::Tensor ->
// TensorRef, module tracking) and the Python package (python/native: DLPack capsules ->
// TensorRef). Neither libtorch nor Python is linked here. Nothing here throws into the
// training program, blocks on the daemon, or waits for a device.
// Thread safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "connection.h"
#include "held_summaries.h"
#include "pacer.h"
#include "stream_gate.h"
#include "tensor_ref.h"
#include "tensorscope/client_option_list.h"
#include "tensorscope/push_result.h"
#include "tensorscope/shared/row_labels_format.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope {

class CudaStaging;

// What a client does: every option of the list (tensorscope/client_option_list.h, with
// each one's meaning and bounds; the C++ ClientOptions has them and a transform), plus
// the versions named in run_info.
struct CoreOptions {
#define TENSORSCOPE_CORE_OPTION(Type, name, default_value, rule) Type name = default_value;
  TENSORSCOPE_CLIENT_OPTIONS(TENSORSCOPE_CORE_OPTION)  // tensorscope/client_option_list.h
#undef TENSORSCOPE_CORE_OPTION
  nlohmann::json framework_versions = nlohmann::json::object();  // {"libtorch": "1.13.1"}, ...
};

// The rank a client without an explicit one uses: $RANK, else 0.
int rank_from_environment();

// Why `name` cannot be a stream name (empty, 128 bytes or longer, control characters such
// as NUL or the ESC of terminal escapes), or "" when it can. Pushes under such a name are
// refused; track_* refuse such a track name at the call. The Python package asks the
// same through the extension.
std::string stream_name_refusal(const std::string& name);

class ClientCore {
 public:
  explicit ClientCore(CoreOptions options);
  ~ClientCore();
  ClientCore(const ClientCore&) = delete;
  ClientCore& operator=(const ClientCore&) = delete;

  // The client's own gate (every_n / max_hz per stream, then pacing: pacer.h) for an
  // explicit push; a call that is not admitted is counted as gated (and as paced when
  // pacing alone held it back). Also checks enabled().
  StreamGate::Admission admit(const std::string& name);

  // A tracked tensor's gate (a track gates its steps itself): pacing, then max_hz per
  // stream, kept apart from admit()'s call counts; a call not admitted is counted as
  // gated (and paced). Also returns the stream's render hint.
  StreamGate::Admission admit_tracked(const std::string& name);
  // Pacing alone, for a tensor whose track already applied its own gates (the libtorch
  // client's tracks); counted as admit_tracked counts. The steps of hold_evidence are not
  // paced.
  StreamGate::Admission pace(const std::string& name);

  // Whether a send now would go ahead: kPushed when enabled and connected, else the
  // outcome, counted (kGated, kRefused for a bad session, kNotConnected). Lets a
  // framework skip its own work (a transform, a conversion) for a push that cannot be
  // sent; send() checks again.
  PushResult ready();

  // Copies `tensor` as a record of `kind` named `name`, stamped with `step` (default: the
  // client's step), with one label per row when `row_labels` is given (its count must be
  // the tensor's first dimension). Checks enabled, the session, the name, the tensor, the
  // labels and the sizes; every outcome is counted. Never throws.
  PushResult send(const std::string& name, const TensorRef& tensor, wire::TensorKind kind, uint8_t render_hint,
                  std::optional<int64_t> step = std::nullopt, const RowLabels* row_labels = nullptr) noexcept;

  // A module tree record (module_tree_format.h) of step `step`, named after the track.
  PushResult send_module_tree(const std::string& track, const std::string& payload, int64_t step) noexcept;
  // A summary record (summary_format.h) of step `step`, named after the track; not sent
  // (kGated, not counted) to a daemon that does not read them. Findings are not dropped
  // for a full ring: a record the ring cannot take now (or while the daemon is away after
  // one was connected) is held (held_summaries.h) and sent, oldest first, before anything
  // newer, when there is room; kPushed then means "sent or held to be sent".
  PushResult send_summaries(const std::string& track, const std::string& payload, int64_t step) noexcept;

  // The steps whose whole tensors are the evidence of the client's first anomaly (its
  // capture window after the first NaN: `from_step` through `until_step`). A CPU tensor of
  // those steps that a full ring refuses is held (at most kHeldEvidenceBytes in all; past
  // it the oldest goes, counted in evidence_lost) and sent after the held summaries, in
  // order, when there is room; push returns kPushed for it. Later calls change nothing.
  void hold_evidence(int64_t from_step, int64_t until_step);

  // Waits, at most `timeout_ms`, until the daemon has read every record this client sent
  // (the held summaries sent first): what the caller pushed before is then in the
  // daemon's tables and anomaly reports. False on timeout or without a daemon. Blocks the
  // calling thread (never called from a push).
  bool wait_until_read(int timeout_ms) noexcept;

  // A push refused before it reached send() (a string, a complex tensor, a failed
  // transform): counted, and logged once per stream. Never throws.
  PushResult refuse(const std::string& name, const std::string& why) noexcept;
  // A push that was not admitted by a track's own gate.
  void count_gated() { gated_.fetch_add(1, std::memory_order_relaxed); }

  // Whether a CUDA tensor on `device_index` can be staged without a host copy; when not,
  // the framework copies it to the host itself and calls count_sync_copy(why).
  bool cuda_staging_usable() const;
  void count_sync_copy(const std::string& why);

  void set_render_hint(const std::string& name, uint8_t hint) { gate_.set_render_hint(name, hint); }
  uint8_t render_hint_for(const std::string& name) { return gate_.render_hint(name); }

  void set_label(const std::string& text);
  void set_enabled(bool enabled) { enabled_.store(enabled, std::memory_order_relaxed); }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  int64_t step() const { return step_.load(std::memory_order_relaxed); }
  void set_step(int64_t step) { step_.store(step, std::memory_order_relaxed); }
  // The step after this one; stays at INT64_MAX (never wraps to a negative step).
  int64_t next_step() {
    int64_t s = step_.load(std::memory_order_relaxed);
    while (s < std::numeric_limits<int64_t>::max() &&
           !step_.compare_exchange_weak(s, s + 1, std::memory_order_relaxed)) {}
    return s < std::numeric_limits<int64_t>::max() ? s + 1 : s;
  }

  ClientStats stats() const;
  bool connected() const;
  int rank() const { return rank_; }
  const CoreOptions& options() const { return options_; }

 private:
  // A payload that is not a tensor (a module tree, summaries) as a uint8 record.
  PushResult send_bytes(Connection::Active& active, const std::string& name, const std::string& payload,
                        wire::TensorKind kind, int64_t step);
  PushResult stage(Connection::Active& active, const std::string& name, const TensorRef& tensor, wire::TensorKind kind,
                   uint8_t render_hint, std::optional<int64_t> step, const RowLabels* row_labels);
  PushResult stage_in_ring(Connection::Active& active, const std::string& name, const wire::RecordHeader& fields,
                           const TensorRef& tensor, uint64_t bytes, const std::string* row_labels);
  PushResult counted(Connection::Active& active, const std::string& name, PushResult result, const std::string& why,
                     uint64_t bytes);
  // Tells the pacer what a tensor push to an attached daemon found (the ring's backlog,
  // or a full ring) and publishes the stride in the segment; returns `result`.
  PushResult tell_pacer(Connection::Active& active, wire::TensorKind kind, PushResult result);
  uint32_t stride16() const { return options_.pacing ? pacer_.stride16() : Pacer::kOne; }
  PushResult refuse(Connection::Active* active, const std::string& name, const std::string& why);
  using SegmentCounter = std::atomic<uint64_t> wire::SegmentHeader::*;
  PushResult count(std::atomic<uint64_t>& local, PushResult result, SegmentCounter mirrored = nullptr,
                   Connection::Active* active = nullptr);
  PushResult precheck();
  // Sends held summaries, then held evidence, oldest first, while the ring takes them;
  // with held_mutex_ held.
  void send_held(Connection::Active& active);
  // Whether a tensor record of `step` is evidence (hold_evidence).
  bool is_evidence(int64_t step) const {
    return step >= evidence_from_.load(std::memory_order_relaxed) &&
        step <= evidence_until_.load(std::memory_order_relaxed);
  }
  // Holds a copy of a CPU tensor record the ring refused; false when it cannot be held.
  bool hold_tensor(const wire::RecordHeader& fields, const TensorRef& tensor, uint64_t bytes);
  // send_held when summaries are held and nobody else is sending them (never waits).
  void try_send_held(Connection::Active& active);
  // Logs the session's folder (its daemon's status says it, within kSayWhereMs: a daemon
  // just started on a loaded machine can take more than a second) and the command that
  // views it.
  static constexpr int kSayWhereMs = 3000;
  void say_where_outputs_are() const;

  const CoreOptions options_;
  const int rank_;
  const uint64_t fork_generation_;
  StreamGate gate_;
  StreamGate tracked_gate_;  // every_n 1: max_hz only
  std::atomic<bool> enabled_;
  std::atomic<int64_t> step_{0};
  std::string options_error_;  // an option out of its bounds (core_option_table.h): every push is refused
  // Declared before connection_, so destroyed after it: the connection's retirement
  // waits for the pinned copies that still hold its segment. Null in builds without
  // CUDA (declared in every build: the class has one layout for every includer).
  std::unique_ptr<CudaStaging> cuda_;
  std::unique_ptr<Connection> connection_;

  std::mutex label_mutex_;
  char label_[wire::kLabelBytes] = {};
  std::mutex refusal_mutex_;
  std::unordered_set<std::string> refused_streams_;
  mutable std::mutex sync_note_mutex_;
  std::string sync_note_;

  // Summary records a full ring (or a daemon away) could not take yet.
  static constexpr uint64_t kHeldSummaryBytes = 32ull << 20;
  std::mutex held_mutex_;
  HeldSummaries held_{kHeldSummaryBytes};
  // Evidence tensors a full ring refused (hold_evidence), oldest first, under held_mutex_.
  struct HeldTensor {
    std::unique_ptr<wire::RecordHeader> fields;  // (not copyable: its sequence is atomic)
    std::string payload;                         // the tensor's bytes, contiguous
  };
  static constexpr uint64_t kHeldEvidenceBytes = 256ull << 20;
  std::deque<HeldTensor> held_tensors_;
  uint64_t held_tensor_bytes_ = 0;
  std::atomic<int64_t> evidence_from_{std::numeric_limits<int64_t>::max()};
  std::atomic<int64_t> evidence_until_{std::numeric_limits<int64_t>::min()};
  std::atomic<uint64_t> evidence_held_{0}, evidence_lost_{0};
  std::atomic<size_t> held_count_{0};        // held_.size() + held_tensors_.size(), read without the mutex
  std::atomic<uint64_t> summaries_lost_{0};  // held_.lost()

  std::atomic<uint64_t> pushed_{0}, gated_{0}, dropped_full_{0}, not_connected_{0}, refused_{0}, bytes_{0},
      sync_copies_{0}, paced_{0};
  Pacer pacer_;
};

}  // namespace tensorscope
