// wire_format.h — the versioned ABI of a producer's shared-memory segment.
//
// Used by the client (the only writer of a segment's producer fields and records) and
// by the daemon (supervisor and worker processes: the only writer of the consumer
// fields). This header is the contract between two processes built at different times:
// every size and offset below is pinned by a static_assert, and any change to the
// layout must bump kAbiVersion.
//
// Thread safety: the structs are plain memory in a MAP_SHARED mapping. The fields
// documented as atomic are accessed with std::atomic_ref-compatible std::atomic<>
// members (lock-free, address-free, so they work across processes); everything else
// is written before a release store and read after the matching acquire load.
//
// ---------------------------------------------------------------------------------
// Segment layout (one file per producer process, mode 0600, in the runtime dir):
//
//   offset 0                      SegmentHeader            (kSegmentHeaderSize bytes)
//   slot_table_offset             RecordHeader[slot_count] (kRecordHeaderSize each)
//   pool_table_offset             DevicePoolEntry[kMaxDevicePools] (CUDA IPC)
//   data_offset                   payload bytes            (data_capacity bytes)
//                                 (a record's tensor bytes, then its row labels section
//                                 when it has one: row_labels_format.h)
//   segment_size                  end of file
//
// Records: a pushed tensor is a RecordHeader in slot `position & (slot_count - 1)` and
// its C-contiguous bytes at data offset `position % data_capacity`; positions are
// absolute 64-bit counters, and a payload never wraps (it skips to the next lap; an
// empty ring skips there too, to start over: ring_writer.h).
// Device payloads (CUDA IPC): a record flagged kRecordDevicePayload has no ring bytes;
// its payload is a block of a per-device staging pool described by a DevicePoolEntry.
//
// Slot state machine (RecordHeader::sequence; p = the slot's position in this lap):
//   FREE(p)     sequence == p          producer may claim p (slot_head: p -> p+1)
//   WRITING(p)  sequence == p,         producer fills header and payload, then
//               slot_head > p            sequence.store(p + 1, release)
//   READY(p)    sequence == p + 1      consumer reads, validates, hands it on, then
//                                        data_tail.store(record end, release);
//                                        sequence.store(p + slot_count, release)
//   -> FREE(p + slot_count). Any other sequence at the consumer's position: the slot
//   table is corrupt; the consumer sets kConsumerPoisoned and stops reading.
//
// Who writes what:
//   - SegmentHeader identity fields: producer, once, before registration; read-only after.
//   - slot_head, data_head, heartbeat_unix_ns, producer counters: producer only.
//   - slot_tail, data_tail, consumer_state, consumer counters: consumer only (one
//     worker process at a time; the supervisor hands a producer to exactly one worker).
//   - RecordHeader fields other than `sequence`: producer in WRITING; consumer reads a
//     private copy in READY and validates every field before use.
//   - DevicePoolEntry: identity and state (EMPTY -> PUBLISHED -> REVOKED) by the
//     producer; released_to, released_ordinal, consumer_refused by the consumer.
// No lock lives in the segment: a process that dies at any point cannot block the other.
//
// Handshake: the consumer checks magic, abi_version and every size/offset against the
// file's real size before reading anything else (validate_segment_header in
// shared_segment.h); a mismatch is refused with a message naming both versions.
//
// Design: docs/design/wire_format.md (state machines, device pools, failure cases).
// ---------------------------------------------------------------------------------
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tensorscope/base/named_enum.h"
#include "tensorscope/shared/render_modes.h"

