// Unit tests for kvmeta::BlockTable: on-demand allocation, slot mapping, all-or-nothing
// shortage, Fork, copy-on-write on append and on overwrite, Truncate/PopTokens, Free, and the
// cached-block hook.
#include "kvmeta/block_table.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace kvforge::kvmeta {
namespace {

::testing::AssertionResult IsOk(const Status& s) {
  if (s.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << s.ToString();
}

BlockPool MakePool(int32_t num_blocks, int32_t block_tokens) {
  Result<BlockPool> pool =
      BlockPool::Create({.num_blocks = num_blocks, .block_tokens = block_tokens});
  EXPECT_TRUE(pool.ok()) << pool.status().ToString();
  return std::move(pool).value();
}

TEST(BlocksForTokensTest, CeilDivision) {
  static_assert(BlocksForTokens(0, 16) == 0);
  static_assert(BlocksForTokens(1, 16) == 1);
  static_assert(BlocksForTokens(16, 16) == 1);
  static_assert(BlocksForTokens(17, 16) == 2);
  static_assert(BlocksForTokens(5, 1) == 5);
}

TEST(BlockTableTest, AppendAllocatesOnDemand) {
  BlockPool pool = MakePool(8, 4);
  BlockTable t(pool.block_tokens());
  EXPECT_TRUE(t.empty());
  WriteOutcome w = t.AppendSlots(pool, 0);
  EXPECT_TRUE(w.ok());
  EXPECT_EQ(t.num_blocks(), 0);

  w = t.AppendSlots(pool, 1);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w.new_blocks, 1);
  EXPECT_TRUE(w.copies.empty());
  EXPECT_EQ(t.num_tokens(), 1);
  EXPECT_EQ(t.num_blocks(), 1);
  EXPECT_EQ(t.spare_slots(), 3);

  w = t.AppendSlots(pool, 3);  // fills block 0 exactly
  EXPECT_EQ(w.new_blocks, 0);
  EXPECT_EQ(t.num_blocks(), 1);
  EXPECT_EQ(t.spare_slots(), 0);

  w = t.AppendSlots(pool, 5);  // 9 tokens -> 3 blocks
  EXPECT_EQ(w.new_blocks, 2);
  EXPECT_EQ(t.num_tokens(), 9);
  EXPECT_EQ(t.num_blocks(), 3);
  EXPECT_EQ(pool.num_free_blocks(), 5);
  EXPECT_TRUE(IsOk(t.CheckInvariants()));
  t.Free(pool);
  EXPECT_EQ(pool.num_free_blocks(), 8);
}

TEST(BlockTableTest, SlotMapping) {
  BlockPool pool = MakePool(8, 4);
  BlockTable t(4);
  ASSERT_TRUE(t.AppendSlots(pool, 10).ok());
  for (int64_t i = 0; i < 10; ++i) {
    SlotRef s = t.Slot(i);
    EXPECT_EQ(s.block, t.blocks()[static_cast<size_t>(i / 4)]);
    EXPECT_EQ(s.offset, i % 4);
  }
  t.Free(pool);
}

TEST(BlockTableTest, ShortageChangesNothingAndReportsMissing) {
  BlockPool pool = MakePool(3, 4);
  BlockTable t(4);
  ASSERT_TRUE(t.AppendSlots(pool, 6).ok());  // 2 blocks
  const std::vector<BlockId> before = t.blocks();
  WriteOutcome w = t.AppendSlots(pool, 11);  // 17 tokens need 5 blocks, 3 more than held, 1 free
  EXPECT_FALSE(w.ok());
  EXPECT_EQ(w.missing_blocks, 2);
  EXPECT_EQ(t.num_tokens(), 6);
  EXPECT_EQ(t.blocks(), before);
  EXPECT_EQ(pool.num_free_blocks(), 1);
  EXPECT_EQ(t.BlocksNeededToAppend(pool, 11), 3);
  EXPECT_TRUE(t.AppendSlots(pool, 6).ok());  // 12 tokens: exactly 3 blocks
  EXPECT_EQ(pool.num_free_blocks(), 0);
  EXPECT_TRUE(t.AppendSlots(pool, 0).ok());
  t.Free(pool);
  EXPECT_TRUE(IsOk(pool.CheckInvariants()));
}

TEST(BlockTableTest, ForkSharesEveryBlock) {
  BlockPool pool = MakePool(8, 4);
  BlockTable parent(4);
  ASSERT_TRUE(parent.AppendSlots(pool, 7).ok());
  BlockTable child = parent.Fork(pool);
  EXPECT_EQ(child.blocks(), parent.blocks());
  EXPECT_EQ(child.num_tokens(), 7);
  for (BlockId b : parent.blocks()) EXPECT_EQ(pool.RefCount(b), 2);
  EXPECT_EQ(pool.num_free_blocks(), 6);
  child.Free(pool);
  for (BlockId b : parent.blocks()) EXPECT_EQ(pool.RefCount(b), 1);
  parent.Free(pool);
  EXPECT_EQ(pool.num_free_blocks(), 8);
}

TEST(BlockTableTest, AppendIntoSharedPartialBlockCopiesOnWrite) {
  BlockPool pool = MakePool(8, 4);
  BlockTable parent(4);
  ASSERT_TRUE(parent.AppendSlots(pool, 6).ok());  // block 1 holds 2 of 4 tokens
  BlockTable child = parent.Fork(pool);
  const BlockId shared_full = parent.blocks()[0];
  const BlockId shared_tail = parent.blocks()[1];

  EXPECT_EQ(child.BlocksNeededToAppend(pool, 1), 1);  // the copy
  WriteOutcome w = child.AppendSlots(pool, 1);
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w.copies.size(), 1u);
  EXPECT_EQ(w.copies[0].src, shared_tail);
  EXPECT_NE(w.copies[0].dst, shared_tail);
  EXPECT_EQ(w.copies[0].num_tokens, 2);  // only the valid slots need copying
  EXPECT_EQ(w.new_blocks, 1);
  EXPECT_EQ(child.blocks()[0], shared_full);  // the full block stays shared
  EXPECT_EQ(child.blocks()[1], w.copies[0].dst);
  EXPECT_EQ(pool.RefCount(shared_full), 2);
  EXPECT_EQ(pool.RefCount(shared_tail), 1);  // parent keeps it alone now
  EXPECT_EQ(parent.num_tokens(), 6);

