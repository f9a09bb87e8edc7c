// client_core.cc — see client_core.h.
#include "client_core.h"

#include "tensorscope/base/clock.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core_option_table.h"
#include "cost_meter.h"
#include "record_fields.h"
#include "run_info.h"
#ifdef TENSORSCOPE_WITH_CUDA
#include "cuda_staging.h"
#include "tensorscope/shared/cuda_probe.h"
#else
namespace tensorscope {
class CudaStaging {};  // never made: ClientCore::cuda_ stays null
}  // namespace tensorscope
#endif
#include "tensorscope/base/logging.h"
#include "tensorscope/shared/runtime_paths.h"
#include "tensorscope/shared/status_query.h"
#include "tensorscope/base/posix_path.h"
#include "tensorscope/base/text_input.h"

namespace tensorscope {
namespace {

// LOCAL_WORLD_SIZE (torchrun): how many ranks share this machine's /dev/shm; 1 if unset.
uint64_t local_world_size_from_environment() {
  const char* env = std::getenv("LOCAL_WORLD_SIZE");
  if (env == nullptr || *env == '\0') return 1;
  char* end = nullptr;
  const long value = std::strtol(env, &end, 10);
  return *end == '\0' && value >= 1 && value <= 65536 ? static_cast<uint64_t>(value) : 1;
}

// Copies `text` into a fixed NUL-terminated field, cutting at a UTF-8 boundary.
void copy_field(char* field, size_t capacity, const std::string& text) {
  size_t n = std::min(text.size(), capacity - 1);
  while (n > 0 && n < text.size() && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  std::memcpy(field, text.data(), n);
  std::memset(field + n, 0, capacity - n);
}

}  // namespace

std::string stream_name_refusal(const std::string& name) {
  if (name.empty()) return "stream name is empty";
  if (name.size() >= wire::kNameBytes) {
    return "stream name " + quote_for_message(name, 32) + " is longer than " + std::to_string(wire::kNameBytes - 1) +
        " bytes";
  }
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) return "stream name " + quote_for_message(name, 32) + " has control characters";
  }
  return {};
}

const char* to_string(PushResult result) {
  const auto value = static_cast<size_t>(result);
  return value < kPushResultNames.size() ? kPushResultNames[value].data() : "unknown";  // (literals: NUL-terminated)
}

int rank_from_environment() {
  const char* env = std::getenv("RANK");
  if (env == nullptr || *env == '\0') return 0;
  char* end = nullptr;
  const long value = std::strtol(env, &end, 10);
  if (*end != '\0' || value < 0 || value > (1 << 30)) {
    TS_LOG_WARN("tensorscope client: ignoring RANK={} (not a rank); using 0", quote_for_message(env, 40));
    return 0;
  }
  return static_cast<int>(value);
}

ClientCore::ClientCore(CoreOptions options)
    : options_(std::move(options)),
      rank_(options_.rank.has_value() ? *options_.rank : rank_from_environment()),
      fork_generation_(fork_generation()),
      gate_(options_.every_n, options_.max_hz),
      tracked_gate_(1, options_.max_hz),
      enabled_(options_.enabled) {
  options_error_ = core_options_problem(options_);
  if (!options_error_.empty()) {
    TS_LOG_ERROR("tensorscope client: {}; every push will be refused", options_error_);
    return;
  }
#ifdef TENSORSCOPE_WITH_CUDA
  cuda_ = std::make_unique<CudaStaging>(options_.cuda_staging_bytes, options_.cuda_ipc);
#endif
  ConnectionConfig config;
  config.session = options_.session;
  config.runtime_dir = default_runtime_dir(options_.runtime_dir);
  config.shm_budget = options_.shm_budget;
  config.ring_slots = options_.ring_slots;
  config.rank = rank_;
  config.reconnect_interval_ms = options_.reconnect_interval_ms;  // within bounds: core_option_table.h
  config.connect_timeout_ms = options_.connect_timeout_ms;
  config.local_world_size = local_world_size_from_environment();
  if (options_.autostart) {
    config.autostart =
        AutostartConfig{options_.daemon_executable, options_.autostart_config, options_.autostart_output,
                        options_.session,           config.runtime_dir,        options_.autostart_idle_exit_ms};
  }
  config.run_info = collect_run_info(rank_, options_.framework_versions);
  // A folder is named from here (the daemon may run elsewhere); a session name as it is.
  config.reference =
      options_.reference.find('/') == std::string::npos ? options_.reference : absolute_path(options_.reference);
  connection_ = std::make_unique<Connection>(std::move(config));
}