namespace tensorscope::wire {

// The bytes "SCOP_SEG" read as a little-endian integer.
inline constexpr uint64_t kSegmentMagic = 0x4745535f504f4353ULL;
inline constexpr uint32_t kAbiVersion = 3;  // 3: RecordHeader::row_labels_bytes

inline constexpr size_t kSegmentHeaderSize = 1024;
inline constexpr size_t kRecordHeaderSize = 512;
inline constexpr size_t kPayloadAlignment = 64;
inline constexpr size_t kMaxDims = 8;
inline constexpr size_t kNameBytes = 128;      // stream name, NUL-terminated, 1..127 chars
inline constexpr size_t kDeviceBytes = 16;     // "cpu", "cuda0", ...
inline constexpr size_t kLabelBytes = 128;     // set_label() text
inline constexpr size_t kSessionBytes = 64;    // session name
inline constexpr size_t kMaxDevicePools = 8;   // pool table entries (one per CUDA device)
inline constexpr size_t kMaxPoolEvents = 64;   // interprocess events per pool
inline constexpr size_t kIpcHandleBytes = 64;  // cudaIpcMemHandle_t, cudaIpcEventHandle_t
inline constexpr size_t kDeviceUuidBytes = 16;
inline constexpr size_t kDevicePoolEntrySize = 256 + kMaxPoolEvents * kIpcHandleBytes;
inline constexpr uint64_t kDevicePoolAlignment = 256;  // pool block alignment

// Element types. Values are part of the ABI.
enum class DType : uint8_t {
  kInvalid = 0,
  kFloat32 = 1,
  kFloat64 = 2,
  kFloat16 = 3,
  kBFloat16 = 4,
  kInt8 = 5,
  kInt16 = 6,
  kInt32 = 7,
  kInt64 = 8,
  kUInt8 = 9,
  kBool = 10,
};
inline constexpr uint8_t kMaxDType = 10;

// What a tensor is. Values are part of the ABI.
// What a record holds: X(value, name), numbered from 0 in this order (part of the ABI).
// The names: tensor_kind_name, the daemon's files and messages, the Python package's
// TENSOR_KINDS / RECORD_KINDS (through the extension).
//   kModuleTree: not a tensor: the module calls of one step of a track, as text
//     (module_tree_format.h); dtype uint8, ndim 1, in the data ring, at most
//     kMaxModuleTreeBytes; named after the track.
//   kSummary: not a tensor: summaries of the tensors of one step of a track
//     (summary_format.h); dtype uint8, ndim 1, in the data ring, at most kMaxSummaryBytes;
//     named after the track. Sent only to a daemon that says it reads them ("summaries"
//     in its reply).
#define TENSORSCOPE_TENSOR_KINDS(X)                                                           \
  X(kInvalid, "invalid")                      /* no record has it */                          \
  X(kTensor, "tensor")                        /* pushed by hand with Client::push */          \
  X(kActivation, "activation")                /* a module's forward output */                 \
  X(kGradient, "gradient")                    /* at a module output or of a tracked tensor */ \
  X(kParameter, "parameter")                  /* a module parameter's value */                \
  X(kParameterGradient, "parameter_gradient") /* a module parameter's gradient */             \
  X(kModuleTree, "module_tree")                                                               \
  X(kSummary, "summary")

TENSORSCOPE_NAMED_ENUM(TensorKind, uint8_t, kTensorKindNames, TENSORSCOPE_TENSOR_KINDS);
inline constexpr uint8_t kMaxTensorKind = static_cast<uint8_t>(kTensorKindNames.size() - 1);
static_assert(static_cast<uint8_t>(TensorKind::kSummary) == 7, "tensor kinds are part of the ABI: append new kinds");
static_assert(named_and_distinct(kTensorKindNames));
inline constexpr uint64_t kMaxModuleTreeBytes = uint64_t{1} << 20;
inline constexpr uint64_t kMaxSummaryBytes = uint64_t{2} << 20;
// A kind whose records carry a tensor (not a module tree or summaries).
constexpr bool is_tensor_kind(uint8_t kind) {
  return kind >= static_cast<uint8_t>(TensorKind::kTensor) &&
      kind <= static_cast<uint8_t>(TensorKind::kParameterGradient);
}

// RecordHeader::render_hint values: RenderHint (render_modes.h), at most kMaxRenderHint.

// SegmentHeader::consumer_state values.
enum ConsumerState : uint32_t {
  kConsumerNone = 0,      // no worker has read this segment yet
  kConsumerAttached = 1,  // a worker reads it
  kConsumerPoisoned = 2,  // the consumer found the slot table corrupt and stopped
};

// RecordHeader::flags bits.
enum RecordFlags : uint8_t {
  // The producer claimed the slot but could not fill it (the copy failed); the
  // consumer releases it without reading the payload and counts nothing: the client
  // already counted the push as refused.
  kRecordCancelled = 1u << 0,
  // The payload is in a device pool (pool_* fields), not in the data ring.
  kRecordDevicePayload = 1u << 1,
};

// DevicePoolEntry::state values.
enum PoolState : uint32_t {
  kPoolEmpty = 0,
  kPoolPublished = 1,
  kPoolRevoked = 2,  // the producer left this segment: its blocks may be reused at once
};

struct alignas(64) SegmentHeader {
  // --- identity: written once by the producer before registration -----------------
  uint64_t magic;               // kSegmentMagic
  uint32_t abi_version;         // kAbiVersion
  uint32_t header_size;         // kSegmentHeaderSize
  uint64_t segment_size;        // total file size in bytes
  uint64_t slot_table_offset;   // == kSegmentHeaderSize
  uint32_t slot_count;          // power of two, >= 2
  uint32_t record_header_size;  // kRecordHeaderSize
  uint64_t data_offset;         // 64-byte aligned, after the slot table
  uint64_t data_capacity;       // bytes of payload ring, multiple of kPayloadAlignment
  int64_t producer_pid;
  uint32_t producer_uid;
  int32_t rank;
  uint64_t created_unix_ns;
  char session[kSessionBytes];  // NUL-terminated
  uint64_t pool_table_offset;   // DevicePoolEntry[pool_count], after the slot table
  uint32_t pool_count;          // kMaxDevicePools
  uint32_t pool_entry_size;     // kDevicePoolEntrySize
  uint8_t reserved_identity[256 - 160];

