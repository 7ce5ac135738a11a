// Prefix caches (hash and radix) over a real BlockManager. The randomized test simulates the
// K/V bytes: every slot holds a fingerprint of the token prefix that produced it (what a real
// forward pass would write), moved only through the copies the bookkeeping reports. Every hit
// must then read back, at every matched position, the fingerprint of the query's own prefix:
// a wrong block, a stale block after eviction, a bad split or a salt leak would all show.
#include "kvmeta/prefix_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kvmeta/block_manager.h"
#include "support/test_rng.h"

namespace kvforge::kvmeta {
namespace {

using ::kvforge::testing::Rng;

uint64_t Fingerprint(const std::vector<int32_t>& t, int64_t p, const std::string& salt) {
  uint64_t h = std::hash<std::string>{}(salt);
  for (int64_t i = 0; i <= p; ++i)
    h = (h ^ static_cast<uint32_t>(t[static_cast<size_t>(i)])) * 0x100000001b3ull + 7;
  return h;
}

struct Harness {
  Harness(PrefixCacheMode mode, int32_t num_blocks, int32_t bt)
      : mgr(BlockManager::Create({.num_blocks = num_blocks, .block_tokens = bt, .watermark = 0})
                .value()),
        bytes(static_cast<size_t>(num_blocks), std::vector<uint64_t>(static_cast<size_t>(bt), 0)) {
    cache = MakePrefixCache(mode, &mgr.mutable_pool());
    PrefixCache* pc = cache.get();
    mgr.SetExternalRefs([pc](BlockId b) { return pc->HeldRefs(b); });
  }

  struct Seq {
    std::vector<int32_t> tokens;
    std::string salt;
    int64_t computed = 0;
  };

  int64_t bt() const { return mgr.block_tokens(); }
  uint64_t& Slot(SeqId s, int64_t p) {
    const BlockTable* t = mgr.Find(s);
    return bytes[static_cast<size_t>(BlockIndex(t->blocks()[static_cast<size_t>(p / bt())]))]
                [static_cast<size_t>(p % bt())];
  }
  void ApplyCopies(const WriteOutcome& w) {
    for (const BlockCopy& c : w.copies)
      for (int32_t i = 0; i < c.num_tokens; ++i)
        bytes[static_cast<size_t>(BlockIndex(c.dst))][static_cast<size_t>(i)] =
            bytes[static_cast<size_t>(BlockIndex(c.src))][static_cast<size_t>(i)];
  }
  bool Grow(SeqId s, int64_t n) {
    const int64_t need = mgr.BlocksNeededToAppend(s, n);
    if (mgr.num_free_blocks() < need) cache->Reclaim(need);
    auto w = mgr.AppendSlots(s, n);
    EXPECT_TRUE(w.ok());
    if (!w->ok()) return false;
    ApplyCopies(*w);
    return true;
  }