ClientCore::~ClientCore() {
  // Summaries still held: sent, and read by the daemon, before the segment goes (bounded).
  if (held_count_.load(std::memory_order_relaxed) > 0 && connection_) wait_until_read(3000);
  // Where the outputs are, once, by the process that made the client (not a forked
  // DataLoader worker: it is not connected) and rank 0 only (the ranks share the folder).
  if (rank_ == 0 && connected()) say_where_outputs_are();
#ifdef TENSORSCOPE_WITH_CUDA
  // The daemon may still be copying blocks of our CUDA pools: let it finish (bounded)
  // before the connection goes and the pools are freed.
  if (cuda_ && connection_) cuda_->wait_released(*connection_, std::chrono::seconds(2));
#endif
}

PushResult ClientCore::precheck() {
  if (!enabled_.load(std::memory_order_relaxed)) return count(gated_, PushResult::kGated);
  if (!options_error_.empty()) return count(refused_, PushResult::kRefused);
  if (fork_generation() != fork_generation_) return count(not_connected_, PushResult::kNotConnected);
  return PushResult::kPushed;
}

PushResult ClientCore::ready() {
  const PushResult early = precheck();
  if (early != PushResult::kPushed) return early;
  if (!connection_->accepting()) return count(not_connected_, PushResult::kNotConnected);
  return PushResult::kPushed;
}

StreamGate::Admission ClientCore::admit(const std::string& name) {
  StreamGate::Admission admission;
  if (!enabled_.load(std::memory_order_relaxed)) {
    count(gated_, PushResult::kGated);
    return admission;
  }
  admission = gate_.admit(name, stride16());
  if (admission.admitted || admission.paced) pacer_.offer();
  if (!admission.admitted) {
    count(gated_, PushResult::kGated);
    if (admission.paced) count(paced_, PushResult::kGated, &wire::SegmentHeader::paced);
  }
  return admission;
}

StreamGate::Admission ClientCore::pace(const std::string& name) {
  if (is_evidence(step())) {  // the evidence of the first anomaly is not paced away
    StreamGate::Admission admission;
    admission.admitted = true;
    admission.render_hint = gate_.render_hint(name);
    return admission;
  }
  pacer_.offer();
  StreamGate::Admission admission = gate_.pace(name, stride16());
  if (!admission.admitted) {
    count(gated_, PushResult::kGated);
    count(paced_, PushResult::kGated, &wire::SegmentHeader::paced);
  }
  return admission;
}

StreamGate::Admission ClientCore::admit_tracked(const std::string& name) {
  StreamGate::Admission admission = pace(name);
  if (!admission.admitted) return admission;
  if (options_.max_hz > 0 && !tracked_gate_.admit(name).admitted) {
    admission.admitted = false;
    count(gated_, PushResult::kGated);
  }
  return admission;
}

PushResult ClientCore::send(const std::string& name, const TensorRef& tensor, wire::TensorKind kind,
                            uint8_t render_hint, std::optional<int64_t> step, const RowLabels* row_labels) noexcept {
  try {
    const PushResult early = precheck();
    if (early != PushResult::kPushed) return early;
    Connection::Guard guard = connection_->acquire();
    if (!guard) return count(not_connected_, PushResult::kNotConnected);
    try_send_held(*guard.operator->());
    return stage(*guard.operator->(), name, tensor, kind, render_hint, step, row_labels);
  } catch (...) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return PushResult::kRefused;
  }
}

