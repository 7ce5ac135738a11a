// The KV snapshot the web page draws (EngineCore::Snapshot, AsyncEngine::KvCacheSnapshot) is
// consistent with the engine: the blocks marked used are exactly those in the requests' tables,
// parallel samples show shared blocks, the pool's counts add up to EngineStats, finished
// requests leave cached blocks that the prefix cache lists, and a repeated prompt's entries gain
// hits. Hash and radix modes, mid-run and idle.
#include "kvforge/kv_snapshot.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "kvforge/config_names.h"
#include "kvforge/llm.h"
#include "support/story_prompts.h"

namespace kvforge {
namespace {

struct Counts {
  int64_t used = 0, shared = 0, cached = 0, free = 0;
};

Counts Count(const KvSnapshot& s) {
  Counts c;
  for (const KvBlockInfo& b : s.blocks) {
    c.used += b.use == KvBlockUse::kUsed;
    c.shared += b.use == KvBlockUse::kShared;
    c.cached += b.use == KvBlockUse::kCached;
    c.free += b.use == KvBlockUse::kFree;
  }
  return c;
}

EngineConfig Config(const std::string& mode) {
  EngineConfig c;
  c.max_model_len = 512;
  c.threads = 2;
  c.enable_prefix_caching = true;
  EXPECT_TRUE(SetConfigField(&c, "prefix_cache_mode", mode).ok());
  return c;
}

SamplingParams Params(int n, int tokens) {
  SamplingParams p;
  p.temperature = n > 1 ? 0.8f : 0.0f;
  p.n = n;
  p.max_tokens = tokens;
  p.ignore_eos = true;
  p.seed = 7;
  return p;
}

// The use marks against the tables: a block is used/shared iff some request lists it, and the
// per-request block counts cover exactly those blocks.
void ExpectConsistent(const KvSnapshot& s, const EngineStats& st, bool radix) {
  ASSERT_EQ(static_cast<int64_t>(s.blocks.size()), s.num_blocks);
  EXPECT_EQ(s.num_blocks, st.kv_total_blocks);
  const Counts c = Count(s);
  EXPECT_EQ(c.used + c.shared + c.cached + c.free, s.num_blocks);
  std::set<int64_t> owners;
  for (const KvBlockInfo& b : s.blocks) {
    if (b.use == KvBlockUse::kUsed || b.use == KvBlockUse::kShared) {
      EXPECT_GT(b.request_id, 0);
      EXPECT_GE(b.ref_count, b.seq_refs);
      owners.insert(b.request_id);
    } else {
      EXPECT_EQ(b.seq_refs, 0);
    }
    if (b.use == KvBlockUse::kCached) {
      EXPECT_TRUE(b.prefix_cached);
    }
  }
  int64_t listed = 0;
  for (const KvRequestInfo& r : s.requests) {
    if (r.blocks > 0) {
      EXPECT_EQ(r.state, "running");
    }
    listed += r.blocks;
  }
  // Distinct blocks over requests >= blocks marked (a block shared by two requests counts twice).
  EXPECT_GE(listed, c.used + c.shared);
  // KV usage counts cached blocks as free: hash-mode ones sit in the pool's evictable list.
  // Radix-mode ones (tree references only) are free when reclaimable; a locked node's block that
  // its sequence copied (a partial-block hit) is cached and in use.
  const double n = static_cast<double>(s.num_blocks);
  if (!radix) {
    EXPECT_NEAR(st.kv_usage, static_cast<double>(c.used + c.shared) / n, 1e-9);
    for (const KvBlockInfo& b : s.blocks) EXPECT_EQ(b.ref_count, b.seq_refs);
  } else {
    EXPECT_GE(st.kv_usage, static_cast<double>(c.used + c.shared) / n - 1e-9);
    EXPECT_LE(st.kv_usage, static_cast<double>(c.used + c.shared + c.cached) / n + 1e-9);
  }
}

class KvSnapshotTest : public ::testing::TestWithParam<std::string> {};

TEST_P(KvSnapshotTest, MidRunAndIdleSnapshotsMatchTheEngine) {
  const bool radix = GetParam() == "radix";
  auto core = EngineCore::Create(Config(GetParam()));
  ASSERT_TRUE(core.ok()) << core.error().ToString();
  const auto prompts = testing::SharedPrefixPrompts();
  ASSERT_GE(prompts.size(), 2u);
  ASSERT_TRUE((*core)->AddRequest(prompts[0], Params(1, 40), nullptr, 0).ok());
  ASSERT_TRUE((*core)->AddRequest(prompts[1], Params(3, 40), nullptr, 0).ok());
  bool saw_shared = false;
  for (int step = 0; step < 12 && (*core)->HasWork(); ++step) {
    ASSERT_TRUE((*core)->Step().ok());
    const KvSnapshot s = (*core)->Snapshot(1000);
    ExpectConsistent(s, (*core)->Stats(), radix);
    if (HasFatalFailure()) return;
    saw_shared |= Count(s).shared > 0;
    EXPECT_EQ(s.step, (*core)->Stats().steps);
    EXPECT_EQ(s.requests.size(), 2u);
  }
  EXPECT_TRUE(saw_shared) << "n = 3 samples fork the prompt's blocks: they must show as shared";
  while ((*core)->HasWork()) ASSERT_TRUE((*core)->Step().ok());

  const KvSnapshot idle = (*core)->Snapshot(1000);
  ExpectConsistent(idle, (*core)->Stats(), radix);
  const Counts c = Count(idle);
  EXPECT_EQ(c.used + c.shared, 0);
  EXPECT_GT(c.cached, 0);
  EXPECT_TRUE(idle.requests.empty());
  EXPECT_EQ(idle.prefix_mode, GetParam());
  ASSERT_FALSE(idle.prefix_entries.empty());
  int64_t entry_blocks = 0, hits_before = 0;
  for (const KvPrefixEntry& e : idle.prefix_entries) {
    entry_blocks += e.blocks;
    hits_before += e.hits;
    EXPECT_FALSE(e.locked) << "nothing runs, nothing is locked";
  }
  if (!radix) {
    EXPECT_EQ(entry_blocks, c.cached);  // one entry per cached block
    // Every cached block has a distinct eviction rank 0 .. cached - 1.
    std::set<int64_t> ranks;
    for (const KvBlockInfo& b : idle.blocks)
      if (b.use == KvBlockUse::kCached) ranks.insert(b.evict_rank);
    EXPECT_EQ(static_cast<int64_t>(ranks.size()), c.cached);
    EXPECT_EQ(*ranks.begin(), 0);
    EXPECT_EQ(*ranks.rbegin(), c.cached - 1);
  }
  EXPECT_EQ((*core)->Snapshot(1).prefix_entries.size(), 1u);
  EXPECT_TRUE((*core)->Snapshot(1).prefix_truncated);

  // The same prompt again: its entries are hit.
  ASSERT_TRUE((*core)->AddRequest(prompts[0], Params(1, 4), nullptr, 0).ok());
  while ((*core)->HasWork()) ASSERT_TRUE((*core)->Step().ok());
  int64_t hits_after = 0;
  for (const KvPrefixEntry& e : (*core)->Snapshot(1000).prefix_entries) hits_after += e.hits;
  EXPECT_GT(hits_after, hits_before);
}

INSTANTIATE_TEST_SUITE_P(Modes, KvSnapshotTest, ::testing::Values("hash", "radix"));

// Through AsyncEngine: the snapshot is served by the engine thread, also when it is idle, and
// the stats handed back with it are from the same moment.
TEST(AsyncKvSnapshot, IdleEngineAnswersWithMatchingStats) {
  auto engine = AsyncEngine::Create(Config("hash"));
  ASSERT_TRUE(engine.ok()) << engine.error().ToString();
  EngineStats st;
  auto snap = (*engine)->KvCacheSnapshot(100, 5000, &st);
  ASSERT_TRUE(snap.ok()) << snap.error().ToString();
  EXPECT_EQ(snap->num_blocks, st.kv_total_blocks);
  EXPECT_EQ(Count(*snap).free, snap->num_blocks);
  EXPECT_EQ(snap->k_dtype, "f16");
  EXPECT_EQ(snap->num_streams, 2);
  EXPECT_EQ(snap->bytes_per_block, st.kv_bytes / static_cast<uint64_t>(st.kv_total_blocks));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE((*engine)->KvCacheSnapshot().ok()) << i;
}

}  // namespace
}  // namespace kvforge