  // --- producer hot fields (own cache line) ----------------------------------------
  std::atomic<uint64_t> slot_head;          // next slot position the producer claims
  std::atomic<uint64_t> data_head;          // next absolute data position
  std::atomic<uint64_t> heartbeat_unix_ns;  // refreshed by the client's background thread
  uint8_t reserved_producer[64 - 24];

  // --- consumer hot fields (own cache line) ----------------------------------------
  std::atomic<uint64_t> slot_tail;       // next slot position the consumer reads
  std::atomic<uint64_t> data_tail;       // data before this absolute position is free
  std::atomic<uint32_t> consumer_state;  // ConsumerState
  uint32_t reserved_consumer0;
  uint8_t reserved_consumer[64 - 24];

  // --- producer counters (cumulative since the segment was created) ---------------
  std::atomic<uint64_t> pushed;        // records committed (READY)
  std::atomic<uint64_t> gated;         // calls gated out (every_n, max_hz, disabled)
  std::atomic<uint64_t> dropped_full;  // no free slot or data space
  std::atomic<uint64_t> refused;       // bad dtype, too large, transform failed ...
  std::atomic<uint64_t> bytes_pushed;  // payload bytes committed
  // Pacing (client/core/pacer.h): while the daemon falls behind, the client sends one
  // call in pace_stride16 / 16 of each stream (16: all its gates admit) and counts the
  // others in paced (and in gated). Zero from clients before it.
  std::atomic<uint64_t> paced;
  std::atomic<uint32_t> pace_stride16;
  uint32_t reserved_pace;
  uint8_t reserved_producer_counters[64 - 56];

  // --- consumer counters (cumulative; survive a worker restart) -------------------
  std::atomic<uint64_t> received;         // records read and accepted
  std::atomic<uint64_t> dropped_invalid;  // records that failed validation
  std::atomic<uint64_t> bytes_received;   // payload bytes of accepted records
  // Accepted records the daemon could not draw (limits.max_streams_per_worker reached);
  // the client shows them in stats().dropped_by_daemon. Zero from daemons before it.
  std::atomic<uint64_t> dropped_by_daemon;
  // Accepted records whose frames a worker has yet to draw (its render queue). When the
  // worker dies they are lost: the supervisor moves them to dropped_by_daemon.
  std::atomic<uint64_t> in_render;
  uint8_t reserved_consumer_counters[64 - 40];