PushResult ClientCore::send_summaries(const std::string& track, const std::string& payload, int64_t step) noexcept {
  try {
    const PushResult early = precheck();
    if (early != PushResult::kPushed) return early;
    Connection::Guard guard = connection_->acquire();
    std::lock_guard<std::mutex> lock(held_mutex_);
    if (!guard) {
      // A daemon that went away (restarted, killed) after one was connected: held for the
      // next. Before any connection there is nobody to hold them for.
      if (connection_->connections() == 0) return count(not_connected_, PushResult::kNotConnected);
      held_.hold(track, step, payload);
      held_count_.store(held_.size() + held_tensors_.size(), std::memory_order_relaxed);
      summaries_lost_.store(held_.lost(), std::memory_order_relaxed);
      return PushResult::kPushed;
    }
    send_held(*guard.operator->());  // (drops them for a daemon that does not read summaries)
    if (guard->is_attached() && !guard->summaries) return PushResult::kGated;
    PushResult result = PushResult::kDroppedFull;
    if (held_.empty()) result = send_bytes(*guard.operator->(), track, payload, wire::TensorKind::kSummary, step);
    if (result == PushResult::kDroppedFull) {
      held_.hold(track, step, payload);
      result = PushResult::kPushed;
    }
    held_count_.store(held_.size() + held_tensors_.size(), std::memory_order_relaxed);
    summaries_lost_.store(held_.lost(), std::memory_order_relaxed);
    return result;
  } catch (...) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return PushResult::kRefused;
  }
}

void ClientCore::send_held(Connection::Active& active) {
  // A daemon that does not read summaries (an older one) will not take them: they go.
  if (active.is_attached() && !active.summaries) held_.drop_all();
  while (!held_.empty()) {
    const HeldSummaries::Record& r = held_.oldest();
    if (send_bytes(active, r.track, r.payload, wire::TensorKind::kSummary, r.step) == PushResult::kDroppedFull) break;
    held_.pop_oldest();  // sent, or refused and counted
  }
  while (held_.empty() && !held_tensors_.empty()) {
    HeldTensor& t = held_tensors_.front();
    const uint64_t bytes = t.payload.size();
    if (bytes > active.writer->max_payload_bytes()) {  // a smaller segment than it was held for
      dropped_full_.fetch_add(1, std::memory_order_relaxed);
      evidence_lost_.fetch_add(1, std::memory_order_relaxed);
    } else {
      RingWriter::Reservation r;
      if (active.writer->reserve(bytes, &r, RingWriter::Claim::kAnySpace) != RingWriter::ReserveResult::kOk) break;
      copy_record_fields(*t.fields, r.header);
      put_payload_sizes(r, bytes, bytes, nullptr);
      if (bytes > 0) std::memcpy(r.payload, t.payload.data(), bytes);
      active.writer->commit(r);
      counted(active, std::string(), PushResult::kPushed, {}, bytes);
    }
    held_tensor_bytes_ -= bytes;
    held_tensors_.pop_front();
  }
  held_count_.store(held_.size() + held_tensors_.size(), std::memory_order_relaxed);
  evidence_held_.store(held_tensors_.size(), std::memory_order_relaxed);
  summaries_lost_.store(held_.lost(), std::memory_order_relaxed);
}

void ClientCore::try_send_held(Connection::Active& active) {
  if (held_count_.load(std::memory_order_relaxed) == 0) return;
  std::unique_lock<std::mutex> lock(held_mutex_, std::try_to_lock);
  if (lock.owns_lock()) send_held(active);
}

void ClientCore::hold_evidence(int64_t from_step, int64_t until_step) {
  int64_t none = std::numeric_limits<int64_t>::max();
  if (evidence_from_.compare_exchange_strong(none, from_step, std::memory_order_relaxed)) {
    evidence_until_.store(until_step, std::memory_order_relaxed);
  }
}

