// frame_store.h — the view server's frames: per tile (source, stream, device, rank, mode),
// the newest frame and a bounded history for the step cursor.
//
// Used by the view server: the board poller adds frames, WebSocket sessions look them up.
// Memory is capped (history_bytes), newest frames included: past the cap the oldest
// frame of the tile holding the most history goes first; when only newest frames are left
// (more tiles than the cap holds frames), the newest frame of the tile quiet longest goes
// (its tile is shown from finished videos until its next frame); never the frame just
// added. Tiles get small stable ids in order of first appearance, which is the model's
// order for a tracked model.
// Thread safety: every member function locks; frames are shared immutable values.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tensorscope/view/live_board.h"

namespace tensorscope::view {

struct TileKey {
  int source = 0;  // which session directory (0 for a single one)
  std::string stream, device, mode;
  int rank = 0;
  auto operator<=>(const TileKey&) const = default;
};

struct TileInfo {
  uint32_t id = 0;
  TileKey key;
  std::string kind;
  int64_t producer_pid = 0;
  int64_t newest_step = 0;
  uint64_t newest_seq = 0;  // store-wide sequence of the newest frame (0: none yet)
  uint64_t newest_render_unix_ns = 0;
  uint64_t frames_total = 0;       // as the worker counted them
  uint64_t frames_seen = 0;        // frames this store received
  int64_t history_first_step = 0;  // the oldest step kept (when history_frames > 0)
  size_t history_frames = 0;
};

using FramePtr = std::shared_ptr<const LiveFrame>;

class FrameStore {
 public:
  explicit FrameStore(uint64_t history_bytes);

  // Adds a frame of `source`; returns its tile id. Frames older than the tile's newest
  // (by step) join the history in step order but do not become the newest. A tile shows
  // one process: a frame of another process takes the tile over (the older process's
  // kept frames going; they stay in its videos) when its step is below the tile's newest
  // (a second run of the session, a restarted rank: steps start again) or it was pushed
  // kTakeOverNs after the tile's newest (the first process went quiet); otherwise it is
  // not kept (two processes alive at once: the tile does not flip between them).
  static constexpr uint64_t kTakeOverNs = 5'000'000'000;
  uint32_t add(int source, LiveFrame frame);
  // Declares a tile known only from finished files (index.json), so that it is listed
  // (in the order declared) before any live frame arrives.
  uint32_t declare(const TileKey& key, const std::string& kind, int64_t producer_pid);

  std::vector<TileInfo> tiles() const;
  std::optional<TileInfo> tile(uint32_t id) const;
  // The tile's newest frame and its store-wide sequence (null when none, or evicted).
  FramePtr newest(uint32_t id, uint64_t* seq = nullptr) const;
  // The kept frame with the largest step <= `step`; null when none is kept.
  FramePtr at_step(uint32_t id, int64_t step) const;
  // Store-wide sequence of the last frame added (grows with every add).
  uint64_t sequence() const;
  uint64_t bytes() const;
  uint64_t evicted() const;

 private:
  struct Tile {
    TileInfo info;
    FramePtr newest;
    std::deque<FramePtr> history;  // by step, newest included
    uint64_t history_bytes = 0;
  };
  uint32_t tile_id_locked(const TileKey& key, const std::string& kind, int64_t pid);
  void evict_locked(const LiveFrame* just_added);
  void drop_front_locked(Tile& t);

  const uint64_t cap_;
  mutable std::mutex mu_;
  std::map<TileKey, uint32_t> ids_;
  std::vector<Tile> tiles_;  // index = id - 1
  uint64_t bytes_ = 0;
  uint64_t sequence_ = 0;
  uint64_t evicted_ = 0;
};

// Bytes a frame is charged in the store.
uint64_t frame_cost(const LiveFrame& frame);

}  // namespace tensorscope::view
