#include "staging_pool.h"

#include <algorithm>

namespace tensorscope {
namespace {

uint64_t align_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

}  // namespace

StagingPool::StagingPool(uint64_t capacity, uint32_t events)
    : capacity_(capacity / kAlignment * kAlignment), events_(std::max<uint32_t>(events, 1)) {}

std::optional<StagingPool::Block> StagingPool::reserve(uint64_t bytes, uint64_t released_to,
                                                       uint64_t released_ordinal) {
  if (bytes == 0 || capacity_ == 0) return std::nullopt;
  const uint64_t size = align_up(bytes, kAlignment);
  if (size > capacity_) return std::nullopt;
  // Releases from before this generation, or from the future (a confused or hostile
  // peer), say nothing about our blocks: clamp them into [generation start, head].
  const uint64_t tail = std::clamp(released_to, generation_position_, head_);
  const uint64_t done = std::clamp(released_ordinal, generation_ordinal_, next_ordinal_);
  if (next_ordinal_ - done >= events_) return std::nullopt;  // every event still in use

  uint64_t start = head_;
  const uint64_t offset = start % capacity_;
  if (offset + size > capacity_) start += capacity_ - offset;  // skip to the next lap
  const uint64_t end = start + size;
  if (end - tail > capacity_) return std::nullopt;  // would overwrite unreleased bytes

  Block b;
  b.position = start;
  b.offset = start % capacity_;
  b.bytes = bytes;
  b.end = end;
  b.ordinal = next_ordinal_++;
  b.event = static_cast<uint32_t>(b.ordinal % events_);
  b.generation = generation_;
  head_ = end;
  return b;
}

void StagingPool::reset() {
  // The new generation starts on a lap boundary, with the whole pool in front of it.
  if (capacity_ > 0) head_ = align_up(head_, capacity_);
  generation_position_ = head_;
  generation_ordinal_ = next_ordinal_;
  ++generation_;
}

}  // namespace tensorscope
