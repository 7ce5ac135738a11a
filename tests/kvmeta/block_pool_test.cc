// Unit tests for kvmeta::BlockPool: allocation, LIFO reuse, reference counts, and the
// prefix-cache hooks (hash, evictable LRU, eviction listener).
#include "kvmeta/block_pool.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace kvforge::kvmeta {
namespace {

::testing::AssertionResult IsOk(const Status& s) {
  if (s.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << s.ToString();
}

BlockPool MakePool(int32_t num_blocks, int32_t block_tokens = 4) {
  Result<BlockPool> pool =
      BlockPool::Create({.num_blocks = num_blocks, .block_tokens = block_tokens});
  EXPECT_TRUE(pool.ok()) << pool.status().ToString();
  return std::move(pool).value();
}

TEST(BlockIdTest, StrongIdHelpers) {
  constexpr BlockId b = MakeBlockId(7);
  static_assert(BlockIndex(b) == 7);
  static_assert(!IsValid(kInvalidBlockId));
  EXPECT_EQ(ToString(b), "block#7");
  EXPECT_EQ(ToString(MakeSeqId(3)), "seq#3");
  EXPECT_EQ(SeqValue(MakeSeqId(-2)), -2);
}

TEST(BlockPoolTest, CreateRejectsBadConfig) {
  EXPECT_EQ(BlockPool::Create({.num_blocks = 0, .block_tokens = 16}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(BlockPool::Create({.num_blocks = -3, .block_tokens = 16}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(BlockPool::Create({.num_blocks = 4, .block_tokens = 0}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(BlockPool::Create({.num_blocks = 1, .block_tokens = 1}).ok());
}

TEST(BlockPoolTest, FreshPoolCounts) {
  BlockPool pool = MakePool(8, 16);
  EXPECT_EQ(pool.num_blocks(), 8);
  EXPECT_EQ(pool.block_tokens(), 16);
  EXPECT_EQ(pool.num_free_blocks(), 8);
  EXPECT_EQ(pool.num_used_blocks(), 0);
  EXPECT_EQ(pool.num_evictable_blocks(), 0);
  EXPECT_DOUBLE_EQ(pool.Usage(), 0.0);
  EXPECT_TRUE(IsOk(pool.CheckInvariants()));
}

TEST(BlockPoolTest, AllocateUntilEmptyThenNullopt) {
  BlockPool pool = MakePool(3);
  for (int32_t i = 0; i < 3; ++i) {
    std::optional<BlockId> b = pool.Allocate();
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(BlockIndex(*b), i);  // fresh pools hand out ids in order
    EXPECT_EQ(pool.RefCount(*b), 1);
    EXPECT_EQ(pool.State(*b), BlockState::kInUse);
  }
  EXPECT_FALSE(pool.Allocate().has_value());  // exhaustion is a value, not an error
  EXPECT_EQ(pool.num_free_blocks(), 0);
  EXPECT_DOUBLE_EQ(pool.Usage(), 1.0);
  EXPECT_TRUE(IsOk(pool.CheckInvariants()));
}

TEST(BlockPoolTest, FreedBlockIsReusedFirst) {
  BlockPool pool = MakePool(4);
  BlockId a = *pool.Allocate();
  BlockId b = *pool.Allocate();
  pool.Release(a);
  pool.Release(b);
  // LIFO: b was freed last, so it comes back first, then a.
  EXPECT_EQ(*pool.Allocate(), b);
  EXPECT_EQ(*pool.Allocate(), a);
  EXPECT_TRUE(IsOk(pool.CheckInvariants()));
}

TEST(BlockPoolTest, AllocateManyIsAllOrNothing) {
  BlockPool pool = MakePool(5);
  std::vector<BlockId> out;
  ASSERT_TRUE(pool.AllocateMany(3, &out));
  EXPECT_EQ(out.size(), 3u);
  EXPECT_FALSE(pool.AllocateMany(3, &out));  // only 2 left
  EXPECT_EQ(out.size(), 3u);
  EXPECT_EQ(pool.num_free_blocks(), 2);
  ASSERT_TRUE(pool.AllocateMany(0, &out));
  ASSERT_TRUE(pool.AllocateMany(2, &out));
  EXPECT_EQ(out.size(), 5u);
  EXPECT_EQ(pool.num_free_blocks(), 0);
  EXPECT_TRUE(IsOk(pool.CheckInvariants()));
}

TEST(BlockPoolTest, ReferenceCounting) {
  BlockPool pool = MakePool(2);
  BlockId b = *pool.Allocate();
  pool.AddRef(b);
  pool.AddRef(b);
  EXPECT_EQ(pool.RefCount(b), 3);
  EXPECT_TRUE(pool.IsShared(b));
  EXPECT_EQ(pool.num_shared_blocks(), 1);
  pool.Release(b);
  EXPECT_EQ(pool.num_shared_blocks(), 1);
  pool.Release(b);
  EXPECT_FALSE(pool.IsShared(b));
  EXPECT_EQ(pool.num_shared_blocks(), 0);
  EXPECT_EQ(pool.State(b), BlockState::kInUse);
  EXPECT_EQ(pool.num_free_blocks(), 1);
  pool.Release(b);
  EXPECT_EQ(pool.State(b), BlockState::kFree);
  EXPECT_EQ(pool.num_free_blocks(), 2);
  EXPECT_TRUE(IsOk(pool.CheckInvariants()));
}

TEST(BlockPoolTest, HashedBlockBecomesEvictableNotFree) {
  BlockPool pool = MakePool(3);
  BlockId b = *pool.Allocate();
  pool.SetHash(b, 0xABCD);
  EXPECT_EQ(pool.Hash(b), std::optional<uint64_t>(0xABCD));
  pool.Release(b);
  EXPECT_EQ(pool.State(b), BlockState::kEvictable);
  EXPECT_EQ(pool.num_evictable_blocks(), 1);
  EXPECT_EQ(pool.num_free_blocks(), 3);  // evictable blocks can still be handed out
  EXPECT_EQ(pool.num_used_blocks(), 0);
  EXPECT_EQ(pool.Hash(b), std::optional<uint64_t>(0xABCD));  // content kept for a later hit
  EXPECT_TRUE(IsOk(pool.CheckInvariants()));
}

TEST(BlockPoolTest, AllocatePrefersFreeBlocksThenEvictsLeastRecentlyReleased) {
  BlockPool pool = MakePool(3);
  std::vector<std::pair<BlockId, uint64_t>> evicted;
  pool.SetEvictionListener([&](BlockId b, uint64_t h) { evicted.emplace_back(b, h); });
  BlockId a = *pool.Allocate();
  BlockId b = *pool.Allocate();
  BlockId c = *pool.Allocate();
  pool.SetHash(a, 1);
  pool.SetHash(b, 2);
  pool.Release(b);  // released first: least recently used
  pool.Release(a);
  pool.Release(c);                                                // no hash: free stack
  EXPECT_EQ(pool.EvictionOrder(), (std::vector<BlockId>{b, a}));  // what the inspector shows
  EXPECT_EQ(*pool.Allocate(), c);  // the free stack wins over cached content
  EXPECT_TRUE(evicted.empty());
  EXPECT_EQ(*pool.Allocate(), b);  // LRU head
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].first, b);
  EXPECT_EQ(evicted[0].second, 2u);
  EXPECT_FALSE(pool.Hash(b).has_value());
  EXPECT_EQ(pool.RefCount(b), 1);
  EXPECT_EQ(pool.EvictionOrder(), (std::vector<BlockId>{a}));
  EXPECT_EQ(*pool.Allocate(), a);
  EXPECT_EQ(evicted.size(), 2u);
  EXPECT_TRUE(pool.EvictionOrder().empty());
  EXPECT_FALSE(pool.Allocate().has_value());
  EXPECT_TRUE(IsOk(pool.CheckInvariants()));
}

TEST(BlockPoolTest, AcquireRevivesEvictableAndSharesInUse) {
  BlockPool pool = MakePool(4);
  BlockId a = *pool.Allocate();
  pool.SetHash(a, 42);
  pool.Acquire(a);  // prefix hit on an in-use block
  EXPECT_EQ(pool.RefCount(a), 2);
  pool.Release(a);
  pool.Release(a);
  ASSERT_EQ(pool.State(a), BlockState::kEvictable);
  pool.Acquire(a);  // prefix hit on a cached, unreferenced block
  EXPECT_EQ(pool.State(a), BlockState::kInUse);
  EXPECT_EQ(pool.RefCount(a), 1);
  EXPECT_EQ(pool.num_evictable_blocks(), 0);
  EXPECT_EQ(pool.Hash(a), std::optional<uint64_t>(42));
  EXPECT_TRUE(IsOk(pool.CheckInvariants()));
}

TEST(BlockPoolTest, LruOrderFollowsReleaseOrderAcrossRevival) {
  BlockPool pool = MakePool(3);
  BlockId a = *pool.Allocate();
  BlockId b = *pool.Allocate();
  BlockId c = *pool.Allocate();
  pool.SetHash(a, 1);
  pool.SetHash(b, 2);
  pool.SetHash(c, 3);
  pool.Release(a);
  pool.Release(b);
  pool.Release(c);
  pool.Acquire(a);  // a leaves the LRU list from its head ...
  pool.Release(a);  // ... and comes back as the most recent
  EXPECT_EQ(*pool.Allocate(), b);
  EXPECT_EQ(*pool.Allocate(), c);
  EXPECT_EQ(*pool.Allocate(), a);
  EXPECT_TRUE(IsOk(pool.CheckInvariants()));
}

TEST(BlockPoolTest, ClearHashAndEvictAll) {
  BlockPool pool = MakePool(4);
  int evictions = 0;
  pool.SetEvictionListener([&](BlockId, uint64_t) { ++evictions; });
  std::vector<BlockId> blocks;
  ASSERT_TRUE(pool.AllocateMany(3, &blocks));
  for (BlockId b : blocks) pool.SetHash(b, static_cast<uint64_t>(BlockIndex(b)) + 100);
  pool.ClearHash(blocks[0]);  // in use: just forgets the hash
  EXPECT_FALSE(pool.Hash(blocks[0]).has_value());
  for (BlockId b : blocks) pool.Release(b);
  EXPECT_EQ(pool.State(blocks[0]), BlockState::kFree);
  EXPECT_EQ(pool.num_evictable_blocks(), 2);
  pool.ClearHash(blocks[1]);  // evictable -> free, no listener call (the caller asked)
  EXPECT_EQ(pool.State(blocks[1]), BlockState::kFree);
  EXPECT_EQ(evictions, 0);
  EXPECT_EQ(pool.EvictAll(), 1);
  EXPECT_EQ(evictions, 1);
  EXPECT_EQ(pool.num_evictable_blocks(), 0);
  EXPECT_EQ(pool.num_free_blocks(), 4);
  pool.ClearHash(blocks[2]);  // no hash: no-op
  EXPECT_TRUE(IsOk(pool.CheckInvariants()));
}

TEST(BlockPoolTest, MoveKeepsState) {
  BlockPool pool = MakePool(2);
  BlockId a = *pool.Allocate();
  BlockPool moved = std::move(pool);
  EXPECT_EQ(moved.RefCount(a), 1);
  EXPECT_EQ(moved.num_free_blocks(), 1);
  EXPECT_TRUE(IsOk(moved.CheckInvariants()));
}

TEST(BlockPoolDeathTest, DoubleReleaseAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  BlockPool pool = MakePool(2);
  BlockId a = *pool.Allocate();
  pool.Release(a);
  EXPECT_DEATH(pool.Release(a), "not in use");
}

TEST(BlockPoolDeathTest, AcquireFreeBlockAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  BlockPool pool = MakePool(2);
  EXPECT_DEATH(pool.Acquire(MakeBlockId(1)), "free block");
}

TEST(BlockPoolTest, TheContentDropObserverSeesEveryBlockWhoseContentGoes) {
  BlockPool pool = MakePool(3);
  std::vector<BlockId> dropped;
  pool.SetContentDropObserver([&](BlockId b) { dropped.push_back(b); });
  const BlockId a = *pool.Allocate();
  const BlockId b = *pool.Allocate();
  const BlockId c = *pool.Allocate();
  // A hashed block released is kept (evictable): no drop.
  pool.SetHash(a, 1);
  pool.Release(a);
  EXPECT_TRUE(dropped.empty());
  // An unhashed block released goes to the free stack: dropped.
  pool.Release(b);
  EXPECT_EQ(dropped, std::vector<BlockId>{b});
  // A private block about to be written in place: dropped (its old bytes are still there).
  pool.NoteInPlaceWrite(c);
  EXPECT_EQ(dropped.back(), c);
  // Allocate takes the free block first (no drop), then evicts the evictable one (a drop).
  dropped.clear();
  EXPECT_EQ(*pool.Allocate(), b);
  EXPECT_TRUE(dropped.empty());
  EXPECT_EQ(*pool.Allocate(), a);
  EXPECT_EQ(dropped, std::vector<BlockId>{a});
  // ClearHash of an evictable block and EvictAll drop; ClearHash of an in-use block does not
  // (its writer says NoteInPlaceWrite when it writes).
  pool.SetHash(a, 2);
  pool.ClearHash(a);
  EXPECT_EQ(dropped.size(), 1u);
  pool.SetHash(a, 3);
  pool.Release(a);
  pool.ClearHash(a);
  EXPECT_EQ(dropped.back(), a);
  const BlockId d = *pool.Allocate();
  pool.SetHash(d, 4);
  pool.Release(d);
  dropped.clear();
  EXPECT_EQ(pool.EvictAll(), 1);
  EXPECT_EQ(dropped, std::vector<BlockId>{d});
  EXPECT_TRUE(IsOk(pool.CheckInvariants()));
}

}  // namespace
}  // namespace kvforge::kvmeta