  // Admits a new sequence: match, verify the matched bytes, attach, grow, "compute", insert.
  // Returns the hit length, or -1 when the pool could not hold it.
  int64_t Admit(int64_t id, std::vector<int32_t> tokens, const std::string& salt) {
    const SeqId s = MakeSeqId(id);
    std::span<const int32_t> q(tokens.data(), tokens.size() - 1);
    PrefixMatch m = cache->Match(q, salt);
    EXPECT_LE(m.num_tokens, static_cast<int64_t>(q.size()));
    for (int64_t p = 0; p < m.num_tokens; ++p) {
      const BlockId b = p / bt() < static_cast<int64_t>(m.full_blocks.size())
                            ? m.full_blocks[static_cast<size_t>(p / bt())]
                            : m.partial_block;
      EXPECT_EQ(bytes[static_cast<size_t>(BlockIndex(b))][static_cast<size_t>(p % bt())],
                Fingerprint(tokens, p, salt))
          << "hit returns wrong K/V at position " << p;
    }
    EXPECT_TRUE(mgr.AttachCached(s, m.full_blocks).ok());
    cache->OnAttach(s, m, static_cast<int64_t>(tokens.size()));
    int64_t have = static_cast<int64_t>(m.full_blocks.size()) * bt();
    if (m.num_tokens > have) {
      if (Grow(s, m.num_tokens - have)) {
        const BlockTable* t = mgr.Find(s);
        for (int64_t p = have; p < m.num_tokens; ++p)
          bytes[static_cast<size_t>(BlockIndex(t->blocks().back()))]
               [static_cast<size_t>(p % bt())] =
                   bytes[static_cast<size_t>(BlockIndex(m.partial_block))]
                        [static_cast<size_t>(p % bt())];
        have = m.num_tokens;
      }
    }
    if (!Grow(s, static_cast<int64_t>(tokens.size()) - have)) {
      cache->OnRelease(s);
      EXPECT_TRUE(mgr.Free(s).ok());
      return -1;
    }
    for (int64_t p = have; p < static_cast<int64_t>(tokens.size()); ++p)
      Slot(s, p) = Fingerprint(tokens, p, salt);
    Seq& sq = seqs[id];
    sq = {std::move(tokens), salt, static_cast<int64_t>(0)};
    sq.computed = static_cast<int64_t>(sq.tokens.size());
    cache->Insert(s, sq.tokens, sq.computed, mgr.Find(s)->blocks(), salt, false);
    return m.num_tokens;
  }

  bool Decode(int64_t id, int32_t token) {
    const SeqId s = MakeSeqId(id);
    Seq& sq = seqs.at(id);
    if (!Grow(s, 1)) return false;
    sq.tokens.push_back(token);
    Slot(s, sq.computed) = Fingerprint(sq.tokens, sq.computed, sq.salt);
    ++sq.computed;
    cache->Insert(s, sq.tokens, sq.computed, mgr.Find(s)->blocks(), sq.salt, false);
    return true;
  }

  void Release(int64_t id) {
    const SeqId s = MakeSeqId(id);
    Seq& sq = seqs.at(id);
    cache->Insert(s, sq.tokens, sq.computed, mgr.Find(s)->blocks(), sq.salt, true);
    cache->OnRelease(s);
    EXPECT_TRUE(mgr.Free(s).ok());
    seqs.erase(id);
  }

  void Check() {
    ASSERT_TRUE(mgr.CheckInvariants().ok()) << mgr.CheckInvariants().ToString();
    ASSERT_TRUE(cache->CheckInvariants().ok()) << cache->CheckInvariants().ToString();
    CheckDescribe();
  }

  // The inspector's view (PrefixCache::Describe): ids unique, parents listed before children,
  // a child never hit more often than its parent (matches walk from the root), a locked radix
  // node's parent locked too, and a hash entry per live cached block.
  void CheckDescribe() {
    const std::vector<PrefixCacheNode> nodes = cache->Describe(1 << 20);
    std::map<int64_t, const PrefixCacheNode*> seen;
    for (const PrefixCacheNode& n : nodes) {
      ASSERT_GT(n.id, 0);
      ASSERT_EQ(seen.count(n.id), 0u) << "duplicate id " << n.id;
      ASSERT_GT(n.tokens, 0);
      ASSERT_GT(n.blocks, 0);
      if (n.parent != 0) {
        auto p = seen.find(n.parent);
        ASSERT_NE(p, seen.end()) << "node " << n.id << " listed before its parent " << n.parent;
        EXPECT_GE(p->second->hits, n.hits) << "node " << n.id;
        if (cache->mode() == PrefixCacheMode::kRadix && n.locked) {
          EXPECT_TRUE(p->second->locked);
        }
      }
      if (cache->mode() == PrefixCacheMode::kHash) {
        EXPECT_EQ(n.tokens, bt());
        EXPECT_EQ(n.blocks, 1);
      }
      seen[n.id] = &n;
    }
    if (cache->mode() == PrefixCacheMode::kHash) {
      EXPECT_LE(static_cast<int64_t>(nodes.size()), cache->stats().cached_blocks);
    }
    EXPECT_EQ(cache->Describe(2).size(), std::min<size_t>(2, nodes.size()));
  }

