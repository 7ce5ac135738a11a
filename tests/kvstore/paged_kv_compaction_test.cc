// PagedKvCache::Compact (docs/adr/0005): for every KV dtype, each layer's kept slots read back at
// their new slots as before (row bytes copied exactly; KIVI streams re-encoded, within f16), a
// layer that kept fewer slots has a dead tail, freed blocks go back to the pool, writes continue
// at the next slot with their own RoPE position (kvquant3), StreamingLLM's cache-relative
// positions re-rotate moved keys, and a forked sibling or the prefix cache never sees the change.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "kvmeta/compaction.h"
#include "kvquant/kv_dtype.h"
#include "kvstore/kv_test_util.h"
#include "kvstore/paged_kv_cache.h"

namespace kvforge::kvstore {
namespace {

using kvquant::KvDtype;

constexpr int32_t kHeads = 2, kDim = 32, kValues = kHeads * kDim, kLayers = 2;

std::unique_ptr<PagedKvCache> MakeCache(KvDtype d, bool prefix = false) {
  PagedKvCacheConfig c =
      testutil::SmallCacheConfig(d, d, kHeads, kDim, kvquant::IsKivi(d) ? 32 : 8, kLayers);
  c.rope.freq_base = 10000.0f;
  c.prefix_caching = prefix;
  return testutil::CreateOrFail(c);
}

std::vector<float> Random(int64_t tokens, uint32_t seed) {
  return testutil::RandomRows(tokens, kValues, seed);
}

std::vector<float> Row(const kernels::KvPageView& v, int64_t p) {
  std::vector<float> out(kValues);
  kernels::DecodeKvRow(v, p, out.data());
  return out;
}

// Post-RoPE keys of positions pos0.. (what the model hands the cache).
std::vector<float> Rotated(std::vector<float> k, int64_t pos0) {
  const int64_t n = static_cast<int64_t>(k.size()) / kValues;
  for (int64_t t = 0; t < n; ++t)
    kernels::Rope(k.data() + t * kValues, kHeads, kDim, kDim, pos0 + t, 10000.0f, 1.0f, false);
  return k;
}

constexpr KvDtype kAll[] = {KvDtype::kF32,      KvDtype::kF16,    KvDtype::kBf16,
                            KvDtype::kFp8E4M3,  KvDtype::kInt8,   KvDtype::kQ8_0,
                            KvDtype::kQ4_0,     KvDtype::kKivi2,  KvDtype::kKivi4,
                            KvDtype::kKvQuant3, KvDtype::kTurbo3, KvDtype::kTurbo4};

TEST(PagedKvCompactionTest, KeptSlotsReadBackAtTheirNewSlotsForEveryDtype) {
  constexpr int64_t kTokens = 70;
  for (KvDtype d : kAll) {
    SCOPED_TRACE(std::string(kvquant::KvDtypeName(d)));
    auto c = MakeCache(d);
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(c->AddSequence(0, kTokens));
    for (int32_t l = 0; l < kLayers; ++l) {
      const auto k = Rotated(Random(kTokens, 10 + l), 0), v = Random(kTokens, 20 + l);
      c->Write(l, 0, 0, kTokens, k.data(), v.data(), kValues);
    }
    std::vector<std::vector<std::vector<float>>> k_before(kLayers), v_before(kLayers);
    for (int32_t l = 0; l < kLayers; ++l)
      for (int64_t p = 0; p < kTokens; ++p) {
        k_before[l].push_back(Row(c->KeyView(l, 0), p));
        v_before[l].push_back(Row(c->ValueView(l, 0), p));
      }
    // Layer 0 keeps 30 slots, layer 1 20 (a per-layer budget): different sets.
    std::mt19937 rng(3);
    std::vector<std::vector<int32_t>> keep(kLayers);
    for (int32_t l = 0; l < kLayers; ++l) {
      std::vector<int32_t> all(kTokens);
      for (int32_t i = 0; i < kTokens; ++i) all[i] = i;
      std::shuffle(all.begin(), all.end(), rng);
      all.resize(l == 0 ? 30 : 20);
      std::sort(all.begin(), all.end());
      keep[l] = all;
    }
    const int64_t free_before = c->num_free_blocks();
    auto plan = kvmeta::PlanCompaction(kTokens, keep, {}, {});
    ASSERT_TRUE(plan.ok()) << plan.error().ToString();
    auto done = c->Compact(0, *plan, /*reposition=*/false);
    ASSERT_TRUE(done.ok()) << done.error().ToString();
    ASSERT_TRUE(*done);
    EXPECT_EQ(c->NumTokens(0), 30);
    EXPECT_EQ(c->Evicted(0), 40);
    EXPECT_TRUE(c->IsCompacted(0));
    EXPECT_GT(c->num_free_blocks(), free_before);
    EXPECT_EQ(c->DeadSlots(0, 0, 0).begin, c->DeadSlots(0, 0, 0).end);
    EXPECT_EQ(c->DeadSlots(1, 0, 0).begin, 20);
    EXPECT_EQ(c->DeadSlots(1, 0, 0).end, 30);
    EXPECT_EQ(c->LiveSlots(1, 0), 20);
    ASSERT_TRUE(c->CheckInvariants().ok());
    // Row codecs move bytes: exact. KIVI re-forms its groups: the kept tokens land in the f16
    // window (30 < R = 128), so they read back within f16 rounding.
    const bool kivi = kvquant::IsKivi(d);
    for (int32_t l = 0; l < kLayers; ++l)
      for (size_t i = 0; i < keep[l].size(); ++i) {
        const auto k = Row(c->KeyView(l, 0), static_cast<int64_t>(i));
        const auto v = Row(c->ValueView(l, 0), static_cast<int64_t>(i));
        for (int32_t j = 0; j < kValues; ++j) {
          const float kw = k_before[l][keep[l][i]][j], vw = v_before[l][keep[l][i]][j];
          if (kivi) {
            ASSERT_NEAR(k[j], kw, 2e-3f * (1 + std::fabs(kw))) << "layer " << l << " slot " << i;
            ASSERT_NEAR(v[j], vw, 2e-3f * (1 + std::fabs(vw))) << "layer " << l << " slot " << i;
          } else {
            ASSERT_EQ(k[j], kw) << "layer " << l << " slot " << i << " value " << j;
            ASSERT_EQ(v[j], vw) << "layer " << l << " slot " << i << " value " << j;
          }
        }
      }
    // Generation goes on at slot 30 with position 70; the kept rows do not move.
    ASSERT_TRUE(c->EnsureTokens(0, 34));
    for (int32_t l = 0; l < kLayers; ++l) {
      const auto k = Rotated(Random(4, 30 + l), kTokens), v = Random(4, 40 + l);
      c->WriteAt(l, 0, 30, kTokens, 4, k.data(), v.data(), kValues);
    }
    if (d == KvDtype::kKvQuant3) {
      // kvquant3 keys are rotated when read, to the position their slot remembers.
      auto fresh = MakeCache(d);
      ASSERT_TRUE(fresh->AddSequence(0, kTokens + 4));
      const auto k0 = Rotated(Random(kTokens, 10), 0);
      fresh->Write(0, 0, 0, kTokens, k0.data(), k0.data(), kValues);
      const auto k1 = Rotated(Random(4, 30), kTokens);
      fresh->Write(0, 0, kTokens, 4, k1.data(), k1.data(), kValues);
      for (int64_t i = 0; i < 4; ++i) {
        const auto got = Row(c->KeyView(0, 0), 30 + i),
                   want = Row(fresh->KeyView(0, 0), kTokens + i);
        for (int32_t j = 0; j < kValues; ++j) ASSERT_NEAR(got[j], want[j], 1e-4f) << i;
      }
    }
    for (size_t i = 0; i < keep[0].size(); ++i) {
      const auto k = Row(c->KeyView(0, 0), static_cast<int64_t>(i));
      for (int32_t j = 0; j < kValues; ++j)
        ASSERT_NEAR(k[j], k_before[0][keep[0][i]][j], 2e-3f * (1 + std::fabs(k[j])));
    }
    ASSERT_TRUE(c->CheckInvariants().ok());
  }
}

// Per-KV-head selection (lanes = layer x head): each head's kept slots read back, byte for byte,
// at their new slots; a head that kept fewer has its own dead tail; a second per-head plan (after
// a shared one) respects those tails; dtypes whose heads share bytes are refused.
std::vector<float> HeadOf(const std::vector<float>& row, int32_t h) {
  return std::vector<float>(row.begin() + h * kDim, row.begin() + (h + 1) * kDim);
}

TEST(PagedKvCompactionTest, PerHeadPlansMoveEachHeadsOwnSlots) {
  constexpr int64_t kTokens = 60;
  constexpr int32_t kLanes = kLayers * kHeads;
  const KvDtype separable[] = {KvDtype::kF32,  KvDtype::kF16,  KvDtype::kBf16, KvDtype::kFp8E4M3,
                               KvDtype::kInt8, KvDtype::kQ8_0, KvDtype::kQ4_0};
  for (KvDtype d : separable) {
    SCOPED_TRACE(std::string(kvquant::KvDtypeName(d)));
    auto c = MakeCache(d);
    ASSERT_TRUE(c->CheckPerHeadCompaction().ok());
    ASSERT_TRUE(c->AddSequence(0, kTokens));
    for (int32_t l = 0; l < kLayers; ++l) {
      const auto k = Random(kTokens, 50 + l), v = Random(kTokens, 60 + l);
      c->Write(l, 0, 0, kTokens, k.data(), v.data(), kValues);
    }
    // A shared plan first (both layers keep the even slots, layer 1 fewer): per-layer dead tails
    // that the per-head plan then splits per head.
    std::vector<int32_t> even, fewer;
    for (int32_t sl = 0; sl < kTokens; sl += 2) even.push_back(sl);
    fewer.assign(even.begin(), even.begin() + 24);
    auto shared = kvmeta::PlanCompaction(kTokens, {even, fewer}, {}, {});
    ASSERT_TRUE(shared.ok());
    ASSERT_TRUE(*c->Compact(0, *shared, false));
    const int64_t slots = c->NumTokens(0);
    ASSERT_EQ(slots, 30);
    std::vector<std::vector<std::vector<float>>> k_before(kLayers), v_before(kLayers);
    for (int32_t l = 0; l < kLayers; ++l)
      for (int64_t p = 0; p < slots; ++p) {
        k_before[l].push_back(Row(c->KeyView(l, 0), p));
        v_before[l].push_back(Row(c->ValueView(l, 0), p));
      }
    std::mt19937 rng(static_cast<uint32_t>(d) + 9);
    const int64_t lengths[kLanes] = {20, 9, 14, 17};  // per (layer, head)
    std::vector<std::vector<int32_t>> keep(kLanes);
    std::vector<int64_t> dead_begin, dead_end;
    for (int32_t lane = 0; lane < kLanes; ++lane) {
      const kvstore::SlotRange dead = c->DeadSlots(lane / kHeads, 0, lane % kHeads);
      dead_begin.push_back(dead.begin);
      dead_end.push_back(dead.end);
      std::vector<int32_t> live;
      for (int32_t sl = 0; sl < slots; ++sl)
        if (sl < dead.begin || sl >= dead.end) live.push_back(sl);
      std::shuffle(live.begin(), live.end(), rng);
      live.resize(static_cast<size_t>(lengths[lane]));
      std::sort(live.begin(), live.end());
      keep[static_cast<size_t>(lane)] = live;
    }
    auto plan = kvmeta::PlanCompaction(slots, keep, dead_begin, dead_end, kHeads);
    ASSERT_TRUE(plan.ok()) << plan.error().message();
    auto done = c->Compact(0, *plan, false);
    ASSERT_TRUE(done.ok()) << done.error().message();
    ASSERT_TRUE(*done);
    EXPECT_EQ(c->NumTokens(0), 20);
    for (int32_t l = 0; l < kLayers; ++l)
      for (int32_t h = 0; h < kHeads; ++h) {
        const auto& kl = keep[static_cast<size_t>(l * kHeads + h)];
        const kvstore::SlotRange dead = c->DeadSlots(l, 0, h);
        if (kl.size() < 20) {
          EXPECT_EQ(dead.begin, static_cast<int64_t>(kl.size()));
          EXPECT_EQ(dead.end, 20);
        } else {
          EXPECT_EQ(dead.begin, dead.end);
        }
        EXPECT_EQ(c->LiveSlots(l, 0, h), static_cast<int64_t>(kl.size()));
        for (size_t i = 0; i < kl.size(); ++i) {
          const auto p = static_cast<int64_t>(i);
          ASSERT_EQ(HeadOf(Row(c->KeyView(l, 0), p), h), HeadOf(k_before[l][kl[i]], h))
              << "layer " << l << " head " << h << " slot " << i;
          ASSERT_EQ(HeadOf(Row(c->ValueView(l, 0), p), h), HeadOf(v_before[l][kl[i]], h))
              << "layer " << l << " head " << h << " slot " << i;
        }
      }
    // A shared plan is refused now that heads hold different slots.
    std::vector<int32_t> first = {0, 1, 2};
    auto narrow = kvmeta::PlanCompaction(20, {first, first}, {}, {});
    ASSERT_TRUE(narrow.ok());
    EXPECT_FALSE(c->Compact(0, *narrow, false).ok());
    ASSERT_TRUE(c->CheckInvariants().ok());
    c->Free(0);
    EXPECT_EQ(c->num_free_blocks(), c->num_blocks());
  }
}

TEST(PagedKvCompactionTest, PerHeadPlansAreRefusedWhereHeadsShareBytes) {
  for (KvDtype d : {KvDtype::kKivi2, KvDtype::kKvQuant3, KvDtype::kTurbo3}) {
    SCOPED_TRACE(std::string(kvquant::KvDtypeName(d)));
    auto c = MakeCache(d);
    EXPECT_FALSE(c->CheckPerHeadCompaction().ok());
    ASSERT_TRUE(c->AddSequence(0, 40));
    for (int32_t l = 0; l < kLayers; ++l) {
      const auto k = Random(40, 1), v = Random(40, 2);
      c->Write(l, 0, 0, 40, k.data(), v.data(), kValues);
    }
    std::vector<int32_t> a = {0, 5, 9}, b = {1, 2};
    auto plan = kvmeta::PlanCompaction(40, {a, b, a, b}, {}, {}, kHeads);
    ASSERT_TRUE(plan.ok());
    auto done = c->Compact(0, *plan, false);
    EXPECT_FALSE(done.ok());
    EXPECT_EQ(c->NumTokens(0), 40);  // nothing changed
    EXPECT_FALSE(c->IsCompacted(0));
  }
}

TEST(PagedKvCompactionTest, StreamingPositionsReRotateMovedKeys) {
  for (KvDtype d : {KvDtype::kF32, KvDtype::kKvQuant3}) {
    SCOPED_TRACE(std::string(kvquant::KvDtypeName(d)));
    auto c = MakeCache(d);
    ASSERT_TRUE(c->AddSequence(0, 40));
    const auto pre = Random(40, 1), v = Random(40, 2);
    const auto post = Rotated(pre, 0);  // slot == position before the compaction
    for (int32_t l = 0; l < kLayers; ++l) c->Write(l, 0, 0, 40, post.data(), v.data(), kValues);
    std::vector<int32_t> keep = {0, 1, 2, 3};  // 4 sinks + the 12 most recent
    for (int32_t s = 28; s < 40; ++s) keep.push_back(s);
    std::vector<std::vector<float>> before;
    for (int32_t s : keep) before.push_back(Row(c->KeyView(0, 0), s));
    auto plan = kvmeta::PlanCompaction(40, {keep, keep}, {}, {});
    ASSERT_TRUE(plan.ok());
    auto done = c->Compact(0, *plan, /*reposition=*/true);
    ASSERT_TRUE(done.ok() && *done);
    // Each key now reads as if rotated at its new slot: R(i) x = R(i - old) R(old) x. (kvquant3
    // keeps its pre-RoPE codes and rotates them to the slot when read; other dtypes re-rotate.)
    for (size_t i = 0; i < keep.size(); ++i) {
      std::vector<float> want = before[i];
      kernels::Rope(want.data(), kHeads, kDim, kDim, static_cast<int64_t>(i) - keep[i], 10000.0f,
                    1.0f, false);
      const auto got = Row(c->KeyView(0, 0), static_cast<int64_t>(i));
      for (int32_t j = 0; j < kValues; ++j) ASSERT_NEAR(got[j], want[j], 1e-4f) << "slot " << i;
      if (d == KvDtype::kF32) {
        const auto vv = Row(c->ValueView(0, 0), static_cast<int64_t>(i));
        for (int32_t j = 0; j < kValues; ++j) ASSERT_EQ(vv[j], v[keep[i] * kValues + j]);
      }
    }
  }
}

TEST(PagedKvCompactionTest, AForkedSiblingKeepsItsBlocks) {
  auto c = MakeCache(KvDtype::kF16);
  ASSERT_TRUE(c->AddSequence(0, 48));
  const auto k = Random(48, 1), v = Random(48, 2);
  for (int32_t l = 0; l < kLayers; ++l) c->Write(l, 0, 0, 48, k.data(), v.data(), kValues);
  ASSERT_TRUE(c->Fork(0, 1).ok());
  std::vector<std::vector<float>> parent;
  for (int64_t p = 0; p < 48; ++p) parent.push_back(Row(c->KeyView(1, 0), p));
  std::vector<int32_t> keep;
  for (int32_t s = 0; s < 48; s += 3) keep.push_back(s);
  auto plan = kvmeta::PlanCompaction(48, {keep, keep}, {}, {});
  ASSERT_TRUE(plan.ok());
  // The child's kept blocks are shared: they are copied first.
  EXPECT_GT(c->BlocksToCompact(1, plan->new_slots), 0);
  auto done = c->Compact(1, *plan, false);
  ASSERT_TRUE(done.ok() && *done);
  EXPECT_FALSE(c->IsCompacted(0));
  EXPECT_EQ(c->NumTokens(0), 48);
  for (int64_t p = 0; p < 48; ++p) ASSERT_EQ(Row(c->KeyView(1, 0), p), parent[p]) << p;
  for (size_t i = 0; i < keep.size(); ++i)
    ASSERT_EQ(Row(c->KeyView(1, 1), static_cast<int64_t>(i)), parent[keep[i]]) << i;
  // A swapped-out sequence takes its slot state along.
  const auto state = c->ExportCompaction(1);
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->evicted, 48 - static_cast<int64_t>(keep.size()));
  EXPECT_FALSE(c->ExportCompaction(0).has_value());
  ASSERT_TRUE(c->CheckInvariants().ok());
  c->Free(1);
  EXPECT_FALSE(c->IsCompacted(1));
  c->Free(0);
  EXPECT_EQ(c->num_free_blocks(), c->num_blocks());
}

TEST(PagedKvCompactionTest, ThePrefixCacheKeepsTheUncompressedPrefix) {
  auto c = MakeCache(KvDtype::kF32, /*prefix=*/true);
  ASSERT_TRUE(c->AddSequence(0, 32));
  const auto k = Random(32, 1), v = Random(32, 2);
  for (int32_t l = 0; l < kLayers; ++l) c->Write(l, 0, 0, 32, k.data(), v.data(), kValues);
  std::vector<int32_t> tokens(32);
  for (int32_t i = 0; i < 32; ++i) tokens[i] = 100 + i;
  c->prefix_cache()->Insert(kvmeta::MakeSeqId(0), tokens, 32,
                            c->manager().Find(kvmeta::MakeSeqId(0))->blocks(), "", false);
  std::vector<int32_t> keep = {1, 5, 9, 13, 17, 21, 25, 29};
  auto plan = kvmeta::PlanCompaction(32, {keep, keep}, {}, {});
  ASSERT_TRUE(plan.ok());
  auto done = c->Compact(0, *plan, false);
  ASSERT_TRUE(done.ok() && *done);
  // A new sequence with the same tokens finds the prefix and reads the original rows.
  const kvmeta::PrefixMatch m =
      c->prefix_cache()->Match(std::span<const int32_t>(tokens.data(), 31), "");
  ASSERT_GT(m.num_tokens, 0);
  ASSERT_GE(c->AttachPrefix(2, m, 31), m.num_tokens);
  for (int64_t p = 0; p < m.num_tokens; ++p) {
    const auto got = Row(c->KeyView(0, 2), p);
    for (int32_t j = 0; j < kValues; ++j) ASSERT_EQ(got[j], k[p * kValues + j]) << p;
  }
  for (size_t i = 0; i < keep.size(); ++i) {
    const auto got = Row(c->KeyView(0, 0), static_cast<int64_t>(i));
    for (int32_t j = 0; j < kValues; ++j) ASSERT_EQ(got[j], k[keep[i] * kValues + j]) << i;
  }
  ASSERT_TRUE(c->CheckInvariants().ok());
}

// Sparse decode's per-block key summaries equal the min / max / sum of the keys written, through
// partial blocks and a copy-on-write append after a fork, and are rebuilt from the rows.
TEST(PagedKvSummariesTest, SummariesFollowTheKeysWritten) {
  PagedKvCacheConfig cfg =
      testutil::SmallCacheConfig(KvDtype::kF32, KvDtype::kF32, kHeads, kDim, 8, kLayers);
  cfg.key_summaries = true;
  auto c = testutil::CreateOrFail(cfg);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(MakeCache(KvDtype::kF32)->KeySummaries(0).base, nullptr);  // off by default
  const auto k = Random(29, 5), v = Random(29, 6);
  ASSERT_TRUE(c->AddSequence(0, 20));
  for (int32_t l = 0; l < kLayers; ++l) {
    c->Write(l, 0, 0, 13, k.data(), v.data(), kValues);
    c->Write(l, 0, 13, 7, k.data() + 13 * kValues, v.data() + 13 * kValues, kValues);
  }
  ASSERT_TRUE(c->Fork(0, 1).ok());
  ASSERT_TRUE(c->EnsureTokens(1, 29));  // copy-on-write of the shared partial block
  for (int32_t l = 0; l < kLayers; ++l)
    c->Write(l, 1, 20, 9, k.data() + 20 * kValues, v.data() + 20 * kValues, kValues);
  auto check = [&](int64_t seq, int64_t n, const char* what) {
    for (int32_t l = 0; l < kLayers; ++l) {
      const auto sums = c->KeySummaries(l);
      ASSERT_NE(sums.base, nullptr);
      const auto& table = *c->Blocks(seq);
      for (int64_t b = 0; b * 8 < n; ++b)
        for (int32_t h = 0; h < kHeads; ++h)
          for (int32_t d = 0; d < kDim; ++d) {
            float mn = 1e30f, mx = -1e30f, sum = 0;
            for (int64_t t = b * 8; t < std::min<int64_t>(n, (b + 1) * 8); ++t) {
              const float x = k[t * kValues + h * kDim + d];
              mn = std::min(mn, x);
              mx = std::max(mx, x);
              sum += x;
            }
            const float* s = sums.Of(table[static_cast<size_t>(b)], h);
            ASSERT_EQ(s[d], mn) << what << " block " << b;
            ASSERT_EQ(s[kDim + d], mx) << what << " block " << b;
            ASSERT_NEAR(s[2 * kDim + d], sum, 1e-4f) << what << " block " << b;
          }
    }
  };
  check(1, 29, "child after copy-on-write");
  check(0, 20, "parent");
  c->RebuildKeySummaries(1);
  check(1, 29, "rebuilt");
}

TEST(PagedKvCompactionTest, BadPlansAreRefused) {
  auto c = MakeCache(KvDtype::kF16);
  ASSERT_TRUE(c->AddSequence(0, 20));
  auto wrong_len = kvmeta::PlanCompaction(30, {{0, 1}, {0, 1}}, {}, {});
  ASSERT_TRUE(wrong_len.ok());
  EXPECT_FALSE(c->Compact(0, *wrong_len, false).ok());
  auto wrong_layers = kvmeta::PlanCompaction(20, {{0, 1}}, {}, {});
  ASSERT_TRUE(wrong_layers.ok());
  EXPECT_FALSE(c->Compact(0, *wrong_layers, false).ok());
  EXPECT_FALSE(c->Compact(7, *wrong_layers, false).ok());
  EXPECT_EQ(c->NumTokens(0), 20);
  EXPECT_FALSE(c->IsCompacted(0));
}

}  // namespace
}  // namespace kvforge::kvstore
