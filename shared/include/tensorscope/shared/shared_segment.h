// shared_segment.h — one producer's shared-memory segment: a 0600 file on tmpfs in the
// private runtime directory, mapped shared.
//
// The client creates it (create), the daemon's supervisor and worker open it (open).
// Creating reserves every byte of the file for real (posix_fallocate) before anything
// touches it, so a runtime directory too small for the segment is an error at creation
// (Docker's 64 MiB /dev/shm), never a SIGBUS later. The file appears under its final
// name only once sized, locked and given its header (it is built under a hidden
// ".<name>.creating" name and renamed), and the producer's object holds an OFD lock on
// it for its lifetime, so segment_cleanup.h can tell a dead producer's leftover from a
// live one. Opening never trusts the file: owner, mode, size and every header field are
// checked before a pointer into it is handed out.
// Thread safety: the object is immutable after construction; the mapped memory follows
// the rules of wire_format.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tensorscope/shared/sigbus_guard.h"
#include "tensorscope/base/status.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope {

struct SegmentLayout {
  uint64_t segment_size = 0;
  uint32_t slot_count = 0;
  uint64_t pool_table_offset = 0;
  uint64_t data_offset = 0;
  uint64_t data_capacity = 0;
};

// Layout for a segment of at most `budget_bytes` with `slot_count` slots (rounded up to
// a power of two). Fails when the budget leaves no room for data.
StatusOr<SegmentLayout> plan_segment_layout(uint64_t budget_bytes, uint32_t slot_count);

struct SegmentIdentity {
  int64_t pid = 0;
  uint32_t uid = 0;
  int32_t rank = 0;
  std::string session;
};

// Checks a header read from an untrusted mapping of `file_size` bytes: magic, ABI
// version, sizes and offsets. The message names what is wrong.
Status validate_segment_header(const wire::SegmentHeader& header, uint64_t file_size);

class SharedSegment {
 public:
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  // Producer: creates `path` (mode 0600; a leftover file of that name is replaced),
  // reserves its bytes, locks it, maps it and writes the header. When the failure is a
  // lack of space (ENOSPC, or a file size limit), *out_of_space is set.
  static StatusOr<std::unique_ptr<SharedSegment>> create(const std::string& path, const SegmentLayout& layout,
                                                         const SegmentIdentity& identity, bool* out_of_space = nullptr);

  // Consumer: opens an existing segment file, checks owner (our uid), mode (no group or
  // other bits), size and header, and maps it read-write (consumer fields are written).
  static StatusOr<std::unique_ptr<SharedSegment>> open(const std::string& path);

  // Consumer: the same checks on an already open descriptor (received from the
  // supervisor); `label` names it in messages. The descriptor stays the caller's.
  static StatusOr<std::unique_ptr<SharedSegment>> open_descriptor(int fd, const std::string& label);

  wire::SegmentHeader* header() const { return header_; }
  wire::RecordHeader* slot(uint64_t position) const { return slots_ + (position & (slot_count_ - 1)); }
  // Entry `index` (< wire::kMaxDevicePools) of the device pool table.
  wire::DevicePoolEntry* pool(size_t index) const { return pools_ + index; }
  uint8_t* data() const { return data_; }
  uint32_t slot_count() const { return slot_count_; }
  uint64_t data_capacity() const { return data_capacity_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // True once its file was found truncated under the mapping (sigbus_guard.h: the
  // missing pages read as zeros); the reader drops the segment.
  bool truncated() const { return guarded_mapping_faulted(guard_); }

  // Removes the file (the mapping stays valid). Missing file is not an error.
  Status unlink_file() const;

  // Producer: maps the page tables of the data region ahead of use (MADV_POPULATE_WRITE,
  // else a read of each page), so the first lap through the ring takes no page faults.
  // Never writes the memory: safe while the ring is in use.
  void prefault_data() const;

 private:
  SharedSegment() = default;
  static StatusOr<std::unique_ptr<SharedSegment>> map(int fd, uint64_t size, const std::string& label);

  void* base_ = nullptr;
  uint64_t mapped_bytes_ = 0;
  int guard_ = -1;    // sigbus_guard.h handle
  int lock_fd_ = -1;  // producer: the locked descriptor, closed with the object
  std::string path_;
  uint64_t size_ = 0;
  wire::SegmentHeader* header_ = nullptr;
  wire::RecordHeader* slots_ = nullptr;
  wire::DevicePoolEntry* pools_ = nullptr;
  uint8_t* data_ = nullptr;
  uint32_t slot_count_ = 0;
  uint64_t data_capacity_ = 0;
};

}  // namespace tensorscope
