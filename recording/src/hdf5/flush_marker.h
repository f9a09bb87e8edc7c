// flush_marker.h — the flush markers of an HDF5 recording: a header and two record
// slots in the file's user block, which name the last completed flush and the rows
// every group held then (see "Flushes, and what a killed writer loses" in
// docs/design/hdf5_recording.md for the layout and its state machine).
//
// Used inside a worker process by the HDF5 sink (writes them around each flush) and by
// recover_stale_partials() (reads them back to decide what a dead writer's partial must
// hold). The bytes are a file format: little-endian, checksummed, versioned
// (kMarkerVersion). Thread safety: plain types and functions without shared state; the
// I/O functions touch only the descriptor passed in.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensorscope/base/status.h"

namespace tensorscope::recording::hdf5 {

// The user block: the header (its first kHeaderBytes bytes are used; one pwrite within
// the file's first page) and the two record slots after the header's kHeaderSpan bytes.
inline constexpr uint64_t kUserblockBytes = uint64_t{256} << 10;
inline constexpr uint64_t kHeaderSpan = 512;
inline constexpr uint64_t kHeaderBytes = 64;
inline constexpr uint64_t kSlotBytes = (kUserblockBytes - kHeaderSpan) / 2;
inline constexpr uint32_t kMarkerVersion = 1;

enum class MarkState : uint32_t { kCreated = 1, kFlushing = 2, kFlushed = 3 };

// The header of the user block.
struct FlushHeader {
  MarkState state = MarkState::kCreated;
  uint64_t generation = 0;  // the flush in progress (flushing) or just completed (flushed)
  uint64_t completed = 0;   // the last completed flush (0: none); what follows is of it
  uint32_t record_slot = 0;
  bool record_complete = false;  // the slot holds a record of every group
  uint64_t groups = 0;
  uint64_t digest = 0;  // group_digest() of its groups
};

// One group's rows at a flush: the hash of its name and its row count.
struct GroupRows {
  uint64_t name_hash = 0;
  uint64_t rows = 0;
};

// The hash of a group name kept in records (hash_bytes of its bytes).
uint64_t name_hash(const std::string& name);

// Order-independent digest of the groups of a flush.
uint64_t group_digest(const std::vector<GroupRows>& groups);

// The header's kHeaderBytes bytes. Layout (little-endian): magic "TSH5FLSH", version
// u32, state u32, generation u64, completed u64, record_slot u32, record_complete u32,
// groups u64, digest u64, checksum u64 (hash_bytes of the 56 bytes before it).
std::vector<unsigned char> encode_header(const FlushHeader& header);

// Where record slot `slot` (0 or 1) starts in the file.
uint64_t slot_offset(uint32_t slot);

// A record of flush `generation`. Layout (little-endian): magic "TSH5RECD", generation
// u64, count u64, count x (name hash u64, rows u64), checksum u64 (hash_bytes of
// everything before it). At most kHdf5RecordGroups groups fit a slot.
std::vector<unsigned char> encode_record(uint64_t generation, const std::vector<GroupRows>& groups);

// Writes marker bytes at `offset` of `fd` (the file `path`). Errors: those of
// pwrite_all, "(the flush marker)" added.
Status write_marker(int fd, const std::string& path, uint64_t offset, const std::vector<unsigned char>& bytes);

// What a file's flush markers say, as recover_stale_partials() reads them.
struct Markers {
  // kAbsent: no header magic (a file of an older writer, or one never marked);
  // kDamaged: a header or record that fails its checks (`problem` says which);
  // kUsable: a header that passed (and its record, when it names a complete one).
  enum class Kind { kAbsent, kDamaged, kUsable } kind = Kind::kAbsent;
  std::string problem;  // kDamaged: why
  FlushHeader header;
  bool has_record = false;              // `record` is that of header.completed
  std::map<uint64_t, uint64_t> record;  // name hash -> rows
};

// Reads the header at offset 0 of `fd` and, when it names a completed flush with a
// complete record, that record.
Markers read_markers(int fd);

// Whether the groups and row counts read from a file (name, rows) are those of the last
// completed flush that `markers` name.
bool matches_markers(const std::vector<std::pair<std::string, uint64_t>>& rows, const Markers& markers);

}  // namespace tensorscope::recording::hdf5
