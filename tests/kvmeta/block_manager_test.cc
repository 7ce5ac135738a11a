// Unit tests for kvmeta::BlockManager: admission queries with a watermark, per-sequence
// operations, error statuses for caller mistakes, and beam / speculative scenarios.
#include "kvmeta/block_manager.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace kvforge::kvmeta {
namespace {

::testing::AssertionResult IsOk(const Status& s) {
  if (s.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << s.ToString();
}

BlockManager MakeManager(int32_t num_blocks, int32_t block_tokens, double watermark = 0.0) {
  Result<BlockManager> m = BlockManager::Create(
      {.num_blocks = num_blocks, .block_tokens = block_tokens, .watermark = watermark});
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

constexpr SeqId kA = MakeSeqId(1);
constexpr SeqId kB = MakeSeqId(2);
constexpr SeqId kC = MakeSeqId(3);

TEST(BlockManagerTest, CreateValidates) {
  EXPECT_EQ(BlockManager::Create({.num_blocks = 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BlockManager::Create({.num_blocks = 8, .block_tokens = 0}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(BlockManager::Create({.num_blocks = 8, .watermark = -0.1}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(BlockManager::Create({.num_blocks = 8, .watermark = 1.0}).status().code(),
            StatusCode::kInvalidArgument);
  Result<BlockManager> m = BlockManager::Create({.num_blocks = 1000});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->block_tokens(), 16);
  EXPECT_EQ(m->watermark_blocks(), 10);  // default 1%
}

TEST(BlockManagerTest, BlocksForPrompt) {
  BlockManager m = MakeManager(100, 16);
  EXPECT_EQ(m.BlocksForPrompt(0), 0);
  EXPECT_EQ(m.BlocksForPrompt(1), 1);
  EXPECT_EQ(m.BlocksForPrompt(16), 1);
  EXPECT_EQ(m.BlocksForPrompt(17), 2);
  EXPECT_EQ(m.BlocksForPrompt(1000), 63);
}

TEST(BlockManagerTest, CanAllocateHonoursWatermark) {
  BlockManager m = MakeManager(10, 4, 0.2);  // 2 blocks held back
  EXPECT_EQ(m.watermark_blocks(), 2);
  EXPECT_EQ(m.CanAllocate(32), AllocStatus::kOk);     // 8 blocks, leaves 2
  EXPECT_EQ(m.CanAllocate(33), AllocStatus::kNever);  // 9 blocks: never fits beside watermark
  ASSERT_TRUE(m.Allocate(kA, 16).value().ok());       // 4 blocks used, 6 free
  EXPECT_EQ(m.CanAllocate(16), AllocStatus::kOk);     // 4 -> leaves 2
  EXPECT_EQ(m.CanAllocate(17), AllocStatus::kLater);  // 5 -> leaves 1 < watermark
  EXPECT_EQ(m.CanAllocate(0), AllocStatus::kOk);
  // Running sequences may dip into the watermark.
  EXPECT_TRUE(m.CanAppend(kA, 24));   // 6 blocks
  EXPECT_FALSE(m.CanAppend(kA, 25));  // 7 blocks
  EXPECT_FALSE(m.CanAppend(kB, 1));   // unknown
  EXPECT_FALSE(m.CanAppend(kA, -1));
  EXPECT_TRUE(IsOk(m.CheckInvariants()));
}

TEST(BlockManagerTest, AllocateAppendFreeCounts) {
  BlockManager m = MakeManager(8, 4);
  Result<WriteOutcome> w = m.Allocate(kA, 10);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->ok());
  EXPECT_EQ(w->new_blocks, 3);
  EXPECT_EQ(m.num_free_blocks(), 5);
  EXPECT_EQ(m.num_used_blocks(), 3);
  EXPECT_DOUBLE_EQ(m.Usage(), 3.0 / 8.0);
  ASSERT_NE(m.Find(kA), nullptr);
  EXPECT_EQ(m.Find(kA)->num_tokens(), 10);
  w = m.AppendSlots(kA, 3);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->new_blocks, 1);
  EXPECT_EQ(m.num_sequences(), 1);
  EXPECT_TRUE(IsOk(m.CheckInvariants()));
  EXPECT_TRUE(IsOk(m.Free(kA)));
  EXPECT_FALSE(m.Contains(kA));
  EXPECT_EQ(m.num_free_blocks(), 8);
  EXPECT_TRUE(IsOk(m.CheckInvariants()));
}

TEST(BlockManagerTest, AllocateShortageCreatesNothing) {
  BlockManager m = MakeManager(4, 4);
  Result<WriteOutcome> w = m.Allocate(kA, 17);  // 5 blocks
  ASSERT_TRUE(w.ok());                          // a shortage is a value, not an error
  EXPECT_FALSE(w->ok());
  EXPECT_EQ(w->missing_blocks, 1);
  EXPECT_FALSE(m.Contains(kA));
  EXPECT_EQ(m.num_free_blocks(), 4);
  EXPECT_TRUE(IsOk(m.CheckInvariants()));
}

TEST(BlockManagerTest, CallerMistakesAreStatuses) {
  BlockManager m = MakeManager(8, 4);
  ASSERT_TRUE(m.Allocate(kA, 5).ok());
  EXPECT_EQ(m.Allocate(kA, 1).status().code(), StatusCode::kInvalidArgument);  // duplicate
  EXPECT_EQ(m.Allocate(kB, -1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.AppendSlots(kB, 1).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(m.AppendSlots(kA, -2).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.AppendSlots(kA, INT64_MAX).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.MakeWritable(kA, 3, 9).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.MakeWritable(kA, 4, 3).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.MakeWritable(kC, 0, 0).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(m.Fork(kB, kC).code(), StatusCode::kNotFound);
  EXPECT_EQ(m.Fork(kA, kA).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.Truncate(kA, 6).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.Truncate(kA, -1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.PopTokens(kA, 6).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.Truncate(kB, 0).code(), StatusCode::kNotFound);
  EXPECT_EQ(m.Free(kB).code(), StatusCode::kNotFound);
  EXPECT_EQ(m.BlocksNeededToAppend(kB, 1), -1);
  EXPECT_EQ(m.Find(kB), nullptr);
  EXPECT_TRUE(IsOk(m.CheckInvariants()));
  // Nothing above changed the state.
  EXPECT_EQ(m.Find(kA)->num_tokens(), 5);
  EXPECT_EQ(m.num_free_blocks(), 6);
}

TEST(BlockManagerTest, ForkAndCopyOnWrite) {
  BlockManager m = MakeManager(8, 4);
  ASSERT_TRUE(m.Allocate(kA, 6).ok());
  ASSERT_TRUE(IsOk(m.Fork(kA, kB)));
  EXPECT_EQ(m.num_used_blocks(), 2);
  EXPECT_EQ(m.BlocksNeededToAppend(kB, 1), 1);
  Result<WriteOutcome> w = m.AppendSlots(kB, 1);
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w->copies.size(), 1u);
  EXPECT_EQ(w->copies[0].src, m.Find(kA)->blocks()[1]);
  EXPECT_EQ(w->copies[0].dst, m.Find(kB)->blocks()[1]);
  EXPECT_EQ(w->copies[0].num_tokens, 2);
  EXPECT_EQ(m.num_used_blocks(), 3);
  EXPECT_TRUE(IsOk(m.CheckInvariants()));
  w = m.MakeWritable(kB, 0, 1);  // overwrite token 0, still shared with kA
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->copies.size(), 1u);
  EXPECT_EQ(m.num_used_blocks(), 4);
  EXPECT_TRUE(IsOk(m.CheckInvariants()));
}

TEST(BlockManagerTest, BeamSearchForkPrune) {
  BlockManager m = MakeManager(32, 4);
  const SeqId root = MakeSeqId(100);
  ASSERT_TRUE(m.Allocate(root, 9).ok());  // 3 blocks, last holds 1
  std::vector<SeqId> beams;
  for (int i = 0; i < 4; ++i) {
    beams.push_back(MakeSeqId(200 + i));
    ASSERT_TRUE(IsOk(m.Fork(root, beams.back())));
  }
  ASSERT_TRUE(IsOk(m.Free(root)));  // the beams keep the prompt alive
  EXPECT_EQ(m.num_used_blocks(), 3);
  int copies = 0;
  for (SeqId beam : beams) {
    Result<WriteOutcome> w = m.AppendSlots(beam, 1);
    ASSERT_TRUE(w.ok() && w->ok());
    copies += static_cast<int>(w->copies.size());
    ASSERT_TRUE(IsOk(m.CheckInvariants()));
  }
  EXPECT_EQ(copies, 3);  // the last beam owns the original tail alone by then
  EXPECT_EQ(m.num_used_blocks(), 6);
  ASSERT_TRUE(IsOk(m.Free(beams[0])));
  ASSERT_TRUE(IsOk(m.Free(beams[2])));
  EXPECT_EQ(m.num_used_blocks(), 4);
  EXPECT_EQ(m.Sequences(), (std::vector<SeqId>{beams[1], beams[3]}));
  for (SeqId beam : {beams[1], beams[3]}) ASSERT_TRUE(IsOk(m.Free(beam)));
  EXPECT_EQ(m.num_free_blocks(), 32);
  EXPECT_TRUE(IsOk(m.CheckInvariants()));
}

TEST(BlockManagerTest, SpeculativeRollback) {
  BlockManager m = MakeManager(16, 4);
  ASSERT_TRUE(m.Allocate(kA, 7).ok());
  ASSERT_TRUE(m.AppendSlots(kA, 5).ok());  // 5 draft tokens -> 12 tokens, 3 blocks
  EXPECT_EQ(m.num_used_blocks(), 3);
  ASSERT_TRUE(IsOk(m.PopTokens(kA, 3)));  // 2 accepted
  EXPECT_EQ(m.Find(kA)->num_tokens(), 9);
  EXPECT_EQ(m.num_used_blocks(), 3);
  ASSERT_TRUE(IsOk(m.PopTokens(kA, 1)));
  EXPECT_EQ(m.num_used_blocks(), 2);
  ASSERT_TRUE(IsOk(m.Truncate(kA, 0)));
  EXPECT_EQ(m.num_used_blocks(), 0);
  EXPECT_TRUE(m.Contains(kA));
  EXPECT_TRUE(IsOk(m.CheckInvariants()));
}

TEST(BlockManagerTest, PrefixCacheHooksThroughPool) {
  BlockManager m = MakeManager(4, 4);
  ASSERT_TRUE(m.Allocate(kA, 8).ok());
  const BlockId b0 = m.Find(kA)->blocks()[0];
  m.mutable_pool().SetHash(b0, 1234);
  ASSERT_TRUE(IsOk(m.Free(kA)));
  EXPECT_EQ(m.pool().num_evictable_blocks(), 1);
  EXPECT_EQ(m.num_free_blocks(), 4);
  EXPECT_EQ(m.CanAllocate(16), AllocStatus::kOk);  // evictable blocks count as allocatable
  ASSERT_TRUE(m.Allocate(kB, 16).value().ok());    // evicts the cached block
  EXPECT_EQ(m.pool().num_evictable_blocks(), 0);
  EXPECT_TRUE(IsOk(m.CheckInvariants()));
}

}  // namespace
}  // namespace kvforge::kvmeta