bool ClientCore::hold_tensor(const wire::RecordHeader& fields, const TensorRef& tensor, uint64_t bytes) {
  if (bytes > kHeldEvidenceBytes) return false;
  HeldTensor t;
  t.fields = std::make_unique<wire::RecordHeader>();
  copy_record_fields(fields, t.fields.get());
  t.payload.resize(bytes);
  if (bytes > 0) copy_strided(tensor, t.payload.data(), bytes);
  std::lock_guard<std::mutex> lock(held_mutex_);
  while (held_tensor_bytes_ + bytes > kHeldEvidenceBytes && !held_tensors_.empty()) {
    held_tensor_bytes_ -= held_tensors_.front().payload.size();
    held_tensors_.pop_front();
    dropped_full_.fetch_add(1, std::memory_order_relaxed);
    evidence_lost_.fetch_add(1, std::memory_order_relaxed);
  }
  held_tensor_bytes_ += bytes;
  held_tensors_.push_back(std::move(t));
  held_count_.store(held_.size() + held_tensors_.size(), std::memory_order_relaxed);
  evidence_held_.store(held_tensors_.size(), std::memory_order_relaxed);
  return true;
}

bool ClientCore::wait_until_read(int timeout_ms) noexcept {
  try {
    if (!options_error_.empty() || fork_generation() != fork_generation_) return false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0, timeout_ms));
    uint64_t serial = 0, head = 0;
    bool target = false;  // head is what to wait for: this segment's records once none is held
    while (true) {
      {
        Connection::Guard guard = connection_->acquire();
        if (guard && guard->is_attached()) {
          wire::SegmentHeader* h = guard->segment->header();
          if (guard->serial != serial) {
            serial = guard->serial;
            target = false;
          }
          if (held_count_.load(std::memory_order_relaxed) > 0) {
            std::lock_guard<std::mutex> lock(held_mutex_);
            send_held(*guard.operator->());
          }
          if (!target && held_count_.load(std::memory_order_relaxed) == 0) {
            head = h->slot_head.load(std::memory_order_acquire);
            target = true;
          }
          if (target && h->slot_tail.load(std::memory_order_acquire) >= head) return true;
        }
      }
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  } catch (...) {
    return false;
  }
}

PushResult ClientCore::send_module_tree(const std::string& track, const std::string& payload, int64_t step) noexcept {
  try {
    const PushResult early = precheck();
    if (early != PushResult::kPushed) return early;
    Connection::Guard guard = connection_->acquire();
    if (!guard) return count(not_connected_, PushResult::kNotConnected);
    // A daemon that would drop it: not sent, not counted (before one attached: sent).
    if (guard->is_attached() && !guard->module_tree) return PushResult::kGated;
    try_send_held(*guard.operator->());
    return send_bytes(*guard.operator->(), track, payload, wire::TensorKind::kModuleTree, step);
  } catch (...) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return PushResult::kRefused;
  }
}

PushResult ClientCore::send_bytes(Connection::Active& active, const std::string& name, const std::string& payload,
                                  wire::TensorKind kind, int64_t step) {
  TensorRef bytes;  // copied into the ring before this returns
  bytes.data = payload.data();
  bytes.dtype = wire::DType::kUInt8;
  bytes.ndim = 1;
  bytes.shape[0] = static_cast<int64_t>(payload.size());
  bytes.strides[0] = 1;
  return stage(active, name, bytes, kind, 0, step, nullptr);
}

PushResult ClientCore::refuse(const std::string& name, const std::string& why) noexcept {
  try {
    return refuse(nullptr, name, why);
  } catch (...) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return PushResult::kRefused;
  }
}

