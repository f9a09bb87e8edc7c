#include "tensorscope/shared/ring_reader.h"

#include <algorithm>
#include <cstring>

#include "tensorscope/shared/device_pool_table.h"

namespace tensorscope {
namespace {

// A NUL-terminated, printable (no control bytes) string within `n` bytes.
bool is_clean_text(const char* text, size_t n, bool allow_empty) {
  const void* nul = std::memchr(text, '\0', n);
  if (nul == nullptr) return false;
  const size_t len = static_cast<size_t>(static_cast<const char*>(nul) - text);
  if (len == 0) return allow_empty;
  for (size_t i = 0; i < len; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

}  // namespace

uint64_t ring_tensor_bytes(const wire::RecordHeader& h) {
  return (h.flags & wire::kRecordDevicePayload) != 0 ? 0 : h.payload_bytes;
}

uint64_t row_labels_offset(const wire::RecordHeader& h) { return row_labels_offset(ring_tensor_bytes(h)); }

uint64_t ring_payload_bytes(const wire::RecordHeader& h) {
  return h.row_labels_bytes > 0 ? row_labels_offset(h) + h.row_labels_bytes : ring_tensor_bytes(h);
}

std::string validate_record_header(const wire::RecordHeader& h, uint64_t capacity, uint64_t data_tail,
                                   uint64_t data_head, uint64_t max_payload_bytes) {
  if (h.dtype == 0 || h.dtype > wire::kMaxDType) return "unknown dtype " + std::to_string(h.dtype);
  if (h.kind == 0 || h.kind > wire::kMaxTensorKind) return "unknown kind " + std::to_string(h.kind);
  if (h.ndim > wire::kMaxDims) return "ndim " + std::to_string(h.ndim) + " exceeds 8";
  if (h.render_hint > wire::kMaxRenderHint) return "unknown render hint " + std::to_string(h.render_hint);
  if (!is_clean_text(h.name, wire::kNameBytes, false)) return "stream name is empty, unterminated or has control bytes";
  if (!is_clean_text(h.device, wire::kDeviceBytes, false)) return "device is empty, unterminated or has control bytes";
  if (!is_clean_text(h.label, wire::kLabelBytes, true)) return "label is unterminated or has control bytes";
  uint64_t numel = 1;
  for (uint8_t d = 0; d < h.ndim; ++d) {
    if (h.shape[d] < 0) return "negative dimension";
    const auto dim = static_cast<uint64_t>(h.shape[d]);
    if (dim != 0 && numel > UINT64_MAX / dim) return "shape overflows";
    numel *= dim;
  }
  const uint64_t elem = wire::dtype_size(static_cast<wire::DType>(h.dtype));
  if (numel > UINT64_MAX / elem || numel * elem != h.payload_bytes) {
    return "payload size does not match shape and dtype";
  }
  if (h.payload_bytes > max_payload_bytes) {
    return "payload of " + std::to_string(h.payload_bytes) + " bytes exceeds the limit of " +
        std::to_string(max_payload_bytes);
  }
  if (h.kind == static_cast<uint8_t>(wire::TensorKind::kModuleTree) &&
      (h.dtype != static_cast<uint8_t>(wire::DType::kUInt8) || h.ndim != 1 ||
       (h.flags & wire::kRecordDevicePayload) != 0 || h.payload_bytes > wire::kMaxModuleTreeBytes)) {
    return "module tree record is not at most 1 MiB of uint8 text in the ring";
  }
  if (h.kind == static_cast<uint8_t>(wire::TensorKind::kSummary) &&
      (h.dtype != static_cast<uint8_t>(wire::DType::kUInt8) || h.ndim != 1 ||
       (h.flags & wire::kRecordDevicePayload) != 0 || h.payload_bytes > wire::kMaxSummaryBytes)) {
    return "summary record is not at most 2 MiB of uint8 in the ring";
  }
  if (h.row_labels_bytes > 0 && (!wire::is_tensor_kind(h.kind) || h.ndim == 0)) {
    return "row labels on a record that is not a tensor of at least one dimension";
  }
  if (h.row_labels_bytes > kMaxRowLabelsBytes) return "row labels section over its limit";
  if ((h.flags & wire::kRecordDevicePayload) != 0 && h.pool_index >= wire::kMaxDevicePools) {
    return "device payload names pool " + std::to_string(h.pool_index);
  }
  const uint64_t ring_bytes = ring_payload_bytes(h);
  const uint64_t padded = wire::align_up(ring_bytes, wire::kPayloadAlignment);
  if (ring_bytes > capacity || h.payload_position < data_tail || h.payload_position > data_head ||
      padded > data_head - h.payload_position || h.payload_position % capacity + padded > capacity) {
    return "payload position out of bounds";
  }
  return {};
}

RingReader::RingReader(SharedSegment* segment, uint64_t max_payload_bytes)
    : segment_(segment), header_(segment->header()), max_payload_bytes_(max_payload_bytes) {}

RingReader::Result RingReader::next(RecordView* out) {
  if (poisoned_) return Result::kPoisoned;
  const uint64_t position = header_->slot_tail.load(std::memory_order_relaxed);
  wire::RecordHeader* slot = segment_->slot(position);
  const uint64_t sequence = slot->sequence.load(std::memory_order_acquire);
  if (sequence == position) return Result::kEmpty;  // FREE or WRITING
  const uint64_t slots = segment_->slot_count();
  if (sequence == position + slots || sequence == position + slots + 1) {
    // A previous consumer freed this slot and died before advancing slot_tail: the
    // record was consumed already (the next lap may even be READY in it).
    header_->slot_tail.store(position + 1, std::memory_order_release);
    return Result::kSkipped;
  }
  if (sequence != position + 1) {
    poisoned_ = true;
    last_error_ = "slot " + std::to_string(position) + " has sequence " + std::to_string(sequence) + ", expected " +
        std::to_string(position) + " or " + std::to_string(position + 1);
    header_->dropped_invalid.fetch_add(1, std::memory_order_relaxed);
    header_->consumer_state.store(wire::kConsumerPoisoned, std::memory_order_release);
    return Result::kPoisoned;
  }
  // Private copy: the producer may scribble on shared memory while we validate.
  std::memcpy(static_cast<void*>(&out->header), static_cast<const void*>(slot), sizeof(wire::RecordHeader));
  const uint64_t data_tail = header_->data_tail.load(std::memory_order_relaxed);
  const uint64_t data_head = header_->data_head.load(std::memory_order_acquire);
  if (out->header.flags & wire::kRecordCancelled) {
    release_device_payload(out->header);
    free_slot(position, payload_end_if_in_bounds(out->header, data_tail, data_head));
    return Result::kSkipped;
  }
  last_error_ =
      validate_record_header(out->header, segment_->data_capacity(), data_tail, data_head, max_payload_bytes_);
  if (!last_error_.empty()) {
    header_->dropped_invalid.fetch_add(1, std::memory_order_relaxed);
    release_device_payload(out->header);
    free_slot(position, payload_end_if_in_bounds(out->header, data_tail, data_head));
    return Result::kDropped;
  }
  const bool on_device = (out->header.flags & wire::kRecordDevicePayload) != 0;
  const uint8_t* ring_bytes = segment_->data() + out->header.payload_position % segment_->data_capacity();
  out->payload = on_device ? nullptr : ring_bytes;
  out->row_labels.reset();
  if (out->header.row_labels_bytes > 0) {
    // Copied out of shared memory first: the producer may scribble on it while it is checked.
    const std::string section(reinterpret_cast<const char*>(ring_bytes + row_labels_offset(out->header)),
                              out->header.row_labels_bytes);
    auto labels = parse_row_labels(section, static_cast<uint64_t>(out->header.shape[0]));
    if (!labels) {
      last_error_ = labels.message();
      header_->dropped_invalid.fetch_add(1, std::memory_order_relaxed);
      release_device_payload(out->header);
      free_slot(position, payload_end_if_in_bounds(out->header, data_tail, data_head));
      return Result::kDropped;
    }
    out->row_labels = std::make_shared<const RowLabels>(std::move(*labels));
  }
  out->position = position;
  out->release_to =
      out->header.payload_position + wire::align_up(ring_payload_bytes(out->header), wire::kPayloadAlignment);
  out->owns_slot = true;
  return Result::kRecord;
}

void RingReader::release(const RecordView& view) {
  if (!view.owns_slot) return;
  header_->received.fetch_add(1, std::memory_order_relaxed);
  header_->bytes_received.fetch_add(view.header.payload_bytes, std::memory_order_relaxed);
  release_device_payload(view.header);
  free_slot(view.position, view.release_to);
}

void RingReader::drop(const RecordView& view, const std::string& why) {
  if (!view.owns_slot) return;
  last_error_ = why;
  header_->dropped_invalid.fetch_add(1, std::memory_order_relaxed);
  release_device_payload(view.header);
  free_slot(view.position, view.release_to);
}

void RingReader::release_device_payload(const wire::RecordHeader& h) {
  if ((h.flags & wire::kRecordDevicePayload) != 0) release_device_block(segment_->pool(0), h);
}

uint64_t RingReader::payload_end_if_in_bounds(const wire::RecordHeader& h, uint64_t data_tail,
                                              uint64_t data_head) const {
  const uint64_t capacity = segment_->data_capacity();
  const uint64_t ring_bytes = ring_payload_bytes(h);
  if (ring_bytes > capacity || h.payload_position < data_tail || h.payload_position > data_head) {
    return data_tail;
  }
  const uint64_t end = h.payload_position + wire::align_up(ring_bytes, wire::kPayloadAlignment);
  return end <= data_head ? end : data_tail;
}

void RingReader::free_slot(uint64_t position, uint64_t release_to) {
  // Catch-up: when every claimed slot has now been consumed, everything the producer
  // allocated is free, even space of records whose bounds could not be trusted. Loading
  // data_head (acquire) before slot_head makes this safe against a concurrent claim:
  // a claim that moved data_head past the loaded value also moved slot_head.
  const uint64_t data_head = header_->data_head.load(std::memory_order_acquire);
  const uint64_t slot_head = header_->slot_head.load(std::memory_order_acquire);
  if (slot_head == position + 1) release_to = std::max(release_to, data_head);
  if (release_to > header_->data_tail.load(std::memory_order_relaxed)) {
    header_->data_tail.store(release_to, std::memory_order_release);
  }
  segment_->slot(position)->sequence.store(position + segment_->slot_count(), std::memory_order_release);
  header_->slot_tail.store(position + 1, std::memory_order_release);
}

}  // namespace tensorscope
