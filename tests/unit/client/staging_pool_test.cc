// StagingPool: the CUDA staging pool's bookkeeping (no GPU needed): blocks are aligned,
// contiguous, never overlap a block the daemon still holds, a full pool or event ring
// refuses instead of waiting, and reset() (daemon gone) frees everything while stale or
// hostile release positions change nothing.
#include <gtest/gtest.h>

#include <deque>
#include <random>

#include "staging_pool.h"

namespace tensorscope {
namespace {

constexpr uint64_t kA = StagingPool::kAlignment;

TEST(StagingPool, BlocksAreAlignedAndConsecutive) {
  StagingPool pool(16 * kA, 8);
  auto a = pool.reserve(10, 0, 0);
  auto b = pool.reserve(kA + 1, 0, 0);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->offset, 0u);
  EXPECT_EQ(a->bytes, 10u);
  EXPECT_EQ(a->end, kA);
  EXPECT_EQ(b->offset, kA);
  EXPECT_EQ(b->end, 3 * kA);
  EXPECT_EQ(a->event, 0u);
  EXPECT_EQ(b->event, 1u);
  EXPECT_FALSE(pool.reserve(0, 0, 0));
  EXPECT_FALSE(pool.reserve(17 * kA, 0, 0)) << "larger than the pool";
}

TEST(StagingPool, AFullPoolRefusesUntilTheDaemonReleases) {
  StagingPool pool(4 * kA, 16);
  auto a = pool.reserve(2 * kA, 0, 0);
  auto b = pool.reserve(2 * kA, 0, 0);
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(pool.reserve(1, 0, 0));
  auto c = pool.reserve(kA, a->end, 1);  // the daemon released a
  ASSERT_TRUE(c);
  EXPECT_EQ(c->offset, 0u);
}

TEST(StagingPool, ABlockThatDoesNotFitBeforeTheEndSkipsToTheStart) {
  StagingPool pool(4 * kA, 16);
  auto a = pool.reserve(3 * kA, 0, 0);
  ASSERT_TRUE(a);
  EXPECT_FALSE(pool.reserve(2 * kA, a->position, 0)) << "only one block free at the end";
  auto b = pool.reserve(2 * kA, a->end, 1);  // a released: skip the last block, start over
  ASSERT_TRUE(b);
  EXPECT_EQ(b->offset, 0u);
  EXPECT_EQ(b->position, 4 * kA);
  EXPECT_EQ(b->end, 6 * kA);
}

TEST(StagingPool, EventsAreReusedOnlyAfterTheirBlockIsReleased) {
  StagingPool pool(64 * kA, 2);
  auto a = pool.reserve(1, 0, 0);
  auto b = pool.reserve(1, 0, 0);
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(pool.reserve(1, 0, 0)) << "both events in use";
  auto c = pool.reserve(1, a->end, 1);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->event, a->event);
}

TEST(StagingPool, ResetFreesEverythingAndIgnoresStaleOrHostileReleases) {
  StagingPool pool(4 * kA, 4);
  auto a = pool.reserve(4 * kA, 0, 0);
  ASSERT_TRUE(a);
  EXPECT_FALSE(pool.reserve(1, 0, 0));
  // A release position beyond anything reserved frees only what was reserved.
  auto b = pool.reserve(kA, UINT64_MAX, UINT64_MAX);
  ASSERT_TRUE(b);
  EXPECT_FALSE(pool.reserve(4 * kA, UINT64_MAX, UINT64_MAX)) << "b is still held";
  pool.reset();  // the daemon died
  EXPECT_EQ(pool.generation(), 1u);
  auto c = pool.reserve(4 * kA, 0, 0);  // an old daemon's stale position changes nothing
  ASSERT_TRUE(c);
  EXPECT_EQ(c->generation, 1u);
  EXPECT_EQ(c->offset, 0u);
  EXPECT_EQ(c->position, pool.generation_start_position());
  EXPECT_FALSE(pool.reserve(1, a->end, 1)) << "a release from the old generation frees nothing";
}

// Random sizes and a daemon releasing in order at random moments: live blocks never
// overlap, every refusal happens only when the pool or the event ring is really full.
TEST(StagingPool, RandomTrafficNeverOverlapsALiveBlock) {
  constexpr uint64_t kCapacity = 64 * kA;
  constexpr uint32_t kEvents = 8;
  StagingPool pool(kCapacity, kEvents);
  std::mt19937_64 rng(42);
  std::deque<StagingPool::Block> live;
  uint64_t released_to = 0, released_ordinal = 0, reserved = 0, refused = 0;
  for (int i = 0; i < 20000; ++i) {
    if (!live.empty() && rng() % 3 == 0) {
      released_to = live.front().end;
      released_ordinal = live.front().ordinal + 1;
      live.pop_front();
      continue;
    }
    const uint64_t bytes = 1 + rng() % (20 * kA);
    auto block = pool.reserve(bytes, released_to, released_ordinal);
    if (!block) {
      ++refused;
      // Unreleased bytes, the gaps skipped before live blocks included.
      const uint64_t held = pool.head() - released_to;
      // Refused only when every event is held or the block would not fit even after a
      // skip to the next lap (a skip wastes less than one block).
      EXPECT_TRUE(live.size() >= kEvents || held + 2 * ((bytes + kA - 1) / kA * kA) > kCapacity)
          << "refused " << bytes << " bytes with " << held << " held by " << live.size() << " blocks";
      continue;
    }
    ++reserved;
    EXPECT_EQ(block->offset % kA, 0u);
    EXPECT_LE(block->offset + block->bytes, kCapacity);
    for (const auto& other : live) {
      const bool disjoint = block->offset + block->bytes <= other.offset || other.offset + other.bytes <= block->offset;
      EXPECT_TRUE(disjoint) << "block at " << block->offset << " overlaps a live block at " << other.offset;
    }
    live.push_back(*block);
  }
  EXPECT_GT(reserved, 5000u);
  EXPECT_GT(refused, 100u);
}

}  // namespace
}  // namespace tensorscope
