// ring_writer.h — the producer side of a segment's record ring.
//
// Used by the client inside the training process. reserve() claims a slot and payload
// space without waiting (a full ring is reported, never waited on); the caller fills the
// header and payload, then commit() publishes the record (or cancel() releases it).
// Tensors leave a sixteenth of the slots and of the data space free (Claim::kLeaveHeadroom)
// for the small records that must not be lost behind them: the step's summaries and
// module tree get through a ring that full tensors keep full.
// An empty ring starts over at the beginning of its data space (the next lap) once
// 1/kRestartFraction of it has been used since the last start, so a consumer that keeps
// up finds the producer writing the same few pages, not every page of the segment in
// turn; positions then grow at most kRestartFraction times faster than the bytes pushed.
// Thread safety: reserve/commit/cancel may be called from any number of threads of the
// producer process. Claims are serialized by a process-private spin lock held for a few
// instructions (never across a copy, never visible to another process); fills run in
// parallel. Only one process may write a segment.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "tensorscope/shared/shared_segment.h"

namespace tensorscope {

class RingWriter {
 public:
  enum class ReserveResult { kOk, kFull, kTooLarge };
  enum class Claim { kAnySpace, kLeaveHeadroom };
  static constexpr uint64_t kRestartFraction = 128;

  struct Reservation {
    wire::RecordHeader* header = nullptr;  // slot to fill (sequence excluded)
    uint8_t* payload = nullptr;            // payload_bytes writable bytes
    uint64_t position = 0;                 // slot position, for commit()
  };

  explicit RingWriter(SharedSegment* segment);

  // Largest payload a single record can carry in this segment.
  uint64_t max_payload_bytes() const { return segment_->data_capacity(); }

  // Claims a slot and `payload_bytes` of data. Never blocks: kFull when the consumer has
  // not freed enough yet (with kLeaveHeadroom: when less than the headroom would be left),
  // kTooLarge when the payload can never fit.
  ReserveResult reserve(uint64_t payload_bytes, Reservation* out, Claim claim = Claim::kAnySpace);

  // What kLeaveHeadroom leaves free: slots and data bytes.
  uint64_t headroom_slots() const { return std::max<uint64_t>(1, header_->slot_count / 16); }
  uint64_t headroom_bytes() const { return segment_->data_capacity() / 16; }

  // The push time (RecordHeader::timestamp_unix_ns) of the oldest record the consumer has
  // not read yet, 0 when it has read everything: how far behind it is. A hint, read
  // without synchronizing with the consumer, which may be releasing that record meanwhile.
  uint64_t oldest_unread_unix_ns() const;
  // How full the ring is, 0..1: the larger of the slots and the data bytes in use.
  double fill() const;
  // Publishes a filled reservation (READY). Every successful reserve() must be followed
  // by exactly one commit() or cancel(), or the consumer stops at that slot.
  void commit(const Reservation& reservation);

  // Publishes the reservation as cancelled: the consumer skips it.
  void cancel(const Reservation& reservation);

 private:
  void lock();
  void unlock() { lock_.store(false, std::memory_order_release); }
  // Where the unread data begins, given the consumer's data_tail (see reserve()).
  uint64_t unread_from(uint64_t data_tail) const;

  SharedSegment* segment_;
  wire::SegmentHeader* header_;
  std::atomic<bool> lock_{false};
  // The last skip made with the ring empty: [from, to) is free, though the consumer's
  // data_tail stays at `from` until it releases the next record.
  std::atomic<uint64_t> skipped_from_{0}, skipped_to_{0};
};

}  // namespace tensorscope
