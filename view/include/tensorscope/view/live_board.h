// live_board.h — a worker's live board: the newest frames it drew, as small JPEG images,
// in a shared-memory file that live viewers read.
//
// Written by one worker process (LiveBoardWriter, its render thread), read by any number
// of viewers (LiveBoardReader: `tensorscope view`, or the daemon's own view server). The
// writer never waits for a reader and never learns of one: the board is a byte ring that
// the writer overwrites lap after lap; a reader that falls a lap behind loses frames,
// never the writer's time. Nothing read from a board is trusted: every length is checked,
// a torn or corrupt record is skipped and counted.
//
// File: <runtime dir>/<session>.live.<worker index> (mode 0600, created under a hidden
// name and renamed, so a reader never maps a half-initialised board; a restarted worker
// replaces the file, which a reader notices by its inode and opens again).
//
// Layout: BoardHeader (kBoardHeaderBytes) then `capacity` bytes of records. Positions
// are absolute byte counts since the board was created; a record lives at
// position % capacity and never wraps: a record that does not fit before the end of the
// area is preceded by a pad record (or, when fewer than sizeof(BoardRecord) bytes are
// left, by nothing: readers skip such a tail) and starts the next lap at offset 0.
// Protocol (a seqlock over byte ranges):
//   writer: claimed = end of the new record; release fence; write it; published = end.
//   reader: read [p, p + bytes) below published; acquire fence; the copy is whole when
//           claimed <= p + capacity (the writer had not come round to it).
// Thread safety: a writer is used by one thread; a reader by one thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tensorscope/base/status.h"

