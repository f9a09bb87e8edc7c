#include "tensorscope/view/frame_store.h"

#include <algorithm>

namespace tensorscope::view {

uint64_t frame_cost(const LiveFrame& f) {
  return f.jpeg.size() + f.legend.size() + f.stream.size() + f.kind.size() + f.device.size() + f.mode.size() +
      sizeof(LiveFrame) + 64;
}

FrameStore::FrameStore(uint64_t history_bytes) : cap_(history_bytes) {}

uint32_t FrameStore::tile_id_locked(const TileKey& key, const std::string& kind, int64_t pid) {
  auto it = ids_.find(key);
  if (it != ids_.end()) return it->second;
  Tile t;
  t.info.id = static_cast<uint32_t>(tiles_.size() + 1);
  t.info.key = key;
  t.info.kind = kind;
  t.info.producer_pid = pid;
  tiles_.push_back(std::move(t));
  ids_.emplace(key, tiles_.back().info.id);
  return tiles_.back().info.id;
}

uint32_t FrameStore::declare(const TileKey& key, const std::string& kind, int64_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  return tile_id_locked(key, kind, pid);
}

uint32_t FrameStore::add(int source, LiveFrame frame) {
  std::lock_guard<std::mutex> lock(mu_);
  const TileKey key{source, frame.stream, frame.device, frame.mode, frame.rank};
  const uint32_t id = tile_id_locked(key, frame.kind, frame.producer_pid);
  Tile& t = tiles_[id - 1];
  const uint64_t cost = frame_cost(frame);
  if (t.newest && frame.producer_pid != t.newest->producer_pid) {
    // Another process of the session: a second run, or a restarted rank, takes the tile
    // over when its steps start again below the tile's or the tile's process has been
    // quiet for kTakeOverNs; otherwise (two processes alive at once) its frame is not
    // kept, so the tile does not flip between them.
    const bool restarted = frame.step < t.newest->step;
    const bool quiet = frame.push_unix_ns > t.newest->push_unix_ns + kTakeOverNs;
    if (!restarted && !quiet) return id;
    while (!t.history.empty()) drop_front_locked(t);
    t.newest = nullptr;
  }
  auto ptr = std::make_shared<const LiveFrame>(std::move(frame));
  ++sequence_;
  t.info.frames_seen++;
  const bool newest = !t.newest || ptr->step >= t.newest->step;
  if (newest) {
    t.newest = ptr;
    t.info.kind = ptr->kind;
    t.info.producer_pid = ptr->producer_pid;
    t.info.newest_step = ptr->step;
    t.info.newest_seq = sequence_;
    t.info.newest_render_unix_ns = ptr->render_unix_ns;
    t.info.frames_total = ptr->frames_total;
    t.history.push_back(ptr);
  } else {
    auto pos = std::upper_bound(t.history.begin(), t.history.end(), ptr->step,
                                [](int64_t s, const FramePtr& f) { return s < f->step; });
    t.history.insert(pos, ptr);
  }
  t.history_bytes += cost;
  bytes_ += cost;
  evict_locked(ptr.get());
  return id;
}

void FrameStore::drop_front_locked(Tile& t) {
  const uint64_t cost = frame_cost(*t.history.front());
  if (t.history.front() == t.newest) t.newest = nullptr;
  t.history.pop_front();
  t.history_bytes -= cost;
  bytes_ -= cost;
  ++evicted_;
}

void FrameStore::evict_locked(const LiveFrame* just_added) {
  while (bytes_ > cap_) {
    // First the history: the oldest frame of the tile holding the most.
    Tile* fattest = nullptr;
    for (Tile& t : tiles_) {
      if (t.history.size() <= 1) continue;
      if (fattest == nullptr || t.history_bytes > fattest->history_bytes) fattest = &t;
    }
    if (fattest != nullptr) {
      drop_front_locked(*fattest);
      continue;
    }
    // Then, with more tiles than the cap holds frames, the newest frame of the tile that
    // has been quiet longest (it is shown from its finished videos meanwhile); never the
    // frame just added.
    Tile* quietest = nullptr;
    for (Tile& t : tiles_) {
      if (t.history.empty() || t.history.front().get() == just_added) continue;
      if (quietest == nullptr || t.history.front()->render_unix_ns < quietest->history.front()->render_unix_ns) {
        quietest = &t;
      }
    }
    if (quietest == nullptr) return;
    drop_front_locked(*quietest);
  }
}

std::vector<TileInfo> FrameStore::tiles() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TileInfo> out;
  out.reserve(tiles_.size());
  for (const Tile& t : tiles_) {
    TileInfo info = t.info;
    info.history_frames = t.history.size();
    info.history_first_step = t.history.empty() ? 0 : t.history.front()->step;
    out.push_back(std::move(info));
  }
  return out;
}

std::optional<TileInfo> FrameStore::tile(uint32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (id == 0 || id > tiles_.size()) return std::nullopt;
  TileInfo info = tiles_[id - 1].info;
  info.history_frames = tiles_[id - 1].history.size();
  info.history_first_step = info.history_frames == 0 ? 0 : tiles_[id - 1].history.front()->step;
  return info;
}

FramePtr FrameStore::newest(uint32_t id, uint64_t* seq) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (id == 0 || id > tiles_.size()) return nullptr;
  if (seq != nullptr) *seq = tiles_[id - 1].info.newest_seq;
  return tiles_[id - 1].newest;
}

FramePtr FrameStore::at_step(uint32_t id, int64_t step) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (id == 0 || id > tiles_.size()) return nullptr;
  const auto& h = tiles_[id - 1].history;
  if (h.empty()) return nullptr;
  auto pos = std::upper_bound(h.begin(), h.end(), step, [](int64_t s, const FramePtr& f) { return s < f->step; });
  return pos == h.begin() ? nullptr : *(pos - 1);
}

uint64_t FrameStore::sequence() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sequence_;
}

uint64_t FrameStore::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

uint64_t FrameStore::evicted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return evicted_;
}

}  // namespace tensorscope::view