  // The child's tail is private now: the next append writes in place.
  w = child.AppendSlots(pool, 1);
  EXPECT_TRUE(w.copies.empty());
  EXPECT_EQ(w.new_blocks, 0);
  // The parent's tail is private too: no copy either.
  w = parent.AppendSlots(pool, 3);
  EXPECT_TRUE(w.copies.empty());
  EXPECT_EQ(w.new_blocks, 1);
  child.Free(pool);
  parent.Free(pool);
  EXPECT_EQ(pool.num_free_blocks(), 8);
  EXPECT_TRUE(IsOk(pool.CheckInvariants()));
}

TEST(BlockTableTest, AppendAfterFullSharedBlockNeedsNoCopy) {
  BlockPool pool = MakePool(8, 4);
  BlockTable parent(4);
  ASSERT_TRUE(parent.AppendSlots(pool, 8).ok());
  BlockTable child = parent.Fork(pool);
  WriteOutcome w = child.AppendSlots(pool, 1);
  EXPECT_TRUE(w.copies.empty());
  EXPECT_EQ(w.new_blocks, 1);
  EXPECT_EQ(pool.RefCount(parent.blocks()[1]), 2);
  child.Free(pool);
  parent.Free(pool);
}

TEST(BlockTableTest, CopyOnWriteCountsTowardsShortage) {
  BlockPool pool = MakePool(3, 4);
  BlockTable parent(4);
  ASSERT_TRUE(parent.AppendSlots(pool, 6).ok());
  BlockTable child = parent.Fork(pool);
  // 1 free block; appending 3 tokens needs a copy of the tail plus one new block.
  WriteOutcome w = child.AppendSlots(pool, 3);
  EXPECT_FALSE(w.ok());
  EXPECT_EQ(w.missing_blocks, 1);
  EXPECT_EQ(child.blocks(), parent.blocks());
  EXPECT_EQ(pool.RefCount(parent.blocks()[1]), 2);
  w = child.AppendSlots(pool, 2);  // fits in the copied tail
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w.copies.size(), 1u);
  child.Free(pool);
  parent.Free(pool);
  EXPECT_TRUE(IsOk(pool.CheckInvariants()));
}