PushResult ClientCore::stage(Connection::Active& active, const std::string& name, const TensorRef& tensor,
                             wire::TensorKind kind, uint8_t render_hint, std::optional<int64_t> step,
                             const RowLabels* row_labels) {
  std::string refusal = stream_name_refusal(name);
  if (refusal.empty()) refusal = tensor_ref_refusal(tensor);
  uint64_t bytes = 0;
  if (refusal.empty()) {
    bytes = element_count(tensor) * wire::dtype_size(tensor.dtype);
    if (options_.max_tensor_bytes > 0 && bytes > options_.max_tensor_bytes) {
      refusal = "tensor of " + std::to_string(bytes) + " bytes exceeds max_tensor_bytes (" +
          std::to_string(options_.max_tensor_bytes) + ")";
    }
  }
  std::string section;  // the row labels, encoded
  if (refusal.empty() && row_labels != nullptr) {
    if (tensor.ndim == 0 || static_cast<uint64_t>(tensor.shape[0]) != row_labels->values.size()) {
      refusal = std::to_string(row_labels->values.size()) + " labels for a tensor of " +
          (tensor.ndim == 0 ? std::string("no rows (0-d)") : std::to_string(tensor.shape[0]) + " rows") +
          ": give one label per row (the first dimension)";
    } else if (auto encoded = encode_row_labels(*row_labels); !encoded) {
      refusal = "labels: " + encoded.message();
    } else {
      section = std::move(*encoded);
    }
  }
  if (!refusal.empty()) return refuse(&active, name, refusal);
  const std::string* labels = row_labels != nullptr ? &section : nullptr;

  // Everything that can fail or throw happens before the reservation: between
  // reserve() and commit()/cancel() only plain stores and the guarded copy run, so a
  // claimed slot is always published.
  wire::RecordHeader fields;
  fields.step = step ? *step : step_.load(std::memory_order_relaxed);
  fields.timestamp_unix_ns = unix_time_ns();
  fields.rank = rank_;
  fields.dtype = static_cast<uint8_t>(tensor.dtype);
  fields.kind = static_cast<uint8_t>(kind);
  fields.ndim = static_cast<uint8_t>(tensor.ndim);
  fields.render_hint = render_hint;
  for (size_t d = 0; d < wire::kMaxDims; ++d) {
    fields.shape[d] = static_cast<int>(d) < tensor.ndim ? tensor.shape[d] : 0;
  }
  copy_field(fields.name, wire::kNameBytes, name);
  copy_field(fields.device, wire::kDeviceBytes, device_name(tensor));
  {
    std::lock_guard<std::mutex> lock(label_mutex_);
    std::memcpy(fields.label, label_, wire::kLabelBytes);
  }

  if (tensor.device == DeviceType::kCuda && bytes > 0) {
#ifdef TENSORSCOPE_WITH_CUDA
    const CudaStaging::Outcome outcome = cuda_->push(*connection_, active, fields, tensor, bytes, labels);
    if (!outcome.fallback) return tell_pacer(active, kind, counted(active, name, outcome.result, outcome.why, bytes));
      // else CudaStaging noted why: a synchronous copy below
#else
    if (tensor.ordering == nullptr) return refuse(&active, name, "tensorscope was built without CUDA support");
    count_sync_copy("tensorscope was built without CUDA support");
#endif
  }
  return tell_pacer(active, kind, stage_in_ring(active, name, fields, tensor, bytes, labels));
}

PushResult ClientCore::tell_pacer(Connection::Active& active, wire::TensorKind kind, PushResult result) {
  if (!options_.pacing || !wire::is_tensor_kind(static_cast<uint8_t>(kind)) || !active.is_attached()) return result;
  pacer_.use_connection(active.serial);
  const uint64_t oldest = active.writer->oldest_unread_unix_ns(), now_ns = unix_time_ns();
  const int64_t backlog_ms = oldest == 0 || oldest > now_ns ? 0 : static_cast<int64_t>((now_ns - oldest) / 1000000);
  pacer_.observe(backlog_ms, active.writer->fill(), result == PushResult::kDroppedFull,
                 active.segment->header()->slot_tail.load(std::memory_order_relaxed), steady_time_ms());
  active.segment->header()->pace_stride16.store(pacer_.stride16(), std::memory_order_relaxed);
  return result;
}

PushResult ClientCore::counted(Connection::Active& active, const std::string& name, PushResult result,
                               const std::string& why, uint64_t bytes) {
  switch (result) {
    case PushResult::kPushed:
      bytes_.fetch_add(bytes, std::memory_order_relaxed);
      active.segment->header()->bytes_pushed.fetch_add(bytes, std::memory_order_relaxed);
      return count(pushed_, PushResult::kPushed, &wire::SegmentHeader::pushed, &active);
    case PushResult::kDroppedFull:
      return count(dropped_full_, PushResult::kDroppedFull, &wire::SegmentHeader::dropped_full, &active);
    case PushResult::kNotConnected: return count(not_connected_, PushResult::kNotConnected);
    case PushResult::kGated: return count(gated_, PushResult::kGated);
    case PushResult::kRefused: break;
  }
  return refuse(&active, name, why);
}

