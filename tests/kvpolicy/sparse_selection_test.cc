// Sparse-decode block selection (kvpolicy/sparse_selection.h): Quest's bound is an upper bound
// of every key's score in its block and the chosen blocks are the top bounds (against brute
// force on random data); training-free NSA always reads the first unit, the two newest and the
// window, and picks the rest by summed softmax of q . mean key.
#include "kvpolicy/sparse_selection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace kvforge::kvpolicy {
namespace {

constexpr int32_t kHeads = 2, kDim = 8, kGroup = 2, kBt = 4;

struct Blocks {
  // keys[block][token][kv head][dim]
  std::vector<std::vector<std::vector<float>>> keys;
  std::vector<float> sums;  // the cache's layout: [block][kv head][min, max, sum][dim]
  BlockKeySummaries view() const { return {sums.data(), kHeads, kDim}; }
};

Blocks RandomBlocks(int n_blocks, int last_tokens, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  Blocks b;
  b.sums.assign(static_cast<size_t>(n_blocks * kHeads * 3 * kDim), 0.0f);
  for (int blk = 0; blk < n_blocks; ++blk) {
    const int tokens = blk + 1 == n_blocks ? last_tokens : kBt;
    std::vector<std::vector<float>> toks;
    for (int t = 0; t < tokens; ++t) {
      std::vector<float> row(kHeads * kDim);
      for (auto& x : row) x = nd(rng) + (blk % 3 == 0 ? 1.5f : 0.0f);
      toks.push_back(row);
    }
    for (int h = 0; h < kHeads; ++h)
      for (int d = 0; d < kDim; ++d) {
        float mn = 1e30f, mx = -1e30f, sum = 0;
        for (const auto& r : toks) {
          mn = std::min(mn, r[h * kDim + d]);
          mx = std::max(mx, r[h * kDim + d]);
          sum += r[h * kDim + d];
        }
        float* s = b.sums.data() + (static_cast<size_t>(blk) * kHeads + h) * 3 * kDim;
        s[d] = mn;
        s[kDim + d] = mx;
        s[2 * kDim + d] = sum;
      }
    b.keys.push_back(toks);
  }
  return b;
}

TEST(SparseSelectionTest, QuestBoundIsAnUpperBoundOfEveryKeyInTheBlock) {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (int c = 0; c < 200; ++c) {
    const Blocks b = RandomBlocks(6, 1 + static_cast<int>(rng() % kBt), rng);
    std::vector<float> q(kGroup * kDim);
    for (auto& x : q) x = nd(rng);
    for (int blk = 0; blk < 6; ++blk)
      for (int h = 0; h < kHeads; ++h) {
        const float u = QuestBound(q.data(), kGroup, kDim, b.view().Of(blk, h));
        for (const auto& tok : b.keys[static_cast<size_t>(blk)]) {
          float dot = 0;
          for (int g = 0; g < kGroup; ++g)
            for (int d = 0; d < kDim; ++d) dot += q[g * kDim + d] * tok[h * kDim + d];
          EXPECT_LE(dot, u + 1e-4f) << "case " << c << " block " << blk;
        }
      }
  }
}

TEST(SparseSelectionTest, QuestReadsTheTopBoundsAndTheNewestBlock) {
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  for (int c = 0; c < 300; ++c) {
    const int n = 1 + static_cast<int>(rng() % 20);
    const int last = 1 + static_cast<int>(rng() % kBt);
    const Blocks b = RandomBlocks(n, last, rng);
    std::vector<int32_t> table(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) table[static_cast<size_t>(i)] = n - 1 - i;  // physical reversed
    // The summaries are indexed by physical block: reverse them to match the table.
    Blocks phys = b;
    for (int i = 0; i < n; ++i)
      std::copy(b.sums.begin() + i * kHeads * 3 * kDim,
                b.sums.begin() + (i + 1) * kHeads * 3 * kDim,
                phys.sums.begin() + (n - 1 - i) * kHeads * 3 * kDim);
    std::vector<float> q(kGroup * kDim);
    for (auto& x : q) x = nd(rng);
    SparseDecode plan;
    plan.kind = KvPolicyKind::kQuest;
    plan.pick_blocks = 1 + static_cast<int64_t>(rng() % 8);
    const int32_t kvh = static_cast<int32_t>(rng() % kHeads);
    const auto got = SelectDecodeBlocks(plan, q.data(), kGroup, kDim, 0.35f, phys.view(), kvh,
                                        table.data(), n, last, kBt);
    // Brute force: bounds of logical blocks 0..n-2, the best pick-1 (ties: later), plus n-1.
    std::vector<std::pair<float, int>> cand;
    for (int i = 0; i + 1 < n; ++i)
      cand.push_back({QuestBound(q.data(), kGroup, kDim, b.view().Of(i, kvh)), i});
    std::sort(cand.begin(), cand.end(), [](auto a, auto c2) {
      return a.first != c2.first ? a.first > c2.first : a.second > c2.second;
    });
    std::vector<int32_t> want;
    for (int i = 0;
         i < std::min<int>(static_cast<int>(plan.pick_blocks) - 1, static_cast<int>(cand.size()));
         ++i)
      want.push_back(cand[static_cast<size_t>(i)].second);
    want.push_back(n - 1);
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want) << "case " << c;
  }
}