TEST(BlockTableTest, MakeWritableCopiesEverySharedBlockInRange) {
  BlockPool pool = MakePool(10, 4);
  BlockTable parent(4);
  ASSERT_TRUE(parent.AppendSlots(pool, 14).ok());  // blocks 0..3, last holds 2
  BlockTable child = parent.Fork(pool);
  EXPECT_EQ(child.BlocksNeededToWrite(pool, 3, 9), 3);  // touches blocks 0, 1, 2
  WriteOutcome w = child.MakeWritable(pool, 3, 9);
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w.copies.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(w.copies[static_cast<size_t>(i)].src, parent.blocks()[static_cast<size_t>(i)]);
    EXPECT_EQ(w.copies[static_cast<size_t>(i)].dst, child.blocks()[static_cast<size_t>(i)]);
    EXPECT_EQ(w.copies[static_cast<size_t>(i)].num_tokens, 4);
  }
  EXPECT_EQ(child.blocks()[3], parent.blocks()[3]);  // untouched block stays shared
  // Overwriting the shared partial tail copies only its 2 valid slots.
  w = child.MakeWritable(pool, 13, 14);
  ASSERT_EQ(w.copies.size(), 1u);
  EXPECT_EQ(w.copies[0].num_tokens, 2);
  // Empty range: nothing to do.
  EXPECT_TRUE(child.MakeWritable(pool, 5, 5).copies.empty());
  // Private blocks are written in place.
  EXPECT_TRUE(child.MakeWritable(pool, 0, 14).copies.empty());
  child.Free(pool);
  parent.Free(pool);
  EXPECT_EQ(pool.num_free_blocks(), 10);
}

TEST(BlockTableTest, MakeWritableShortageChangesNothing) {
  BlockPool pool = MakePool(4, 4);
  BlockTable parent(4);
  ASSERT_TRUE(parent.AppendSlots(pool, 12).ok());
  BlockTable child = parent.Fork(pool);
  WriteOutcome w = child.MakeWritable(pool, 0, 12);  // 3 copies, 1 free
  EXPECT_EQ(w.missing_blocks, 2);
  EXPECT_TRUE(w.copies.empty());
  EXPECT_EQ(child.blocks(), parent.blocks());
  child.Free(pool);
  parent.Free(pool);
  EXPECT_TRUE(IsOk(pool.CheckInvariants()));
}

TEST(BlockTableTest, WritingIntoPrivateHashedBlockClearsHash) {
  BlockPool pool = MakePool(4, 4);
  BlockTable t(4);
  ASSERT_TRUE(t.AppendSlots(pool, 8).ok());
  pool.SetHash(t.blocks()[1], 77);
  t.PopTokens(pool, 1);  // speculative rollback into a registered block
  ASSERT_TRUE(pool.Hash(t.blocks()[1]).has_value());
  ASSERT_TRUE(t.AppendSlots(pool, 1).ok());  // overwrites slot 3 of block 1
  EXPECT_FALSE(pool.Hash(t.blocks()[1]).has_value());
  t.Free(pool);
}

TEST(BlockTableTest, TruncateAndPopRelease) {
  BlockPool pool = MakePool(8, 4);
  BlockTable t(4);
  ASSERT_TRUE(t.AppendSlots(pool, 15).ok());  // 4 blocks
  t.Truncate(pool, 9);
  EXPECT_EQ(t.num_tokens(), 9);
  EXPECT_EQ(t.num_blocks(), 3);
  EXPECT_EQ(pool.num_free_blocks(), 5);
  t.PopTokens(pool, 1);  // 8 tokens: exactly 2 blocks
  EXPECT_EQ(t.num_blocks(), 2);
  t.PopTokens(pool, 0);
  EXPECT_EQ(t.num_tokens(), 8);
  t.Truncate(pool, 8);
  EXPECT_EQ(t.num_blocks(), 2);
  t.Truncate(pool, 0);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.num_blocks(), 0);
  EXPECT_EQ(pool.num_free_blocks(), 8);
  EXPECT_TRUE(IsOk(t.CheckInvariants()));
}

