// staging_pool.h — the bookkeeping of a CUDA staging pool: a byte ring over one device
// allocation, plus a ring of interprocess events, shared with the daemon by CUDA IPC.
//
// Used by the client on the training thread (reserve) with the daemon's progress read
// from shared memory (released_to). A push of a CUDA tensor reserves a block here,
// copies into it on a side stream, records the block's event and publishes a record that
// names the block; the daemon copies the block out and releases it by advancing its
// position. Blocks never wrap (a block that does not fit before the end skips to the
// start; the skipped bytes are released with it), so every block is one contiguous
// device range. A full pool is a refusal to reserve (the caller counts a drop), never a
// wait. reset() forgets every block when the daemon that held them is gone (a new
// registration starts a new generation): work already queued on the side stream stays
// ordered before anything reserved later.
// Thread safety: none; the client serializes reserve/reset (one lock per device).
#pragma once

#include <cstdint>
#include <optional>

#include "tensorscope/shared/wire_format.h"

namespace tensorscope {

class StagingPool {
 public:
  // `capacity` bytes of device memory and `events` interprocess events.
  StagingPool(uint64_t capacity, uint32_t events);

  struct Block {
    uint64_t position = 0;  // absolute position of the first byte (monotonic)
    uint64_t offset = 0;    // byte offset in the pool: position % capacity
    uint64_t bytes = 0;
    uint64_t end = 0;         // absolute position after the block: release to here
    uint64_t ordinal = 0;     // block number since the pool was created
    uint32_t event = 0;       // index of the event this block records: ordinal % events
    uint32_t generation = 0;  // the registration the block belongs to
  };

  static constexpr uint64_t kAlignment = wire::kDevicePoolAlignment;

  // A block of `bytes` (> 0), or nullopt when it would overrun what the daemon has not
  // released (`released_to`, an absolute position it published) or reuse an event a
  // block the daemon still holds records. `released_ordinal`: blocks before this ordinal
  // are released.
  std::optional<Block> reserve(uint64_t bytes, uint64_t released_to, uint64_t released_ordinal);

  // The daemon is gone: every block is free again; the next blocks start a new
  // generation. Positions and ordinals keep increasing (so stale releases are visibly old).
  void reset();
  // Start of the current generation: positions and ordinals before these are not ours.
  uint64_t generation_start_position() const { return generation_position_; }
  uint64_t generation_start_ordinal() const { return generation_ordinal_; }
  uint32_t generation() const { return generation_; }

  uint64_t capacity() const { return capacity_; }
  uint32_t events() const { return events_; }
  uint64_t head() const { return head_; }

 private:
  const uint64_t capacity_;
  const uint32_t events_;
  uint64_t head_ = 0;
  uint64_t next_ordinal_ = 0;
  uint64_t generation_position_ = 0;
  uint64_t generation_ordinal_ = 0;
  uint32_t generation_ = 0;
};

}  // namespace tensorscope
