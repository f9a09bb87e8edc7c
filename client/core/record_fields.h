// record_fields.h — copying a record's descriptive fields into a claimed ring slot, and
// its sizes and row labels section (row_labels_format.h).
//
// Used by ClientCore and CudaStaging between a ring reservation and its commit: plain
// stores only. Thread safety: a free function over memory the caller owns.
#pragma once

#include <cstring>
#include <string>

#include "tensorscope/shared/ring_writer.h"
#include "tensorscope/shared/row_labels_format.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope {

// Copies every descriptive field of a record (step, timestamp, rank, dtype, kind, ndim,
// render hint, shape, name, device, label) from `from` into a claimed slot.
inline void copy_record_fields(const wire::RecordHeader& from, wire::RecordHeader* to) {
  to->step = from.step;
  to->timestamp_unix_ns = from.timestamp_unix_ns;
  to->rank = from.rank;
  to->dtype = from.dtype;
  to->kind = from.kind;
  to->ndim = from.ndim;
  to->render_hint = from.render_hint;
  std::memcpy(to->shape, from.shape, sizeof(to->shape));
  std::memcpy(to->name, from.name, sizeof(to->name));
  std::memcpy(to->device, from.device, sizeof(to->device));
  std::memcpy(to->label, from.label, sizeof(to->label));
}

// Ring bytes of a record whose tensor takes `tensor_ring_bytes` there (0 for a device
// payload), and its row labels section (encoded) after them when there is one.
inline uint64_t record_ring_bytes(uint64_t tensor_ring_bytes, const std::string* row_labels) {
  return row_labels == nullptr ? tensor_ring_bytes : row_labels_offset(tensor_ring_bytes) + row_labels->size();
}

// Sets a claimed slot's payload_bytes (the tensor's) and writes the row labels section,
// when there is one, after the tensor's ring bytes (row_labels_format.h's row_labels_offset).
inline void put_payload_sizes(const RingWriter::Reservation& r, uint64_t payload_bytes, uint64_t tensor_ring_bytes,
                              const std::string* row_labels) {
  r.header->payload_bytes = payload_bytes;
  r.header->row_labels_bytes = row_labels == nullptr ? 0 : static_cast<uint32_t>(row_labels->size());
  if (row_labels != nullptr) {
    std::memcpy(r.payload + row_labels_offset(tensor_ring_bytes), row_labels->data(), row_labels->size());
  }
}

}  // namespace tensorscope