  uint8_t reserved_tail[kSegmentHeaderSize - 512];
};

struct RecordHeader {
  std::atomic<uint64_t> sequence;  // slot state, see the state machine above
  uint64_t payload_position;       // absolute data position of the payload's first byte
  uint64_t payload_bytes;          // == numel * element size
  int64_t step;                    // Client step at push time
  uint64_t timestamp_unix_ns;      // wall clock at push time
  int32_t rank;
  uint8_t dtype;              // DType
  uint8_t kind;               // TensorKind
  uint8_t ndim;               // 0..kMaxDims
  uint8_t render_hint;        // RenderHint
  int64_t shape[kMaxDims];    // first ndim entries used, each >= 0
  char name[kNameBytes];      // NUL-terminated
  char device[kDeviceBytes];  // NUL-terminated
  char label[kLabelBytes];    // NUL-terminated, may be empty
  uint8_t flags;              // RecordFlags
  uint8_t reserved0[7];
  // --- device payload (kRecordDevicePayload only) -----------------------------------
  uint64_t pool_position;    // absolute pool position of the block's first byte
  uint64_t pool_ordinal;     // block number in the pool
  uint32_t pool_index;       // entry in the pool table
  uint32_t pool_generation;  // must equal the entry's generation
  uint32_t pool_event;       // event index, < the entry's event_count
  // --- row labels (row_labels_format.h) -----------------------------------------------
  // Bytes of the row labels section after the record's ring bytes (0: none); at most
  // kMaxRowLabelsBytes, only on tensor kinds of at least one dimension. The section's
  // ring bytes start at payload_position + align_up(ring tensor bytes, 8) (ring_reader.h).
  uint32_t row_labels_bytes;
  uint8_t reserved[kRecordHeaderSize - 424];
};

// One CUDA device's staging pool, as published by the producer (see "Device payloads").
struct alignas(64) DevicePoolEntry {
  // --- identity: producer, before state becomes kPoolPublished ---------------------
  std::atomic<uint32_t> state;            // PoolState
  uint32_t generation;                    // records name it; a new one per segment
  int32_t device_ordinal;                 // the producer's CUDA ordinal (informational)
  uint32_t event_count;                   // 1..kMaxPoolEvents
  uint64_t capacity;                      // pool bytes, multiple of kDevicePoolAlignment
  uint64_t generation_start_position;     // first pool position of this generation
  uint64_t generation_start_ordinal;      // first block ordinal of this generation
  uint8_t device_uuid[kDeviceUuidBytes];  // cudaDeviceProp::uuid: finds the device
                                          // whatever CUDA_VISIBLE_DEVICES says
  uint8_t reserved_identity[8];
  uint8_t mem_handle[kIpcHandleBytes];  // cudaIpcMemHandle_t of the pool allocation

  // --- consumer (own cache line) -----------------------------------------------------
  std::atomic<uint64_t> released_to;       // pool bytes before this position are free
  std::atomic<uint64_t> released_ordinal;  // blocks before this ordinal are free
  std::atomic<uint32_t> consumer_refused;  // 1: the consumer cannot read this pool
  uint8_t reserved_consumer[64 - 20];