TEST(SparseSelectionTest, NsaAlwaysReadsTheSinksTheNewestUnitsAndTheWindow) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (int c = 0; c < 200; ++c) {
    const int n = 1 + static_cast<int>(rng() % 40);
    const int last = 1 + static_cast<int>(rng() % kBt);
    const Blocks b = RandomBlocks(n, last, rng);
    std::vector<int32_t> table(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) table[static_cast<size_t>(i)] = i;
    std::vector<float> q(kGroup * kDim);
    for (auto& x : q) x = nd(rng);
    KvPolicy p;
    p.kind = KvPolicyKind::kNsa;
    p.window = 8;                                               // two blocks of 4
    const SparseDecode plan = SparseDecodeFor(p, 64 * 4, kBt);  // 16 blocks per unit, 4 units
    ASSERT_EQ(plan.unit_blocks, 16);
    ASSERT_EQ(plan.window_blocks, 2);
    const auto got = SelectDecodeBlocks(plan, q.data(), kGroup, kDim, 0.35f, b.view(), 0,
                                        table.data(), n, last, kBt);
    ASSERT_TRUE(std::is_sorted(got.begin(), got.end()));
    auto has = [&](int blk) { return std::find(got.begin(), got.end(), blk) != got.end(); };
    const int units = (n + 15) / 16;
    for (int blk = 0; blk < std::min(n, 16); ++blk) EXPECT_TRUE(has(blk)) << "sink unit " << blk;
    for (int u = std::max(0, units - 2); u < units; ++u)
      for (int blk = u * 16; blk < std::min(n, (u + 1) * 16); ++blk) EXPECT_TRUE(has(blk));
    for (int blk = std::max(0, n - 2); blk < n; ++blk) EXPECT_TRUE(has(blk)) << "window";
    // At most 4 units' worth of blocks plus the window.
    EXPECT_LE(static_cast<int>(got.size()), std::min(n, 4 * 16 + 2));
  }
}

TEST(SparseSelectionTest, PlansFromPolicies) {
  KvPolicy q;
  q.kind = KvPolicyKind::kQuest;
  const SparseDecode a = SparseDecodeFor(q, 512, 16);
  EXPECT_EQ(a.pick_blocks, 32);
  EXPECT_EQ(a.dense_layers, 2);
  EXPECT_EQ(SparseDecodeFor(q, 20, 16).pick_blocks, 3);  // Quest's floor of 3 pages
  KvPolicy n;
  n.kind = KvPolicyKind::kNsa;
  const SparseDecode b = SparseDecodeFor(n, 1024, 16);
  EXPECT_EQ(b.unit_blocks, 4);
  EXPECT_EQ(b.pick_units, 16);
  EXPECT_EQ(b.window_blocks, 32);
  KvPolicy h;
  h.kind = KvPolicyKind::kH2O;
  EXPECT_EQ(SparseDecodeFor(h, 512, 16).kind, KvPolicyKind::kNone);
  EXPECT_TRUE(IsSparse(KvPolicyKind::kQuest));
  EXPECT_TRUE(IsSparse(KvPolicyKind::kNsa));
  EXPECT_FALSE(IsSparse(KvPolicyKind::kSnapKV));
}

}  // namespace
}  // namespace kvforge::kvpolicy