PushResult ClientCore::stage_in_ring(Connection::Active& active, const std::string& name,
                                     const wire::RecordHeader& fields, const TensorRef& tensor, uint64_t bytes,
                                     const std::string* row_labels) {
  const uint64_t ring_bytes = record_ring_bytes(bytes, row_labels);
  {
    const uint64_t limit = active.writer->max_payload_bytes();
    if (ring_bytes > limit) {
      return refuse(&active, name,
                    "tensor of " + std::to_string(bytes) + " bytes exceeds the shared-memory ring's " +
                        std::to_string(limit) + " bytes (option shm_budget)");
    }
  }
  RingWriter::Reservation r;
  // Tensors leave room for the small records (summaries, module tree) behind them.
  const bool small = fields.kind == static_cast<uint8_t>(wire::TensorKind::kSummary) ||
      fields.kind == static_cast<uint8_t>(wire::TensorKind::kModuleTree);
  const auto reserved =
      active.writer->reserve(ring_bytes, &r, small ? RingWriter::Claim::kAnySpace : RingWriter::Claim::kLeaveHeadroom);
  if (reserved == RingWriter::ReserveResult::kTooLarge) {
    return refuse(&active, name, "tensor does not fit in the shared-memory ring");
  }
  if (reserved == RingWriter::ReserveResult::kFull) {
    // A summary record is held by send_summaries, not dropped: not counted here.
    if (fields.kind == static_cast<uint8_t>(wire::TensorKind::kSummary)) return PushResult::kDroppedFull;
    // Evidence of the first anomaly: held, sent when there is room.
    if (wire::is_tensor_kind(fields.kind) && row_labels == nullptr && tensor.device == DeviceType::kCpu &&
        is_evidence(fields.step) && hold_tensor(fields, tensor, bytes)) {
      return PushResult::kPushed;
    }
    return count(dropped_full_, PushResult::kDroppedFull, &wire::SegmentHeader::dropped_full, &active);
  }
  copy_record_fields(fields, r.header);
  put_payload_sizes(r, bytes, bytes, row_labels);
  if (tensor.device == DeviceType::kCuda && bytes > 0) {
    // A device tensor without staging: a synchronous copy.
#ifdef TENSORSCOPE_WITH_CUDA
    const std::string failed = tensor.ordering != nullptr ? tensor.ordering->copy_to_host(r.payload, bytes)
                                                          : CudaStaging::copy_to_host_now(tensor, r.payload, bytes);
#else
    const std::string failed = tensor.ordering->copy_to_host(r.payload, bytes);
#endif
    if (!failed.empty()) {
      active.writer->cancel(r);
      return refuse(&active, name, "copy failed: " + failed);
    }
  } else {
    copy_strided(tensor, r.payload, bytes);
  }
  active.writer->commit(r);
  return counted(active, name, PushResult::kPushed, {}, bytes);
}

PushResult ClientCore::refuse(Connection::Active* active, const std::string& name, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(refusal_mutex_);
    if (refused_streams_.size() < 1024 && refused_streams_.insert(name).second) {
      TS_LOG_WARN("tensorscope client: push of {} refused: {}", quote_for_message(name, 120), why);
    }
  }
  return count(refused_, PushResult::kRefused, &wire::SegmentHeader::refused, active);
}

PushResult ClientCore::count(std::atomic<uint64_t>& local, PushResult result, SegmentCounter mirrored,
                             Connection::Active* active) {
  local.fetch_add(1, std::memory_order_relaxed);
  if (mirrored != nullptr) {
    if (active != nullptr) {
      (active->segment->header()->*mirrored).fetch_add(1, std::memory_order_relaxed);
    } else if (connection_ && fork_generation() == fork_generation_) {
      Connection::Guard guard = connection_->acquire();
      if (guard) (guard->segment->header()->*mirrored).fetch_add(1, std::memory_order_relaxed);
    }
  }
  return result;
}

bool ClientCore::cuda_staging_usable() const {
#ifdef TENSORSCOPE_WITH_CUDA
  return cuda_probe().usable;
#else
  return false;
#endif
}