namespace tensorscope::view {

inline constexpr uint64_t kBoardMagic = 0x3130445242535454ULL;  // "TTSBRD01" little-endian
inline constexpr uint32_t kBoardVersion = 2;                    // 2: a frame's class legend
inline constexpr uint32_t kBoardHeaderBytes = 256;
inline constexpr uint32_t kRecordMagic = 0x4D415246;  // "FRAM"
inline constexpr uint32_t kPadMagic = 0x20444150;     // "PAD "
inline constexpr uint64_t kMinBoardCapacity = 64 * 1024;
inline constexpr uint64_t kMaxBoardCapacity = 1ULL << 32;
inline constexpr uint32_t kImageJpeg = 1;

struct BoardHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t header_bytes;  // kBoardHeaderBytes
  uint64_t capacity;      // bytes of the record area, a multiple of 8
  int64_t writer_pid;
  int32_t worker_index;
  uint32_t reserved0;
  uint64_t created_unix_ns;
  std::atomic<uint64_t> claimed;    // end of the record being written
  std::atomic<uint64_t> published;  // end of the last whole record
  std::atomic<uint64_t> records;    // records published (pads not counted)
  std::atomic<uint64_t> refused;    // frames the writer could not place (too large)
};
static_assert(sizeof(BoardHeader) <= kBoardHeaderBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(offsetof(BoardHeader, claimed) % 8 == 0);

// One frame. Followed by the stream, kind, device and mode names (not NUL-terminated),
// the image and the legend (JSON text, frame_renderer.h's legend_json; often none), then
// padding to a multiple of 8.
struct BoardRecord {
  uint32_t magic;           // kRecordMagic or kPadMagic
  uint32_t bytes;           // the whole record, header included, a multiple of 8
  uint64_t seq;             // 1, 2, ... per board
  int64_t step;             // training step of the frame
  uint64_t push_unix_ns;    // when the producer pushed the tensor
  uint64_t render_unix_ns;  // when the worker drew it
  int64_t producer_pid;
  uint64_t frames_total;  // frames drawn of this stream so far (this one included)
  int32_t rank;
  uint16_t width;
  uint16_t height;
  uint16_t stream_bytes;
  uint8_t kind_bytes;
  uint8_t device_bytes;
  uint8_t mode_bytes;
  uint8_t image_format;  // kImageJpeg
  uint16_t reserved;
  uint32_t image_bytes;
  uint32_t legend_bytes;  // at most kMaxLegendBytes
};
inline constexpr uint32_t kMaxLegendBytes = 16 * 1024;
static_assert(sizeof(BoardRecord) == 80);
static_assert(sizeof(BoardRecord) % 8 == 0);

// A frame as the reader hands it out (owned copies, every field checked), and as a writer
// describes one (seq, render_unix_ns and jpeg are then set by the writer).
struct LiveFrame {
  std::string stream, kind, device, mode;
  int rank = 0;
  int64_t producer_pid = 0;
  int64_t step = 0;
  uint64_t seq = 0;
  uint64_t push_unix_ns = 0;
  uint64_t render_unix_ns = 0;
  uint64_t frames_total = 0;
  int width = 0, height = 0;
  std::string jpeg;    // the image bytes
  std::string legend;  // JSON: where the frame shows its classes (pca / tsne of labelled rows); "" for none
};

// Workers publish only while a page watches: a view server with a page open touches
// <runtime dir>/<session>.live.watched every second; a worker whose last look at it found
// it touched within kWatchFreshNs publishes, otherwise it spends nothing on live frames.
inline constexpr int64_t kWatchFreshNs = 5'000'000'000;
std::string live_watch_file_name(const std::string& session);
// Touches (creating, mode 0600) the watch file `path`. Errors name it.
Status touch_watch_file(const std::string& path);
// True when the watch file `path` was touched within kWatchFreshNs (wall clock).
bool watch_file_fresh(const std::string& path);

// The board's file name for worker `worker_index` of `session`.
std::string live_board_file_name(const std::string& session, int worker_index);
// True when `file_name` is a board of `session` (what a viewer opens in the runtime dir).
bool is_live_board_file_name(const std::string& file_name, const std::string& session);

class LiveBoardWriter {
 public:
  // Creates (or replaces) `path` with a board of `capacity` bytes (rounded down to a
  // multiple of 8, kMinBoardCapacity..kMaxBoardCapacity).
  static StatusOr<std::unique_ptr<LiveBoardWriter>> create(const std::string& path, uint64_t capacity,
                                                           int worker_index);
  ~LiveBoardWriter();
  LiveBoardWriter(const LiveBoardWriter&) = delete;
  LiveBoardWriter& operator=(const LiveBoardWriter&) = delete;

  // Publishes `image` as a frame described by `meta` (its seq, render time and jpeg are
  // not read); false (and counted in the header's `refused`) when it cannot fit (more
  // than a quarter of the board, or names too long). Never blocks.
  bool append(const LiveFrame& meta, std::string_view image);
  // Deletes the file (the worker exits cleanly); readers keep what they copied.
  void remove();

  const std::string& path() const { return path_; }
  uint64_t capacity() const { return capacity_; }
  uint64_t records() const;

 private:
  LiveBoardWriter(std::string path, uint8_t* base, size_t mapped, uint64_t capacity);
  std::string path_;
  uint8_t* base_;
  size_t mapped_;
  uint64_t capacity_;
  uint64_t seq_ = 0;
};

class LiveBoardReader {
 public:
  // Maps `path` read-only after checking its header against the file's size.
  static StatusOr<std::unique_ptr<LiveBoardReader>> open(const std::string& path);
  ~LiveBoardReader();
  LiveBoardReader(const LiveBoardReader&) = delete;
  LiveBoardReader& operator=(const LiveBoardReader&) = delete;

  // Appends to `out` the frames published since the last call (at most `max_frames`);
  // the first call starts at the oldest frame still on the board. Frames overwritten
  // before they could be read are counted in lost(); corrupt ones in corrupt().
  void poll(std::vector<LiveFrame>* out, size_t max_frames = SIZE_MAX);

  // True when the file at path() is no longer the one mapped (the worker restarted) or
  // is gone.
  bool replaced() const;

  const std::string& path() const { return path_; }
  int64_t writer_pid() const;
  int worker_index() const;
  uint64_t lost() const { return lost_; }
  uint64_t corrupt() const { return corrupt_; }

 private:
  LiveBoardReader(std::string path, const uint8_t* base, size_t mapped, uint64_t capacity, uint64_t dev, uint64_t ino);
  // Moves past a lap the writer overwrote: to the first lap start at or after `low`.
  void resync(uint64_t low);
  const BoardHeader* header() const { return reinterpret_cast<const BoardHeader*>(base_); }

  std::string path_;
  const uint8_t* base_;
  size_t mapped_;
  uint64_t capacity_;
  uint64_t dev_, ino_;
  uint64_t position_ = 0;
  bool started_ = false;
  uint64_t lost_ = 0, corrupt_ = 0;
  std::vector<uint8_t> copy_;
};

}  // namespace tensorscope::view
