#include "tensorscope/shared/ring_writer.h"

#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TENSORSCOPE_CPU_RELAX() _mm_pause()
#else
#define TENSORSCOPE_CPU_RELAX() std::atomic_signal_fence(std::memory_order_seq_cst)
#endif

namespace tensorscope {

RingWriter::RingWriter(SharedSegment* segment) : segment_(segment), header_(segment->header()) {}

void RingWriter::lock() {
  for (int spins = 0;; ++spins) {
    if (!lock_.exchange(true, std::memory_order_acquire)) return;
    while (lock_.load(std::memory_order_relaxed)) {
      if (spins++ < 64) {
        TENSORSCOPE_CPU_RELAX();
      } else {
        std::this_thread::yield();  // holder was preempted inside a few instructions
      }
    }
  }
}

RingWriter::ReserveResult RingWriter::reserve(uint64_t payload_bytes, Reservation* out, Claim claim) {
  const uint64_t capacity = segment_->data_capacity();
  if (payload_bytes > capacity) return ReserveResult::kTooLarge;
  const uint64_t padded = wire::align_up(payload_bytes, wire::kPayloadAlignment);
  const bool headroom = claim == Claim::kLeaveHeadroom;
  const uint64_t keep_slots = headroom ? headroom_slots() : 0;
  const uint64_t keep_bytes = headroom ? headroom_bytes() : 0;

  lock();
  const uint64_t position = header_->slot_head.load(std::memory_order_relaxed);
  wire::RecordHeader* slot = segment_->slot(position);
  if (slot->sequence.load(std::memory_order_acquire) != position ||
      (headroom &&
       position + 1 + keep_slots - header_->slot_tail.load(std::memory_order_acquire) > header_->slot_count)) {
    unlock();
    return ReserveResult::kFull;  // the consumer has not freed this slot (or the headroom) yet
  }
  uint64_t start = header_->data_head.load(std::memory_order_relaxed);
  const uint64_t tail = unread_from(header_->data_tail.load(std::memory_order_acquire));
  const uint64_t offset = start % capacity;
  // Skip to the next lap when the payload does not fit before the end, or when the
  // consumer has freed everything and this lap has gone far enough: the ring then starts
  // over at its beginning, so a consumer that keeps up sees the same few pages written
  // again and again (hot in the caches and the TLB) instead of the whole segment in turn.
  const bool empty = start == tail;
  const bool skip = offset + padded > capacity || (empty && offset >= capacity / kRestartFraction);
  if (skip) start += capacity - offset;
  const bool restart = skip && empty;  // the skipped bytes were free: what is unread starts at `start`
  const uint64_t end = start + padded;
  if (end - (restart ? start : tail) + keep_bytes > capacity) {
    unlock();
    return ReserveResult::kFull;
  }
  if (restart) {
    skipped_from_.store(tail, std::memory_order_relaxed);
    skipped_to_.store(start, std::memory_order_relaxed);
  }
  header_->slot_head.store(position + 1, std::memory_order_relaxed);
  header_->data_head.store(end, std::memory_order_release);
  unlock();

  slot->payload_position = start;
  slot->payload_bytes = payload_bytes;
  slot->flags = 0;
  slot->row_labels_bytes = 0;
  out->header = slot;
  out->payload = segment_->data() + (start % capacity);
  out->position = position;
  return ReserveResult::kOk;
}

uint64_t RingWriter::unread_from(uint64_t data_tail) const {
  // The consumer frees skipped bytes with the record after them: until it has, its
  // data_tail is where the skip began.
  return data_tail == skipped_from_.load(std::memory_order_relaxed) ? skipped_to_.load(std::memory_order_relaxed)
                                                                    : data_tail;
}

void RingWriter::commit(const Reservation& r) {
  r.header->sequence.store(r.position + 1, std::memory_order_release);  // READY
}

void RingWriter::cancel(const Reservation& r) {
  r.header->flags |= wire::kRecordCancelled;  // keeps kRecordDevicePayload: its block is freed too
  r.header->sequence.store(r.position + 1, std::memory_order_release);
}

uint64_t RingWriter::oldest_unread_unix_ns() const {
  const uint64_t tail = header_->slot_tail.load(std::memory_order_acquire);
  if (tail >= header_->slot_head.load(std::memory_order_relaxed)) return 0;
  return segment_->slot(tail)->timestamp_unix_ns;
}

double RingWriter::fill() const {
  const uint64_t slots =
      header_->slot_head.load(std::memory_order_relaxed) - header_->slot_tail.load(std::memory_order_acquire);
  const uint64_t head = header_->data_head.load(std::memory_order_relaxed);
  const uint64_t tail = unread_from(header_->data_tail.load(std::memory_order_acquire));
  const uint64_t bytes = head > tail ? head - tail : 0;  // (a skip under way: a moment's 0)
  const double capacity = static_cast<double>(std::max<uint64_t>(1, segment_->data_capacity()));
  return std::max(static_cast<double>(slots) / static_cast<double>(std::max<uint64_t>(1, header_->slot_count)),
                  static_cast<double>(bytes) / capacity);
}

}  // namespace tensorscope