  BlockManager mgr;
  std::vector<std::vector<uint64_t>> bytes;  // [block][slot] fingerprints
  std::unique_ptr<PrefixCache> cache;
  std::map<int64_t, Seq> seqs;
};

std::vector<int32_t> Seq(std::initializer_list<std::pair<int32_t, int32_t>> runs) {
  std::vector<int32_t> t;
  for (auto [start, n] : runs)
    for (int32_t i = 0; i < n; ++i) t.push_back(start + i);
  return t;
}

TEST(RadixPrefixCache, TokenGranularHitCopiesThePartialBlock) {
  Harness h(PrefixCacheMode::kRadix, 32, 16);
  EXPECT_EQ(h.Admit(1, Seq({{1000, 41}}), ""), 0);
  h.Release(1);
  h.Check();
  // Shares the first 37 tokens, then diverges: two full blocks and 5 copied slots.
  auto t = Seq({{1000, 37}, {5000, 10}});
  PrefixMatch m = h.cache->Match(std::span<const int32_t>(t.data(), t.size() - 1), "");
  EXPECT_EQ(m.num_tokens, 37);
  EXPECT_EQ(m.full_blocks.size(), 2u);
  EXPECT_TRUE(IsValid(m.partial_block));
  EXPECT_EQ(h.Admit(2, t, ""), 37);
  h.Check();
  // A third prompt sharing 20 tokens matches through the split node.
  EXPECT_EQ(h.Admit(3, Seq({{1000, 20}, {7000, 30}}), ""), 20);
  h.Check();
  // Other salt: nothing.
  EXPECT_EQ(h.Admit(4, Seq({{1000, 41}}), "tenant-b"), 0);
  h.Check();
}

TEST(HashPrefixCache, BlockGranularHitAndWholePromptKeepsLastToken) {
  Harness h(PrefixCacheMode::kHash, 32, 16);
  EXPECT_EQ(h.Admit(1, Seq({{1000, 48}}), ""), 0);
  h.Release(1);
  // 37 shared tokens -> 2 whole blocks.
  EXPECT_EQ(h.Admit(2, Seq({{1000, 37}, {5000, 10}}), ""), 32);
  // The identical 48-token prompt: its last token must still be computed, so 32, not 48.
  EXPECT_EQ(h.Admit(3, Seq({{1000, 48}}), ""), 32);
  EXPECT_EQ(h.Admit(4, Seq({{1000, 48}}), "other"), 0);
  h.Check();
  const PrefixCacheStats st = h.cache->stats();
  EXPECT_EQ(st.queries, 4);
  EXPECT_EQ(st.hit_tokens, 64);
}

TEST(HashPrefixCache, EvictsDeepestBlocksFirstUnderPressure) {
  Harness h(PrefixCacheMode::kHash, 6, 4);
  EXPECT_EQ(h.Admit(1, Seq({{100, 17}}), ""), 0);  // 5 blocks, 4 full ones cached
  h.Release(1);
  h.Check();
  // A 9-token unrelated prompt needs 3 blocks: the two free ones, then the deepest cached one.
  EXPECT_EQ(h.Admit(2, Seq({{900, 9}}), ""), 0);
  h.Release(2);
  EXPECT_EQ(h.Admit(3, Seq({{100, 17}}), ""), 12);  // the deepest cached block went first
  h.Check();
  EXPECT_GT(h.cache->stats().evicted_blocks, 0);
}

TEST(RadixPrefixCache, EvictsUnlockedLeavesOnlyWhenShort) {
  Harness h(PrefixCacheMode::kRadix, 6, 4);
  EXPECT_EQ(h.Admit(1, Seq({{100, 16}}), ""), 0);
  h.Release(1);
  EXPECT_EQ(h.cache->ReclaimableBlocks(), 4);
  EXPECT_EQ(h.Admit(2, Seq({{100, 10}, {50, 3}}), ""), 10);  // locks the shared path
  h.Check();
  // Nothing is free: only the unlocked leaf (the old tail, [10, 16)) may go, and it frees just
  // its last block (the straddling one is still held by the locked upper half).
  EXPECT_EQ(h.mgr.num_free_blocks(), 0);
  EXPECT_EQ(h.cache->ReclaimableBlocks(), 1);
  EXPECT_EQ(h.Admit(3, Seq({{900, 4}}), ""), 0);
  EXPECT_EQ(h.Admit(5, Seq({{900, 8}}), ""), -1);  // would need a block held by seq 2's path
  h.Check();
  h.Release(2);
  h.Release(3);
  h.Check();
  h.cache->Clear();
  EXPECT_EQ(h.mgr.num_free_blocks(), 6);
  h.Check();
}

class PrefixCacheProperty : public ::testing::TestWithParam<std::tuple<PrefixCacheMode, int>> {};

TEST_P(PrefixCacheProperty, RandomWorkloadNeverReturnsWrongKv) {
  const auto [mode, bt] = GetParam();
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    Harness h(mode, 40, bt);
    Rng rng(seed * 7919 + static_cast<uint64_t>(bt));
    // A few shared "system prompts" of varied lengths plus random continuations over a small
    // alphabet, so prefixes collide at block and non-block boundaries.
    std::vector<std::vector<int32_t>> bases;
    for (int i = 0; i < 4; ++i) {
      std::vector<int32_t> b;
      const int64_t len = 3 + rng.Uniform(40);
      for (int64_t k = 0; k < len; ++k) b.push_back(static_cast<int32_t>(rng.Uniform(4)));
      bases.push_back(b);
    }
    const std::vector<std::string> salts = {"", "", "", "x"};
    int64_t next_id = 1, hits = 0;
    for (int step = 0; step < 600; ++step) {
      const int64_t op = rng.Uniform(10);
      if (op < 4 || h.seqs.empty()) {
        std::vector<int32_t> t = bases[static_cast<size_t>(rng.Uniform(4))];
        t.resize(static_cast<size_t>(1 + rng.Uniform(static_cast<int64_t>(t.size()))));
        const int64_t extra = 1 + rng.Uniform(12);
        for (int64_t k = 0; k < extra; ++k) t.push_back(static_cast<int32_t>(rng.Uniform(4)));
        const int64_t got = h.Admit(next_id++, t, salts[static_cast<size_t>(rng.Uniform(4))]);
        if (got > 0) hits += got;
      } else if (op < 7) {
        auto it = h.seqs.begin();
        std::advance(it, rng.Uniform(static_cast<int64_t>(h.seqs.size())));
        (void)h.Decode(it->first, static_cast<int32_t>(rng.Uniform(4)));
      } else if (op < 9) {
        auto it = h.seqs.begin();
        std::advance(it, rng.Uniform(static_cast<int64_t>(h.seqs.size())));
        h.Release(it->first);
      } else if (rng.Uniform(8) == 0) {
        h.cache->Clear();
      }
      h.Check();
      if (HasFatalFailure() || HasFailure()) {
        ADD_FAILURE() << "seed " << seed << " step " << step;
        return;
      }
    }
    EXPECT_GT(hits, 0) << "the workload never hit the cache (seed " << seed << ")";
    while (!h.seqs.empty()) h.Release(h.seqs.begin()->first);
    h.cache->Clear();
    EXPECT_EQ(h.mgr.num_free_blocks(), 40);
    h.Check();
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, PrefixCacheProperty,
                         ::testing::Combine(::testing::Values(PrefixCacheMode::kHash,
                                                              PrefixCacheMode::kRadix),
                                            ::testing::Values(1, 4, 16)));

}  // namespace
}  // namespace kvforge::kvmeta
