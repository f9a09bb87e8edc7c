#include "tensorscope/shared/device_pool_table.h"

#include <algorithm>
#include <cstring>

namespace tensorscope {
namespace {

std::string identity_refusal(uint64_t capacity, size_t events) {
  if (capacity == 0 || capacity % wire::kDevicePoolAlignment != 0) {
    return "device pool capacity " + std::to_string(capacity) + " is not a positive multiple of " +
        std::to_string(wire::kDevicePoolAlignment);
  }
  if (events == 0 || events > wire::kMaxPoolEvents) {
    return "device pool has " + std::to_string(events) + " events; 1.." + std::to_string(wire::kMaxPoolEvents) +
        " are allowed";
  }
  return {};
}

void store_max(std::atomic<uint64_t>& field, uint64_t value) {
  uint64_t seen = field.load(std::memory_order_relaxed);
  while (value > seen &&
         !field.compare_exchange_weak(seen, value, std::memory_order_release, std::memory_order_relaxed)) {}
}

}  // namespace

Status publish_pool(wire::DevicePoolEntry* entry, const DevicePoolIdentity& id) {
  const std::string why = identity_refusal(id.capacity, id.event_handles.size());
  if (!why.empty()) return Status::error(why);
  if (entry->state.load(std::memory_order_acquire) != wire::kPoolEmpty) {
    return Status::error("device pool entry is already published");
  }
  entry->generation = id.generation;
  entry->device_ordinal = id.device_ordinal;
  entry->event_count = static_cast<uint32_t>(id.event_handles.size());
  entry->capacity = id.capacity;
  entry->generation_start_position = id.generation_start_position;
  entry->generation_start_ordinal = id.generation_start_ordinal;
  std::memcpy(entry->device_uuid, id.device_uuid.data(), wire::kDeviceUuidBytes);
  std::memcpy(entry->mem_handle, id.mem_handle.data(), wire::kIpcHandleBytes);
  for (size_t i = 0; i < id.event_handles.size(); ++i) {
    std::memcpy(entry->event_handles[i], id.event_handles[i].data(), wire::kIpcHandleBytes);
  }
  entry->consumer_refused.store(0, std::memory_order_relaxed);
  entry->released_to.store(id.generation_start_position, std::memory_order_relaxed);
  entry->released_ordinal.store(id.generation_start_ordinal, std::memory_order_relaxed);
  entry->state.store(wire::kPoolPublished, std::memory_order_release);
  return Status::ok();
}

StatusOr<DevicePoolIdentity> read_pool_identity(const wire::DevicePoolEntry& entry) {
  if (entry.state.load(std::memory_order_acquire) != wire::kPoolPublished) {
    return Status::error("device pool is not published");
  }
  DevicePoolIdentity id;
  id.generation = entry.generation;
  id.device_ordinal = entry.device_ordinal;
  id.capacity = entry.capacity;
  id.generation_start_position = entry.generation_start_position;
  id.generation_start_ordinal = entry.generation_start_ordinal;
  std::memcpy(id.device_uuid.data(), entry.device_uuid, wire::kDeviceUuidBytes);
  std::memcpy(id.mem_handle.data(), entry.mem_handle, wire::kIpcHandleBytes);
  const uint32_t events = entry.event_count;  // read once: the producer may scribble
  const std::string why = identity_refusal(id.capacity, events);
  if (!why.empty()) return Status::error(why);
  id.event_handles.resize(events);
  for (uint32_t i = 0; i < events; ++i) {
    std::memcpy(id.event_handles[i].data(), entry.event_handles[i], wire::kIpcHandleBytes);
  }
  return id;
}

std::string validate_device_location(const wire::RecordHeader& h, const DevicePoolIdentity& pool) {
  if (h.pool_generation != pool.generation) {
    return "device payload names pool generation " + std::to_string(h.pool_generation) +
        " but the pool is at generation " + std::to_string(pool.generation);
  }
  if (h.pool_ordinal < pool.generation_start_ordinal || h.pool_position < pool.generation_start_position) {
    return "device payload is older than its pool's generation";
  }
  if (h.pool_event >= pool.event_handles.size() || h.pool_event != h.pool_ordinal % pool.event_handles.size()) {
    return "device payload names event " + std::to_string(h.pool_event) + ", not the one of block " +
        std::to_string(h.pool_ordinal);
  }
  if (h.pool_position % wire::kDevicePoolAlignment != 0) return "device payload is misaligned";
  const uint64_t padded = wire::align_up(h.payload_bytes, wire::kDevicePoolAlignment);
  if (h.payload_bytes > pool.capacity || padded > pool.capacity ||
      h.pool_position % pool.capacity + padded > pool.capacity) {
    return "device payload of " + std::to_string(h.payload_bytes) + " bytes is out of its pool's bounds";
  }
  return {};
}

uint64_t device_block_end(const wire::RecordHeader& h) {
  const uint64_t padded = wire::align_up(std::max<uint64_t>(h.payload_bytes, 1), wire::kDevicePoolAlignment);
  return h.pool_position > UINT64_MAX - padded ? h.pool_position : h.pool_position + padded;
}

void release_device_block(wire::DevicePoolEntry* table, const wire::RecordHeader& h) {
  if (h.pool_index >= wire::kMaxDevicePools) return;
  wire::DevicePoolEntry& entry = table[h.pool_index];
  if (entry.state.load(std::memory_order_acquire) != wire::kPoolPublished) return;
  store_max(entry.released_to, device_block_end(h));
  if (h.pool_ordinal < UINT64_MAX) store_max(entry.released_ordinal, h.pool_ordinal + 1);
}

void revoke_pools(wire::DevicePoolEntry* table) {
  for (size_t i = 0; i < wire::kMaxDevicePools; ++i) {
    uint32_t expected = wire::kPoolPublished;
    table[i].state.compare_exchange_strong(expected, wire::kPoolRevoked, std::memory_order_acq_rel);
  }
}

PoolReleases read_pool_releases(const wire::DevicePoolEntry& entry, uint64_t start_position, uint64_t start_ordinal) {
  PoolReleases r;
  r.released_to = std::max(entry.released_to.load(std::memory_order_acquire), start_position);
  r.released_ordinal = std::max(entry.released_ordinal.load(std::memory_order_acquire), start_ordinal);
  return r;
}

}  // namespace tensorscope
