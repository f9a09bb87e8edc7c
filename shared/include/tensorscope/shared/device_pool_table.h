// device_pool_table.h — reading, publishing and releasing the CUDA staging pools that a
// segment's pool table describes (see "Device payloads" in wire_format.h).
//
// Used by the client (publish_pool when a connection first carries a CUDA tensor) and by
// the daemon's workers (read_pool_identity, validate_device_location, and release through
// RingReader). Nothing here calls CUDA: handles are opaque bytes.
// Thread safety: free functions over shared memory; the producer publishes an entry
// once per segment, the consumer (one worker) is the only writer of the releases.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tensorscope/base/status.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope {

using IpcHandleBytes = std::array<uint8_t, wire::kIpcHandleBytes>;

// A private copy of a pool entry's identity fields.
struct DevicePoolIdentity {
  uint32_t generation = 0;
  int32_t device_ordinal = 0;
  uint64_t capacity = 0;
  uint64_t generation_start_position = 0;
  uint64_t generation_start_ordinal = 0;
  std::array<uint8_t, wire::kDeviceUuidBytes> device_uuid{};
  IpcHandleBytes mem_handle{};
  std::vector<IpcHandleBytes> event_handles;  // 1..kMaxPoolEvents
};

// Producer: writes `identity` into an EMPTY entry, zeroes its releases and publishes it.
// Fails (and leaves the entry EMPTY) when the identity is malformed or the entry is
// already published.
Status publish_pool(wire::DevicePoolEntry* entry, const DevicePoolIdentity& identity);

// Consumer: the identity of a PUBLISHED entry, checked (capacity, event count); an error
// for an EMPTY or malformed entry.
StatusOr<DevicePoolIdentity> read_pool_identity(const wire::DevicePoolEntry& entry);

// Why a kRecordDevicePayload record's location cannot be in `pool` (empty when it can):
// generation, event index, alignment and bounds against the pool's capacity.
std::string validate_device_location(const wire::RecordHeader& header, const DevicePoolIdentity& pool);

// Pool position after the record's block: where the consumer releases to.
uint64_t device_block_end(const wire::RecordHeader& header);

// Consumer: frees the record's block (and every block before it) in its pool. Both
// release fields only grow; an out-of-range pool index is ignored.
void release_device_block(wire::DevicePoolEntry* table, const wire::RecordHeader& header);

// Producer: marks every published pool of the table revoked (the segment is being
// retired; its blocks are about to be reused).
void revoke_pools(wire::DevicePoolEntry* table);

// Producer: what the consumer has released, clamped to the generation that started at
// (`start_position`, `start_ordinal`): stale values from before it read as that start.
struct PoolReleases {
  uint64_t released_to = 0;
  uint64_t released_ordinal = 0;
};
PoolReleases read_pool_releases(const wire::DevicePoolEntry& entry, uint64_t start_position, uint64_t start_ordinal);

}  // namespace tensorscope