void ClientCore::count_sync_copy(const std::string& why) {
  sync_copies_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(sync_note_mutex_);
  if (sync_note_.empty()) sync_note_ = why;
}

void ClientCore::set_label(const std::string& text) {
  std::lock_guard<std::mutex> lock(label_mutex_);
  copy_field(label_, wire::kLabelBytes, text);
  for (char& c : label_) {
    if (c != '\0' && (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)) c = ' ';
  }
}

ClientStats ClientCore::stats() const {
  ClientStats s;
  // Pushes that waited in a segment no daemon attached to were not sent after all.
  const uint64_t lost = connection_ ? connection_->unattached_lost() : 0;
  const uint64_t lost_bytes = connection_ ? connection_->unattached_lost_bytes() : 0;
  s.pushed = pushed_.load(std::memory_order_relaxed) - lost;
  s.gated = gated_.load(std::memory_order_relaxed);
  s.paced = paced_.load(std::memory_order_relaxed);
  s.pace_stride = static_cast<double>(stride16()) / Pacer::kOne;
  if (s.pace_stride > 1) {
    char text[160];
    std::snprintf(text, sizeof text,
                  "daemon-limited: one call in %.3g of each stream is sent (the daemon is behind; the others "
                  "are not copied)",
                  s.pace_stride);
    s.pace_note = text;
  }
  s.dropped_full = dropped_full_.load(std::memory_order_relaxed);
  s.not_connected = not_connected_.load(std::memory_order_relaxed) + lost;
  s.refused = refused_.load(std::memory_order_relaxed);
  s.bytes = bytes_.load(std::memory_order_relaxed) - lost_bytes;
  s.evidence_held = evidence_held_.load(std::memory_order_relaxed);
  s.evidence_lost = evidence_lost_.load(std::memory_order_relaxed);
  s.summaries_held = held_count_.load(std::memory_order_relaxed) -
      std::min<uint64_t>(s.evidence_held, held_count_.load(std::memory_order_relaxed));
  s.summaries_lost = summaries_lost_.load(std::memory_order_relaxed);
  s.connected = connected();
  s.connections = connection_ ? connection_->connections() : 0;
  if (connection_ && fork_generation() == fork_generation_) {  // a forked child must not take its lock
    s.dropped_by_daemon = connection_->dropped_by_daemon();
    Connection::Notes notes = connection_->notes();
    s.connection_note = s.connected ? std::string() : std::move(notes.state);
    s.shm_bytes = notes.segment_bytes;
    s.shm_note = std::move(notes.shm_note);
    s.autostart = std::move(notes.autostart);
  } else if (!options_error_.empty()) {
    s.connection_note = options_error_ + ": every push is refused";
  } else if (connection_) {
    s.connection_note =
        "this process is a fork of the one that made the client: it sends nothing (its pushes count as "
        "not_connected); make a Client in this process to send from it";
  }
#ifdef TENSORSCOPE_WITH_CUDA
  if (cuda_) cuda_->fill_stats(&s);
#endif
  if (sync_copies_.load(std::memory_order_relaxed) > 0 && s.cuda_transport.empty()) {
    std::lock_guard<std::mutex> lock(sync_note_mutex_);
    s.cuda_transport = "sync-copy";
    s.cuda_note = sync_note_;
  }
  s.own_time = own_cost().last_fraction();
  s.own_time_note = own_cost().note();
  return s;
}

void ClientCore::say_where_outputs_are() const {
  try {  // (from the destructor: nothing escapes)
    auto status = query_daemon_status(default_runtime_dir(options_.runtime_dir), options_.session, kSayWhereMs);
    if (!status || !status->contains("output_dir") || !(*status)["output_dir"].is_string()) return;
    const std::string dir = (*status)["output_dir"].get<std::string>();
    TS_LOG_INFO("tensorscope: outputs in {}; view them with: tensorscope view --dir {}", dir, shell_word(dir));
  } catch (...) {}
}

bool ClientCore::connected() const {
  return connection_ && fork_generation() == fork_generation_ && connection_->connected();
}

}  // namespace tensorscope
