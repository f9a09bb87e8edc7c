#include "tensorscope/view/live_board.h"

#include "tensorscope/base/clock.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "tensorscope/base/posix_file.h"

namespace tensorscope::view {
namespace {

constexpr uint64_t align8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

BoardHeader* writable_header(uint8_t* base) { return reinterpret_cast<BoardHeader*>(base); }

const std::string kBoardInfix = ".live.";

}  // namespace

std::string live_watch_file_name(const std::string& session) { return session + kBoardInfix + "watched"; }

Status touch_watch_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid() || ::futimens(fd.get(), nullptr) != 0) {
    return Status::error(path + ": cannot touch: " + errno_text(errno));
  }
  return Status::ok();
}

bool watch_file_fresh(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  const int64_t touched = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  const int64_t now = static_cast<int64_t>(unix_time_ns());
  return now - touched < kWatchFreshNs && touched - now < kWatchFreshNs;
}

std::string live_board_file_name(const std::string& session, int worker_index) {
  return session + kBoardInfix + std::to_string(worker_index);
}

bool is_live_board_file_name(const std::string& file_name, const std::string& session) {
  const std::string prefix = session + kBoardInfix;
  if (file_name.size() <= prefix.size() || file_name.compare(0, prefix.size(), prefix) != 0) return false;
  for (size_t i = prefix.size(); i < file_name.size(); ++i) {
    if (file_name[i] < '0' || file_name[i] > '9') return false;
  }
  return file_name.size() - prefix.size() <= 4;
}

// ---- writer ----

