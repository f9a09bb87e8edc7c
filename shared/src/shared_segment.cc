#include "tensorscope/shared/shared_segment.h"

#include "tensorscope/base/clock.h"

#include "tensorscope/shared/sigbus_guard.h"

#include "tensorscope/shared/file_lock.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <limits>
#include <cstdio>
#include <chrono>
#include <cstring>
#include <new>

namespace tensorscope {
namespace {

using wire::SegmentHeader;

bool is_power_of_two(uint64_t v) { return v >= 2 && (v & (v - 1)) == 0; }

}  // namespace

StatusOr<SegmentLayout> plan_segment_layout(uint64_t budget_bytes, uint32_t slot_count) {
  if (slot_count < 2 || slot_count > (1u << 20)) {
    return Status::error("ring slot count must be between 2 and 1048576, got " + std::to_string(slot_count));
  }
  uint32_t slots = 2;
  while (slots < slot_count) slots <<= 1;
  SegmentLayout layout;
  layout.slot_count = slots;
  layout.pool_table_offset = wire::align_up(wire::kSegmentHeaderSize + uint64_t{slots} * wire::kRecordHeaderSize, 64);
  layout.data_offset =
      wire::align_up(layout.pool_table_offset + wire::kMaxDevicePools * wire::kDevicePoolEntrySize, 4096);
  if (budget_bytes < layout.data_offset + 4096) {
    return Status::error("shm budget of " + std::to_string(budget_bytes) + " bytes is too small: the header, " +
                         std::to_string(slots) + " slots and the device pool table need " +
                         std::to_string(layout.data_offset + 4096) + " bytes");
  }
  layout.data_capacity = (budget_bytes - layout.data_offset) / 4096 * 4096;
  layout.segment_size = layout.data_offset + layout.data_capacity;
  return layout;
}

Status validate_segment_header(const SegmentHeader& h, uint64_t file_size) {
  if (file_size < wire::kSegmentHeaderSize) {
    return Status::error("segment is " + std::to_string(file_size) + " bytes, smaller than its header");
  }
  if (h.magic != wire::kSegmentMagic) {
    return Status::error("segment has a wrong magic number (not a tensorscope segment)");
  }
  if (h.abi_version != wire::kAbiVersion) {
    return Status::error("segment speaks wire ABI version " + std::to_string(h.abi_version) +
                         " but this program speaks version " + std::to_string(wire::kAbiVersion) +
                         ": use the same tensorscope version in the client and the daemon");
  }
  if (h.header_size != wire::kSegmentHeaderSize || h.record_header_size != wire::kRecordHeaderSize) {
    return Status::error("segment header sizes do not match ABI version " + std::to_string(wire::kAbiVersion));
  }
  if (h.segment_size != file_size) {
    return Status::error("segment header says " + std::to_string(h.segment_size) + " bytes but the file has " +
                         std::to_string(file_size));
  }
  if (h.slot_table_offset != wire::kSegmentHeaderSize || !is_power_of_two(h.slot_count) || h.slot_count > (1u << 20)) {
    return Status::error("segment slot table is malformed");
  }
  const uint64_t slots_end = h.slot_table_offset + uint64_t{h.slot_count} * wire::kRecordHeaderSize;
  const uint64_t pools_end = h.pool_table_offset + wire::kMaxDevicePools * wire::kDevicePoolEntrySize;
  if (h.pool_count != wire::kMaxDevicePools || h.pool_entry_size != wire::kDevicePoolEntrySize ||
      h.pool_table_offset < slots_end || h.pool_table_offset % 64 != 0 || h.pool_table_offset > file_size) {
    return Status::error("segment device pool table is malformed");
  }
  if (h.data_offset < pools_end || h.data_offset % wire::kPayloadAlignment != 0 || h.data_capacity == 0 ||
      h.data_capacity % wire::kPayloadAlignment != 0 || h.data_offset > file_size ||
      h.data_capacity > file_size - h.data_offset) {
    return Status::error("segment data region is out of bounds");
  }
  if (h.session[wire::kSessionBytes - 1] != '\0') {
    return Status::error("segment session name is not terminated");
  }
  return Status::ok();
}

SharedSegment::~SharedSegment() {
  unregister_guarded_mapping(guard_);
  if (base_ != nullptr) ::munmap(base_, mapped_bytes_);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

StatusOr<std::unique_ptr<SharedSegment>> SharedSegment::map(int fd, uint64_t size, const std::string& label) {
  if (size == 0 || size > static_cast<uint64_t>(std::numeric_limits<size_t>::max())) {
    return Status::error("cannot map segment " + label + ": bad size " + std::to_string(size));
  }
  void* base = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return Status::from_errno("cannot map segment " + label, errno);
  auto segment = std::unique_ptr<SharedSegment>(new SharedSegment());
  segment->base_ = base;
  segment->mapped_bytes_ = size;
  segment->path_ = label;
  segment->size_ = size;
  segment->header_ = static_cast<SegmentHeader*>(base);
  segment->guard_ = register_guarded_mapping(base, static_cast<size_t>(size));
  return segment;
}

namespace {

// ".<name>.creating" beside `path`: the name a segment has until it is complete.
std::string creating_path(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return dir + "." + base + ".creating";
}

// A file size limit (RLIMIT_FSIZE) below `bytes` would make the kernel send SIGXFSZ
// while reserving: refuse the size instead.
bool exceeds_file_size_limit(uint64_t bytes) {
  rlimit limit{};
  return ::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      bytes > static_cast<uint64_t>(limit.rlim_cur);
}

}  // namespace

StatusOr<std::unique_ptr<SharedSegment>> SharedSegment::create(const std::string& path, const SegmentLayout& layout,
                                                               const SegmentIdentity& identity, bool* out_of_space) {
  if (out_of_space != nullptr) *out_of_space = false;
  if (identity.session.size() >= wire::kSessionBytes) {
    return Status::error("session name too long for the segment header");
  }
  if (exceeds_file_size_limit(layout.segment_size)) {
    if (out_of_space != nullptr) *out_of_space = true;
    return Status::error("cannot create segment " + path + " of " + std::to_string(layout.segment_size) +
                         " bytes: the process's file size limit (ulimit -f) is lower");
  }
  const std::string temp = creating_path(path);
  int fd = ::open(temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST && lock_state(temp) != LockState::kHeld) {
    ::unlink(temp.c_str());  // left by a dead process that had our pid
    fd = ::open(temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  }
  if (fd < 0) return Status::from_errno("cannot create segment " + temp, errno);
  auto fail = [&](Status st) {
    ::unlink(temp.c_str());
    ::close(fd);
    return st;
  };
  if (const int err = try_lock_file(fd); err != 0) {
    errno = err;
    return fail(Status::from_errno("cannot lock segment " + temp, errno));
  }
  if (::fchmod(fd, 0600) != 0) return fail(Status::from_errno("cannot chmod segment " + temp, errno));
  // Reserve every byte now: on tmpfs a sparse file whose pages cannot be allocated later
  // kills whoever touches them with SIGBUS.
  int reserved = EINTR;
  for (int tries = 0; reserved == EINTR && tries < 100; ++tries) {  // tmpfs stops at a pending signal
    reserved = ::posix_fallocate(fd, 0, static_cast<off_t>(layout.segment_size));
  }
  if (reserved != 0) {
    // ENOMEM: a memory cgroup limit, which counts tmpfs pages: as short of space as ENOSPC.
    if (out_of_space != nullptr) *out_of_space = reserved == ENOSPC || reserved == EFBIG || reserved == ENOMEM;
    return fail(Status::from_errno(
        "cannot reserve " + std::to_string(layout.segment_size) + " bytes for segment " + path, reserved));
  }
  auto mapped = map(fd, layout.segment_size, path);
  if (!mapped) return fail(mapped.status());
  SharedSegment& seg = **mapped;
  // The file is fresh (zero-filled): construct the header in place.
  auto* h = new (seg.header_) SegmentHeader();
  h->abi_version = wire::kAbiVersion;
  h->header_size = wire::kSegmentHeaderSize;
  h->segment_size = layout.segment_size;
  h->slot_table_offset = wire::kSegmentHeaderSize;
  h->slot_count = layout.slot_count;
  h->record_header_size = wire::kRecordHeaderSize;
  h->pool_table_offset = layout.pool_table_offset;
  h->pool_count = wire::kMaxDevicePools;
  h->pool_entry_size = wire::kDevicePoolEntrySize;
  h->data_offset = layout.data_offset;
  h->data_capacity = layout.data_capacity;
  h->producer_pid = identity.pid;
  h->producer_uid = identity.uid;
  h->rank = identity.rank;
  h->created_unix_ns = unix_time_ns();
  std::memcpy(h->session, identity.session.data(), identity.session.size());
  auto* base = reinterpret_cast<uint8_t*>(h);
  seg.slots_ = reinterpret_cast<wire::RecordHeader*>(base + h->slot_table_offset);
  seg.pools_ = reinterpret_cast<wire::DevicePoolEntry*>(base + h->pool_table_offset);
  for (size_t i = 0; i < wire::kMaxDevicePools; ++i) new (seg.pools_ + i) wire::DevicePoolEntry();
  seg.data_ = base + h->data_offset;
  seg.slot_count_ = h->slot_count;
  seg.data_capacity_ = h->data_capacity;
  for (uint32_t i = 0; i < layout.slot_count; ++i) {
    auto* slot = new (seg.slots_ + i) wire::RecordHeader();
    slot->sequence.store(i, std::memory_order_relaxed);  // FREE(i)
  }
  h->heartbeat_unix_ns.store(unix_time_ns(), std::memory_order_relaxed);
  // Publish the magic last: a reader that sees it sees a complete header.
  std::atomic_thread_fence(std::memory_order_release);
  reinterpret_cast<std::atomic<uint64_t>*>(&h->magic)->store(wire::kSegmentMagic, std::memory_order_release);
  // Complete: give it its name. A file of that name that nobody holds is a leftover of a
  // dead process with our pid and is replaced; a held one is never touched.
  // link() never replaces (an atomic no-replace rename on every local filesystem).
  int named = ::link(temp.c_str(), path.c_str());
  if (named != 0 && (errno == EPERM || errno == EOPNOTSUPP) && ::access(path.c_str(), F_OK) != 0) {
    named = ::rename(temp.c_str(), path.c_str());  // a filesystem without hard links
  } else if (named != 0 && errno == EEXIST && lock_state(path) != LockState::kHeld) {
    named = ::rename(temp.c_str(), path.c_str());
  }
  if (named == 0) ::unlink(temp.c_str());  // after rename() it is gone already
  if (named != 0) {
    Status st = Status::from_errno("cannot name segment " + path, errno);
    mapped = st;  // unmaps
    return fail(st);
  }
  seg.lock_fd_ = fd;  // the lock lives as long as the segment object
  return mapped;
}

void SharedSegment::prefault_data() const {
#ifdef MADV_POPULATE_WRITE
  const uintptr_t page = 4096;
  const auto start = reinterpret_cast<uintptr_t>(data_) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(data_) + data_capacity_;
  if (::madvise(reinterpret_cast<void*>(start), end - start, MADV_POPULATE_WRITE) == 0) return;
#endif
  // Older kernels: a read of each page maps it too (the file's pages exist already).
  uint64_t sum = 0;
  for (uint64_t offset = 0; offset < data_capacity_; offset += 4096) {
    sum += reinterpret_cast<const volatile uint8_t*>(data_)[offset];
  }
  (void)sum;
}

StatusOr<std::unique_ptr<SharedSegment>> SharedSegment::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Status::from_errno("cannot open segment " + path, errno);
  auto opened = open_descriptor(fd, path);
  ::close(fd);
  if (opened) (*opened)->path_ = path;
  return opened;
}

StatusOr<std::unique_ptr<SharedSegment>> SharedSegment::open_descriptor(int fd, const std::string& label) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::from_errno("cannot stat segment " + label, errno);
  if (!S_ISREG(st.st_mode)) return Status::error("segment " + label + " is not a regular file");
  if (st.st_uid != ::geteuid()) {
    return Status::error("segment " + label + " is owned by uid " + std::to_string(st.st_uid) + ", not by us (uid " +
                         std::to_string(::geteuid()) + ")");
  }
  if ((st.st_mode & 077) != 0) {
    char mode[16];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 0777));
    return Status::error("segment " + label + " is accessible to group or others (mode " + mode + "); expected 0600");
  }
  const auto file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < wire::kSegmentHeaderSize) {
    return Status::error("segment " + label + " is too small (" + std::to_string(file_size) + " bytes)");
  }
  // Producers reserve every byte before registering. Pages of a sparse file may have
  // nothing behind them on a full tmpfs, and reading one would kill this process (SIGBUS).
  // (Only on tmpfs, where st_blocks counts exactly the pages there are; a compressing
  // filesystem reports fewer blocks for a file full of zeros.)
  struct statfs fs {};
  if (::fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC && static_cast<uint64_t>(st.st_blocks) * 512 < file_size) {
    return Status::error("segment " + label + " is sparse (" + std::to_string(st.st_blocks * 512) + " of " +
                         std::to_string(file_size) + " bytes allocated); refusing it");
  }
  // Map the very file we checked, through the descriptor.
  auto mapped = map(fd, file_size, label);
  if (!mapped) return mapped.status();
  SharedSegment& seg = **mapped;
  Status valid = validate_segment_header(*seg.header_, file_size);
  if (!valid) return Status::error("segment " + label + ": " + valid.message());
  auto* base = reinterpret_cast<uint8_t*>(seg.header_);
  seg.slots_ = reinterpret_cast<wire::RecordHeader*>(base + seg.header_->slot_table_offset);
  seg.pools_ = reinterpret_cast<wire::DevicePoolEntry*>(base + seg.header_->pool_table_offset);
  seg.data_ = base + seg.header_->data_offset;
  seg.slot_count_ = seg.header_->slot_count;
  seg.data_capacity_ = seg.header_->data_capacity;
  return mapped;
}

Status SharedSegment::unlink_file() const {
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
    return Status::from_errno("cannot remove segment " + path_, errno);
  }
  return Status::ok();
}

}  // namespace tensorscope