  uint8_t reserved_tail[64];
  uint8_t event_handles[kMaxPoolEvents][kIpcHandleBytes];  // cudaIpcEventHandle_t each
};

// ---- layout pins: any failure here is an ABI change and needs kAbiVersion bumped ----
static_assert(std::atomic<uint64_t>::is_always_lock_free, "cross-process atomics need lock-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "cross-process atomics need lock-free");
static_assert(sizeof(std::atomic<uint64_t>) == 8 && sizeof(std::atomic<uint32_t>) == 4);

static_assert(sizeof(SegmentHeader) == kSegmentHeaderSize);
static_assert(alignof(SegmentHeader) == 64);
static_assert(offsetof(SegmentHeader, magic) == 0);
static_assert(offsetof(SegmentHeader, abi_version) == 8);
static_assert(offsetof(SegmentHeader, header_size) == 12);
static_assert(offsetof(SegmentHeader, segment_size) == 16);
static_assert(offsetof(SegmentHeader, slot_table_offset) == 24);
static_assert(offsetof(SegmentHeader, slot_count) == 32);
static_assert(offsetof(SegmentHeader, record_header_size) == 36);
static_assert(offsetof(SegmentHeader, data_offset) == 40);
static_assert(offsetof(SegmentHeader, data_capacity) == 48);
static_assert(offsetof(SegmentHeader, producer_pid) == 56);
static_assert(offsetof(SegmentHeader, producer_uid) == 64);
static_assert(offsetof(SegmentHeader, rank) == 68);
static_assert(offsetof(SegmentHeader, created_unix_ns) == 72);
static_assert(offsetof(SegmentHeader, session) == 80);
static_assert(offsetof(SegmentHeader, pool_table_offset) == 144);
static_assert(offsetof(SegmentHeader, pool_count) == 152);
static_assert(offsetof(SegmentHeader, pool_entry_size) == 156);
static_assert(offsetof(SegmentHeader, slot_head) == 256);
static_assert(offsetof(SegmentHeader, data_head) == 264);
static_assert(offsetof(SegmentHeader, heartbeat_unix_ns) == 272);
static_assert(offsetof(SegmentHeader, slot_tail) == 320);
static_assert(offsetof(SegmentHeader, data_tail) == 328);
static_assert(offsetof(SegmentHeader, consumer_state) == 336);
static_assert(offsetof(SegmentHeader, pushed) == 384);
static_assert(offsetof(SegmentHeader, gated) == 392);
static_assert(offsetof(SegmentHeader, dropped_full) == 400);
static_assert(offsetof(SegmentHeader, refused) == 408);
static_assert(offsetof(SegmentHeader, bytes_pushed) == 416);
static_assert(offsetof(SegmentHeader, received) == 448);
static_assert(offsetof(SegmentHeader, dropped_invalid) == 456);
static_assert(offsetof(SegmentHeader, bytes_received) == 464);
static_assert(offsetof(SegmentHeader, paced) == 424);
static_assert(offsetof(SegmentHeader, pace_stride16) == 432);
static_assert(offsetof(SegmentHeader, dropped_by_daemon) == 472);
static_assert(offsetof(SegmentHeader, in_render) == 480);
// Producer and consumer hot fields never share a cache line.
static_assert(offsetof(SegmentHeader, slot_tail) / 64 != offsetof(SegmentHeader, data_head) / 64);

static_assert(sizeof(RecordHeader) == kRecordHeaderSize);
static_assert(kRecordHeaderSize % 64 == 0, "slots are cache-line aligned");
static_assert(offsetof(RecordHeader, sequence) == 0);
static_assert(offsetof(RecordHeader, payload_position) == 8);
static_assert(offsetof(RecordHeader, payload_bytes) == 16);
static_assert(offsetof(RecordHeader, step) == 24);
static_assert(offsetof(RecordHeader, timestamp_unix_ns) == 32);
static_assert(offsetof(RecordHeader, rank) == 40);
static_assert(offsetof(RecordHeader, dtype) == 44);
static_assert(offsetof(RecordHeader, kind) == 45);
static_assert(offsetof(RecordHeader, ndim) == 46);
static_assert(offsetof(RecordHeader, render_hint) == 47);
static_assert(offsetof(RecordHeader, shape) == 48);
static_assert(offsetof(RecordHeader, name) == 112);
static_assert(offsetof(RecordHeader, device) == 240);
static_assert(offsetof(RecordHeader, label) == 256);
static_assert(offsetof(RecordHeader, flags) == 384);
static_assert(offsetof(RecordHeader, pool_position) == 392);
static_assert(offsetof(RecordHeader, pool_ordinal) == 400);
static_assert(offsetof(RecordHeader, pool_index) == 408);
static_assert(offsetof(RecordHeader, pool_generation) == 412);
static_assert(offsetof(RecordHeader, pool_event) == 416);
static_assert(offsetof(RecordHeader, row_labels_bytes) == 420);
static_assert(offsetof(RecordHeader, reserved) == 424);

static_assert(sizeof(DevicePoolEntry) == kDevicePoolEntrySize);
static_assert(kDevicePoolEntrySize % 64 == 0);
static_assert(offsetof(DevicePoolEntry, state) == 0);
static_assert(offsetof(DevicePoolEntry, generation) == 4);
static_assert(offsetof(DevicePoolEntry, device_ordinal) == 8);
static_assert(offsetof(DevicePoolEntry, event_count) == 12);
static_assert(offsetof(DevicePoolEntry, capacity) == 16);
static_assert(offsetof(DevicePoolEntry, generation_start_position) == 24);
static_assert(offsetof(DevicePoolEntry, generation_start_ordinal) == 32);
static_assert(offsetof(DevicePoolEntry, device_uuid) == 40);
static_assert(offsetof(DevicePoolEntry, mem_handle) == 64);
static_assert(offsetof(DevicePoolEntry, released_to) == 128);
static_assert(offsetof(DevicePoolEntry, released_ordinal) == 136);
static_assert(offsetof(DevicePoolEntry, consumer_refused) == 144);
static_assert(offsetof(DevicePoolEntry, event_handles) == 256);
// Producer identity and consumer releases never share a cache line.
static_assert(offsetof(DevicePoolEntry, released_to) / 64 != offsetof(DevicePoolEntry, mem_handle) / 64);

// Size in bytes of one element of `dtype`, 0 for an invalid value.
constexpr size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kInt8: return 1;
    case DType::kInt16: return 2;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kUInt8: return 1;
    case DType::kBool: return 1;
    case DType::kInvalid: return 0;
  }
  return 0;
}

const char* dtype_name(DType dtype);           // "float32", ... ; "invalid" otherwise
DType dtype_from_name(std::string_view name);  // the dtype dtype_name() calls `name`; kInvalid for any other
const char* tensor_kind_name(TensorKind k);    // "tensor", "activation", ...
// The kind tensor_kind_name() calls `name`; kInvalid for any other text.
TensorKind tensor_kind_from_name(std::string_view name);

constexpr uint64_t align_up(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

}  // namespace tensorscope::wire