TEST(BlockTableTest, TruncateIntoSharedBlockThenAppendCopies) {
  BlockPool pool = MakePool(8, 4);
  BlockTable parent(4);
  ASSERT_TRUE(parent.AppendSlots(pool, 8).ok());
  BlockTable beam = parent.Fork(pool);
  beam.Truncate(pool, 6);  // the beam rolls back inside shared block 1
  EXPECT_EQ(pool.RefCount(parent.blocks()[1]), 2);
  WriteOutcome w = beam.AppendSlots(pool, 1);
  ASSERT_EQ(w.copies.size(), 1u);
  EXPECT_EQ(w.copies[0].src, parent.blocks()[1]);
  EXPECT_EQ(w.copies[0].num_tokens, 2);
  EXPECT_EQ(pool.RefCount(parent.blocks()[1]), 1);
  beam.Free(pool);
  parent.Free(pool);
  EXPECT_TRUE(IsOk(pool.CheckInvariants()));
}

TEST(BlockTableTest, FreeLeavesSharedBlocksWithOtherHolders) {
  BlockPool pool = MakePool(8, 4);
  BlockTable a(4);
  ASSERT_TRUE(a.AppendSlots(pool, 8).ok());
  BlockTable b = a.Fork(pool);
  ASSERT_TRUE(b.AppendSlots(pool, 4).ok());
  a.Free(pool);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(pool.num_used_blocks(), 3);
  for (BlockId id : b.blocks()) EXPECT_EQ(pool.RefCount(id), 1);
  b.Free(pool);
  EXPECT_EQ(pool.num_used_blocks(), 0);
}

TEST(BlockTableTest, AppendCachedBlockRevivesEvictable) {
  BlockPool pool = MakePool(4, 4);
  BlockTable first(4);
  ASSERT_TRUE(first.AppendSlots(pool, 4).ok());
  const BlockId cached = first.blocks()[0];
  pool.SetHash(cached, 9);
  first.Free(pool);
  ASSERT_EQ(pool.State(cached), BlockState::kEvictable);

  BlockTable second(4);
  second.AppendCachedBlock(pool, cached);  // prefix hit
  EXPECT_EQ(second.num_tokens(), 4);
  EXPECT_EQ(second.blocks()[0], cached);
  EXPECT_EQ(pool.RefCount(cached), 1);
  BlockTable third(4);
  third.AppendCachedBlock(pool, cached);  // a second hit shares it
  EXPECT_EQ(pool.RefCount(cached), 2);
  // Appending past a shared full block needs no copy.
  WriteOutcome w = third.AppendSlots(pool, 1);
  EXPECT_TRUE(w.copies.empty());
  EXPECT_TRUE(IsOk(third.CheckInvariants()));
  second.Free(pool);
  third.Free(pool);
  EXPECT_TRUE(IsOk(pool.CheckInvariants()));
}

TEST(BlockTableTest, SingleTokenBlocks) {
  BlockPool pool = MakePool(5, 1);
  BlockTable t(1);
  ASSERT_TRUE(t.AppendSlots(pool, 3).ok());
  BlockTable u = t.Fork(pool);
  // With one-token blocks every block is full, so appends never copy ...
  EXPECT_TRUE(u.AppendSlots(pool, 1).copies.empty());
  // ... but overwrites of shared tokens do.
  EXPECT_EQ(u.MakeWritable(pool, 1, 2).copies.size(), 1u);
  EXPECT_FALSE(u.AppendSlots(pool, 1).ok());  // pool empty
  t.Free(pool);
  u.Free(pool);
  EXPECT_EQ(pool.num_free_blocks(), 5);
}

TEST(BlockTableDeathTest, BadArgumentsAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  BlockPool pool = MakePool(4, 4);
  BlockTable t(4);
  ASSERT_TRUE(t.AppendSlots(pool, 2).ok());
  EXPECT_DEATH(t.AppendSlots(pool, -1), "negative");
  EXPECT_DEATH(t.Slot(2), "out of range");
  t.Free(pool);
}

}  // namespace
}  // namespace kvforge::kvmeta
