// ring_reader.h — the consumer side of a segment's record ring, with validation.
//
// Used by a daemon worker process (exactly one reader per segment at a time). Nothing
// in the segment is trusted: next() copies the record header out of shared memory and
// checks every field (sequence, payload bounds, dtype, kind, shape, sizes, names)
// before handing out a view; a bad record is dropped and counted, and a slot table in
// an impossible state poisons the segment (counted, reading stops) — never a crash.
// Thread safety: one thread per RingReader.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tensorscope/shared/row_labels_format.h"
#include "tensorscope/shared/shared_segment.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope {

// A validated record: a private copy of its header and a pointer to its payload, which
// stays valid until release(). The payload bytes live in shared memory: read each once.
// A record with kRecordDevicePayload has no payload here (nullptr): its bytes are in
// the producer's device pool (pool_* fields, checked only for the pool index); the
// reader of the pool fills `payload` with a host copy before routing.
struct RecordView {
  wire::RecordHeader header;  // copy; `sequence` is meaningless here
  const uint8_t* payload = nullptr;
  uint64_t position = 0;
  uint64_t release_to = 0;  // data position freed when released
  bool owns_slot = false;
  // The record's row labels (row_labels_format.h), parsed out of shared memory and
  // checked against the tensor's rows; null when it has none.
  std::shared_ptr<const RowLabels> row_labels;
};

// The tensor's bytes in the data ring: payload_bytes, or 0 for a device payload.
uint64_t ring_tensor_bytes(const wire::RecordHeader& header);
// Where the row labels section starts, from payload_position (row_labels_bytes > 0).
uint64_t row_labels_offset(const wire::RecordHeader& header);
// Bytes a record occupies in the data ring: its tensor's ring bytes and, when it has
// one, its row labels section after them.
uint64_t ring_payload_bytes(const wire::RecordHeader& header);

// Why a record was refused (for logs); empty when valid.
std::string validate_record_header(const wire::RecordHeader& header, uint64_t data_capacity, uint64_t data_tail,
                                   uint64_t data_head, uint64_t max_payload_bytes);

class RingReader {
 public:
  enum class Result {
    kRecord,    // *out holds a valid record; call release(*out) when done with it
    kEmpty,     // nothing READY at the read position
    kDropped,   // a record failed validation: counted in dropped_invalid, slot freed
    kSkipped,   // a cancelled record was freed
    kPoisoned,  // the slot table is corrupt: segment marked poisoned, stop reading
  };

  // `max_payload_bytes`: records with larger payloads are dropped (daemon limit).
  RingReader(SharedSegment* segment, uint64_t max_payload_bytes);

  Result next(RecordView* out);
  // Done with a record: counts it received and frees its slot, its ring bytes and, for
  // a device payload, its pool block.
  void release(const RecordView& view);
  // Refuses a record after next() accepted it (its device payload could not be read):
  // counted in dropped_invalid, freed like release().
  void drop(const RecordView& view, const std::string& why);

  bool poisoned() const { return poisoned_; }
  const std::string& last_error() const { return last_error_; }

 private:
  void free_slot(uint64_t position, uint64_t release_to);
  void release_device_payload(const wire::RecordHeader& header);
  // The end of `h`'s payload when its bounds are plausible, else data_tail (free nothing).
  uint64_t payload_end_if_in_bounds(const wire::RecordHeader& h, uint64_t data_tail, uint64_t data_head) const;

  SharedSegment* segment_;
  wire::SegmentHeader* header_;
  uint64_t max_payload_bytes_;
  bool poisoned_ = false;
  std::string last_error_;
};

}  // namespace tensorscope