StatusOr<std::unique_ptr<LiveBoardWriter>> LiveBoardWriter::create(const std::string& path, uint64_t capacity,
                                                                   int worker_index) {
  capacity &= ~uint64_t{7};
  if (capacity < kMinBoardCapacity || capacity > kMaxBoardCapacity) {
    return Status::error("live board capacity " + std::to_string(capacity) + " is outside " +
                         std::to_string(kMinBoardCapacity) + ".." + std::to_string(kMaxBoardCapacity));
  }
  const size_t slash = path.find_last_of('/');
  const std::string temp = (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + "." +
      path.substr(slash + 1) + ".creating." + std::to_string(::getpid());
  UniqueFd fd(::open(temp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return Status::error(temp + ": cannot create: " + errno_text(errno));
  const size_t mapped = kBoardHeaderBytes + capacity;
  if (::ftruncate(fd.get(), static_cast<off_t>(mapped)) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    return Status::error(temp + ": cannot size to " + std::to_string(mapped) + " bytes: " + errno_text(err));
  }
  void* base = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    ::unlink(temp.c_str());
    return Status::error(temp + ": cannot map: " + errno_text(err));
  }
  // tmpfs allocates pages on first touch: touch them now, so that a full /dev/shm fails
  // here with a message rather than with SIGBUS in the middle of a frame.
  if (::posix_fallocate(fd.get(), 0, static_cast<off_t>(mapped)) != 0) {
    ::munmap(base, mapped);
    ::unlink(temp.c_str());
    return Status::error(temp + ": cannot reserve " + std::to_string(mapped) +
                         " bytes (is the shared-memory file system full?)");
  }
  auto* h = new (base) BoardHeader{};
  h->magic = kBoardMagic;
  h->version = kBoardVersion;
  h->header_bytes = kBoardHeaderBytes;
  h->capacity = capacity;
  h->writer_pid = ::getpid();
  h->worker_index = worker_index;
  h->created_unix_ns = unix_time_ns();
  h->claimed.store(0, std::memory_order_relaxed);
  h->published.store(0, std::memory_order_release);
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::munmap(base, mapped);
    ::unlink(temp.c_str());
    return Status::error(path + ": cannot publish the live board: " + errno_text(err));
  }
  return std::unique_ptr<LiveBoardWriter>(new LiveBoardWriter(path, static_cast<uint8_t*>(base), mapped, capacity));
}

LiveBoardWriter::LiveBoardWriter(std::string path, uint8_t* base, size_t mapped, uint64_t capacity)
    : path_(std::move(path)), base_(base), mapped_(mapped), capacity_(capacity) {}

LiveBoardWriter::~LiveBoardWriter() { ::munmap(base_, mapped_); }

void LiveBoardWriter::remove() { ::unlink(path_.c_str()); }

uint64_t LiveBoardWriter::records() const { return writable_header(base_)->records.load(std::memory_order_relaxed); }

bool LiveBoardWriter::append(const LiveFrame& meta, std::string_view image) {
  BoardHeader* h = writable_header(base_);
  const uint64_t names = meta.stream.size() + meta.kind.size() + meta.device.size() + meta.mode.size();
  const std::string_view legend = meta.legend.size() <= kMaxLegendBytes ? meta.legend : std::string_view();
  const uint64_t bytes = align8(sizeof(BoardRecord) + names + image.size() + legend.size());
  if (meta.stream.size() > UINT16_MAX || meta.kind.size() > UINT8_MAX || meta.device.size() > UINT8_MAX ||
      meta.mode.size() > UINT8_MAX || bytes > capacity_ / 4 || meta.width < 0 || meta.width > UINT16_MAX ||
      meta.height < 0 || meta.height > UINT16_MAX) {
    h->refused.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  uint8_t* area = base_ + kBoardHeaderBytes;
  uint64_t position = h->published.load(std::memory_order_relaxed);
  uint64_t offset = position % capacity_;
  if (offset + bytes > capacity_) {  // starts the next lap
    const uint64_t tail = capacity_ - offset;
    h->claimed.store(position + tail, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    if (tail >= sizeof(BoardRecord)) {
      BoardRecord pad{};
      pad.magic = kPadMagic;
      pad.bytes = static_cast<uint32_t>(tail);
      std::memcpy(area + offset, &pad, sizeof(pad));
    }
    position += tail;
    offset = 0;
  }
  h->claimed.store(position + bytes, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);

  BoardRecord r{};
  r.magic = kRecordMagic;
  r.bytes = static_cast<uint32_t>(bytes);
  r.seq = ++seq_;
  r.step = meta.step;
  r.push_unix_ns = meta.push_unix_ns;
  r.render_unix_ns = unix_time_ns();
  r.producer_pid = meta.producer_pid;
  r.frames_total = meta.frames_total;
  r.rank = meta.rank;
  r.width = static_cast<uint16_t>(meta.width);
  r.height = static_cast<uint16_t>(meta.height);
  r.stream_bytes = static_cast<uint16_t>(meta.stream.size());
  r.kind_bytes = static_cast<uint8_t>(meta.kind.size());
  r.device_bytes = static_cast<uint8_t>(meta.device.size());
  r.mode_bytes = static_cast<uint8_t>(meta.mode.size());
  r.image_format = kImageJpeg;
  r.image_bytes = static_cast<uint32_t>(image.size());
  r.legend_bytes = static_cast<uint32_t>(legend.size());
  uint8_t* out = area + offset;
  std::memcpy(out, &r, sizeof(r));
  out += sizeof(r);
  for (std::string_view s : {std::string_view(meta.stream), std::string_view(meta.kind), std::string_view(meta.device),
                             std::string_view(meta.mode), image, legend}) {
    std::memcpy(out, s.data(), s.size());
    out += s.size();
  }
  h->published.store(position + bytes, std::memory_order_release);
  h->records.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// ---- reader ----

StatusOr<std::unique_ptr<LiveBoardReader>> LiveBoardReader::open(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return Status::error(path + ": cannot open: " + errno_text(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Status::error(path + ": cannot stat: " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) return Status::error(path + ": not a regular file");
  if (st.st_uid != ::getuid()) return Status::error(path + ": owned by another user");
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < kBoardHeaderBytes + kMinBoardCapacity || size > kBoardHeaderBytes + kMaxBoardCapacity) {
    return Status::error(path + ": not a live board (" + std::to_string(size) + " bytes)");
  }
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) return Status::error(path + ": cannot map: " + errno_text(errno));
  const auto* h = static_cast<const BoardHeader*>(base);
  if (h->magic != kBoardMagic || h->version != kBoardVersion || h->header_bytes != kBoardHeaderBytes ||
      h->capacity != size - kBoardHeaderBytes || h->capacity % 8 != 0) {
    ::munmap(base, size);
    return Status::error(path + ": not a live board of version " + std::to_string(kBoardVersion));
  }
  return std::unique_ptr<LiveBoardReader>(
      new LiveBoardReader(path, static_cast<const uint8_t*>(base), size, size - kBoardHeaderBytes,
                          static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)));
}

LiveBoardReader::LiveBoardReader(std::string path, const uint8_t* base, size_t mapped, uint64_t capacity, uint64_t dev,
                                 uint64_t ino)
    : path_(std::move(path)), base_(base), mapped_(mapped), capacity_(capacity), dev_(dev), ino_(ino) {}

LiveBoardReader::~LiveBoardReader() { ::munmap(const_cast<uint8_t*>(base_), mapped_); }

int64_t LiveBoardReader::writer_pid() const { return header()->writer_pid; }
int LiveBoardReader::worker_index() const { return header()->worker_index; }

bool LiveBoardReader::replaced() const {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) return true;
  return static_cast<uint64_t>(st.st_dev) != dev_ || static_cast<uint64_t>(st.st_ino) != ino_;
}

void LiveBoardReader::resync(uint64_t low) {
  const uint64_t lap_start = (low + capacity_ - 1) / capacity_ * capacity_;
  if (lap_start > position_) position_ = lap_start;
}

void LiveBoardReader::poll(std::vector<LiveFrame>* out, size_t max_frames) {
  const BoardHeader* h = header();
  const uint8_t* area = base_ + kBoardHeaderBytes;
  size_t emitted = 0;
  const uint64_t published = h->published.load(std::memory_order_acquire);
  if (!started_) {
    started_ = true;
    position_ = 0;
    if (published > capacity_) resync(published - capacity_);
  }
  // Ahead of what is published: after a resync to the start of the lap the writer is
  // writing (its first record is not published yet). Nothing to read until it is.
  if (position_ > published) return;
  if (published - position_ > capacity_) {
    ++lost_;
    resync(published - capacity_);
  }
  while (position_ < published && emitted < max_frames) {
    const uint64_t offset = position_ % capacity_;
    const uint64_t room = capacity_ - offset;
    if (room < sizeof(BoardRecord)) {  // a tail too short for a record: the writer skipped it
      position_ += room;
      continue;
    }
    BoardRecord r;
    std::memcpy(&r, area + offset, sizeof(r));
    const bool shape_ok = (r.magic == kRecordMagic || r.magic == kPadMagic) && r.bytes >= sizeof(BoardRecord) &&
        r.bytes % 8 == 0 && r.bytes <= room && position_ + r.bytes <= published;
    if (shape_ok && r.magic == kRecordMagic) {
      copy_.resize(r.bytes);
      std::memcpy(copy_.data(), area + offset, r.bytes);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t claimed = h->claimed.load(std::memory_order_relaxed);
    if (claimed > position_ + capacity_) {  // overwritten while (or before) we read it
      ++lost_;
      resync(claimed - capacity_);
      continue;
    }
    if (!shape_ok) {  // a board we cannot parse from here: wait for the next lap
      ++corrupt_;
      // Skip to the next lap, or to the end of the last whole record (a record boundary)
      // when that comes first.
      resync(position_ + 1);
      if (position_ > published) position_ = published;
      continue;
    }
    position_ += r.bytes;
    if (r.magic == kPadMagic) continue;
    std::memcpy(&r, copy_.data(), sizeof(r));
    const uint64_t need = uint64_t{sizeof(BoardRecord)} + r.stream_bytes + r.kind_bytes + r.device_bytes +
        r.mode_bytes + r.image_bytes + r.legend_bytes;
    if (need > r.bytes || r.image_format != kImageJpeg || r.stream_bytes == 0 || r.legend_bytes > kMaxLegendBytes) {
      ++corrupt_;
      continue;
    }
    LiveFrame f;
    const char* p = reinterpret_cast<const char*>(copy_.data()) + sizeof(BoardRecord);
    auto take = [&p](size_t n) {
      std::string s(p, n);
      p += n;
      return s;
    };
    f.stream = take(r.stream_bytes);
    f.kind = take(r.kind_bytes);
    f.device = take(r.device_bytes);
    f.mode = take(r.mode_bytes);
    f.jpeg = take(r.image_bytes);
    f.legend = take(r.legend_bytes);
    f.rank = r.rank;
    f.producer_pid = r.producer_pid;
    f.step = r.step;
    f.seq = r.seq;
    f.push_unix_ns = r.push_unix_ns;
    f.render_unix_ns = r.render_unix_ns;
    f.frames_total = r.frames_total;
    f.width = r.width;
    f.height = r.height;
    out->push_back(std::move(f));
    ++emitted;
  }
}

}  // namespace tensorscope::view
