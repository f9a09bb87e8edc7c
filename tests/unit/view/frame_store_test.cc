// frame_store_test.cc — the view's frames: newest per tile, history by step, the memory cap.
#include "tensorscope/view/frame_store.h"

#include <gtest/gtest.h>

namespace tensorscope::view {
namespace {

LiveFrame frame(const std::string& stream, int64_t step, size_t bytes = 1000, int rank = 0) {
  LiveFrame f;
  f.stream = stream;
  f.kind = "output";
  f.device = "cpu";
  f.mode = "line";
  f.rank = rank;
  f.step = step;
  f.render_unix_ns = 1;
  f.jpeg.assign(bytes, 'j');
  return f;
}

TEST(FrameStoreTest, TilesGetIdsInOrderOfFirstAppearance) {
  FrameStore store(1 << 20);
  EXPECT_EQ(store.add(0, frame("a", 0)), 1u);
  EXPECT_EQ(store.add(0, frame("b", 0)), 2u);
  EXPECT_EQ(store.add(0, frame("a", 1)), 1u);
  EXPECT_EQ(store.add(0, frame("a", 1, 1000, 1)), 3u);  // another rank: another tile
  EXPECT_EQ(store.add(1, frame("a", 1)), 4u);           // another session: another tile
  EXPECT_EQ(store.declare(TileKey{0, "c", "cpu", "line", 0}, "output", 7), 5u);
  const auto tiles = store.tiles();
  ASSERT_EQ(tiles.size(), 5u);
  EXPECT_EQ(tiles[0].key.stream, "a");
  EXPECT_EQ(tiles[0].newest_step, 1);
  EXPECT_EQ(tiles[0].frames_seen, 2u);
  EXPECT_EQ(tiles[4].newest_seq, 0u);  // declared: no frame yet
  EXPECT_EQ(store.newest(5), nullptr);
}

// A second run of the session (a new process, its steps from 0 again) takes the tiles
// over; a late frame of the run before it is not kept.
TEST(FrameStoreTest, ASecondRunOfTheSessionTakesTheTileOver) {
  FrameStore store(1 << 20);
  auto of = [](int64_t pid, int64_t step, uint64_t push_ns) {
    LiveFrame f = frame("a", step);
    f.producer_pid = pid;
    f.push_unix_ns = push_ns;
    return f;
  };
  for (int64_t s = 0; s <= 100; s += 10) store.add(0, of(11, s, 1000 + static_cast<uint64_t>(s)));
  EXPECT_EQ(store.add(0, of(22, 0, 5000)), 1u) << "the same tile";
  uint64_t seq = 0;
  ASSERT_NE(store.newest(1, &seq), nullptr);
  EXPECT_EQ(store.newest(1)->producer_pid, 22);
  EXPECT_EQ(store.newest(1)->step, 0);
  EXPECT_EQ(store.tile(1)->producer_pid, 22);
  EXPECT_EQ(store.tile(1)->newest_step, 0);
  EXPECT_EQ(store.at_step(1, 50), store.newest(1)) << "the first run's frames are not mixed in";
  store.add(0, of(11, 110, 1200));  // the first run's, late
  EXPECT_EQ(store.newest(1)->producer_pid, 22);
  store.add(0, of(22, 10, 5100));
  EXPECT_EQ(store.newest(1)->step, 10);
  EXPECT_EQ(store.at_step(1, 5)->step, 0);
  // A third process alive beside it, ahead in steps: not kept, the tile stays with 22...
  store.add(0, of(33, 500, 5200));
  EXPECT_EQ(store.newest(1)->producer_pid, 22);
  store.add(0, of(22, 20, 5300));
  EXPECT_EQ(store.newest(1)->step, 20);
  // ... until 22 has been quiet for kTakeOverNs.
  store.add(0, of(33, 600, 5300 + FrameStore::kTakeOverNs + 1));
  EXPECT_EQ(store.newest(1)->producer_pid, 33);
}

TEST(FrameStoreTest, NewestAndAtStep) {
  FrameStore store(1 << 20);
  for (int64_t s : {10, 20, 30}) store.add(0, frame("a", s));
  store.add(0, frame("a", 15));  // late: history only
  uint64_t seq = 0;
  ASSERT_NE(store.newest(1, &seq), nullptr);
  EXPECT_EQ(store.newest(1)->step, 30);
  EXPECT_EQ(seq, 3u);  // the late frame did not become the newest
  EXPECT_EQ(store.at_step(1, 9), nullptr);
  EXPECT_EQ(store.at_step(1, 10)->step, 10);
  EXPECT_EQ(store.at_step(1, 17)->step, 15);
  EXPECT_EQ(store.at_step(1, 29)->step, 20);
  EXPECT_EQ(store.at_step(1, 1000)->step, 30);
  EXPECT_EQ(store.at_step(99, 10), nullptr);
  EXPECT_EQ(store.sequence(), 4u);
}

TEST(FrameStoreTest, TheCapEvictsTheOldestOfTheFattestTileAndKeepsEveryNewest) {
  const uint64_t cost = frame_cost(frame("a", 0, 10000));
  FrameStore store(cost * 10);
  for (int64_t s = 0; s < 30; ++s) store.add(0, frame("a", s, 10000));
  store.add(0, frame("b", 0, 10000));
  EXPECT_LE(store.bytes(), cost * 10 + 100);
  EXPECT_GT(store.evicted(), 0u);
  ASSERT_NE(store.newest(2), nullptr);  // b's only frame stays
  EXPECT_EQ(store.newest(1)->step, 29);
  EXPECT_EQ(store.at_step(1, 5), nullptr);  // a's oldest went first
  EXPECT_EQ(store.at_step(1, 28)->step, 28);
  const auto tiles = store.tiles();
  EXPECT_EQ(tiles[0].history_first_step, 29 - static_cast<int64_t>(tiles[0].history_frames) + 1);
}

TEST(FrameStoreTest, ACapSmallerThanOneFrameStillKeepsTheFrameJustAdded) {
  FrameStore store(10);
  store.add(0, frame("a", 0));
  store.add(0, frame("a", 1));
  ASSERT_NE(store.newest(1), nullptr);
  EXPECT_EQ(store.newest(1)->step, 1);
  EXPECT_EQ(store.at_step(1, 0), nullptr);
  store.add(0, frame("b", 0));
  EXPECT_EQ(store.newest(1), nullptr);  // a's newest went for b's
  ASSERT_NE(store.newest(2), nullptr);
  EXPECT_EQ(store.bytes(), frame_cost(frame("b", 0)));
}

TEST(FrameStoreTest, WithMoreTilesThanTheCapHoldsTheQuietestTilesLoseTheirNewestFrame) {
  const uint64_t cost = frame_cost(frame("s0", 0, 10000));
  FrameStore store(cost * 3);
  for (int i = 0; i < 5; ++i) {
    LiveFrame f = frame("s" + std::to_string(i), 0, 10000);
    f.render_unix_ns = 100 + static_cast<uint64_t>(i);  // s0 quiet longest
    store.add(0, std::move(f));
  }
  EXPECT_LE(store.bytes(), cost * 3);
  EXPECT_EQ(store.newest(1), nullptr);
  EXPECT_EQ(store.newest(2), nullptr);
  EXPECT_NE(store.newest(3), nullptr);
  EXPECT_NE(store.newest(5), nullptr);
  const auto tiles = store.tiles();
  EXPECT_EQ(tiles.size(), 5u);  // every tile stays listed
  EXPECT_EQ(tiles[0].newest_step, 0);
}

}  // namespace
}  // namespace tensorscope::view
