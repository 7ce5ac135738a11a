// attention_decode_part (every table) and MergeDecodeParts against the reference attention of one
// query: random shapes (MHA, GQA, MQA, V wider or narrower than K), f32, f16 and q8_0 rows, pages
// in a shuffled order, block sizes that do and do not divide the chunk, depths from 1 slot up, and
// the slots cut into 1-5 random parts (empty parts included). Tolerance 2e-5 + 2e-5 |want|: float
// reassociation plus the SIMD exponential (relative error ~2e-7) against std::exp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "kernels/kernels.h"
#include "kvquant/row_codec.h"

namespace kvforge::kernels {
namespace {

// One layer's K or V rows: [n_blocks][block_tokens][row] of heads * dim values, f32, f16 or q8_0
// (34-byte blocks along the row, each row padded to 64 bytes as the store pads it).
struct PagedRows {
  std::vector<uint8_t> bytes;
  KvPageView view;
};

PagedRows MakeRows(std::mt19937& rng, kvquant::KvDtype dtype, int32_t heads, int32_t dim,
                   int32_t block_tokens, const std::vector<int32_t>& table) {
  std::normal_distribution<float> nd;
  PagedRows r;
  const size_t values = static_cast<size_t>(heads * dim);
  const bool q8 = dtype == kvquant::KvDtype::kQ8_0, f16 = dtype == kvquant::KvDtype::kF16;
  const size_t elt = f16 ? 2 : 4;
  const size_t row_bytes = q8 ? values / 32 * 34 : values * elt;
  const size_t token_stride = (row_bytes + 63) / 64 * 64;
  const size_t block_stride = token_stride * static_cast<size_t>(block_tokens);
  r.bytes.resize(block_stride * table.size());
  std::vector<float> x(values);
  for (size_t t = 0; t < r.bytes.size() / token_stride; ++t) {
    for (float& xi : x) xi = nd(rng);
    uint8_t* row = r.bytes.data() + t * token_stride;
    for (size_t i = 0; i < values; ++i) {
      if (q8) {
        if (i % 32 == 0) kvquant::QuantizeBlockQ8_0(x.data() + i, row + i / 32 * 34);
      } else if (f16) {
        const uint16_t h = Fp32ToFp16(x[i]);
        std::memcpy(row + 2 * i, &h, 2);
      } else {
        std::memcpy(row + 4 * i, &x[i], 4);
      }
    }
  }
  KvPageView& v = r.view;
  v.base = r.bytes.data();
  v.block_tokens = block_tokens;
  v.block_stride = block_stride;
  v.token_stride = token_stride;
  v.head_stride = static_cast<size_t>(dim) * (q8 ? 1 : elt);
  v.dtype = dtype;
  v.head_dim = dim;
  v.row_values = heads * dim;
  return r;
}

TEST(AttentionDecodePart, MergedPartsMatchReferenceAttention) {
  std::mt19937 rng(46);
  struct Shape {
    int32_t n_head, n_kv, hd, vd;
  };
  const Shape shapes[] = {{4, 4, 8, 8},     {8, 2, 16, 16}, {5, 1, 64, 64},
                          {12, 12, 64, 64}, {6, 3, 24, 40}, {4, 2, 32, 8}};
  using kvquant::KvDtype;
  // (K, V) dtypes: q8_0 where the head width is whole 32-value blocks.
  auto pairs_for = [](const Shape& sh) {
    std::vector<std::pair<KvDtype, KvDtype>> p = {{KvDtype::kF32, KvDtype::kF16},
                                                  {KvDtype::kF16, KvDtype::kF32}};
    if (sh.hd % 32 == 0) p.push_back({KvDtype::kQ8_0, KvDtype::kF16});
    if (sh.hd % 32 == 0 && sh.vd % 32 == 0) p.push_back({KvDtype::kQ8_0, KvDtype::kQ8_0});
    return p;
  };
  int cases = 0, q8_cases = 0;
  for (const Shape& sh : shapes)
    for (const auto& [k_dtype, v_dtype] : pairs_for(sh))
      for (const int32_t bt : {5, 16, 33})
        for (const int64_t n_kv : {int64_t{1}, int64_t{7}, int64_t{40}, int64_t{301}}) {
          const int64_t n_blocks = (n_kv + bt - 1) / bt;
          std::vector<int32_t> table(static_cast<size_t>(n_blocks));
          for (int64_t i = 0; i < n_blocks; ++i)
            table[static_cast<size_t>(i)] = static_cast<int32_t>(i);
          std::shuffle(table.begin(), table.end(), rng);
          PagedRows k = MakeRows(rng, k_dtype, sh.n_kv, sh.hd, bt, table);
          PagedRows v = MakeRows(rng, v_dtype, sh.n_kv, sh.vd, bt, table);
          std::normal_distribution<float> nd;
          std::vector<float> q(static_cast<size_t>(sh.n_head * sh.hd));
          for (float& x : q) x = 2.0f * nd(rng);  // spread scores so the softmax is not flat
          AttentionArgs a;
          a.q = q.data();
          a.q_stride = sh.n_head * sh.hd;
          a.out_stride = sh.n_head * sh.vd;
          a.n_q = 1;
          a.slot0 = n_kv - 1;
          a.n_head = sh.n_head;
          a.n_kv_head = sh.n_kv;
          a.head_dim = sh.hd;
          a.v_dim = sh.vd;
          a.scale = 1.0f / std::sqrt(static_cast<float>(sh.hd));
          a.k = k.view;
          a.k.block_table = table.data();
          a.v = v.view;
          a.v.block_table = table.data();
          ASSERT_TRUE(DecodePartApplies(a));
          std::vector<float> want(static_cast<size_t>(sh.n_head * sh.vd)), got(want.size());
          std::vector<float> scratch(static_cast<size_t>(n_kv));
          a.out = want.data();
          ReferenceTable().attention(a, 0, sh.n_kv, scratch.data());
          // Cut points, sorted, duplicates allowed (empty parts).
          std::uniform_int_distribution<int64_t> cut(0, n_kv);
          const int n_parts = 1 + static_cast<int>(rng() % 5);
          std::vector<int64_t> bounds = {0, n_kv};
          for (int i = 1; i < n_parts; ++i) bounds.push_back(cut(rng));
          std::sort(bounds.begin(), bounds.end());
          const int64_t np = static_cast<int64_t>(bounds.size()) - 1;
          for (const KernelTable* t : AvailableTables()) {
            std::vector<float> o(static_cast<size_t>(np * sh.n_head * sh.vd));
            std::vector<float> m(static_cast<size_t>(np * sh.n_head)), l(m.size());
            for (int64_t c = 0; c < np; ++c)
              t->attention_decode_part(a, bounds[static_cast<size_t>(c)],
                                       bounds[static_cast<size_t>(c + 1)],
                                       o.data() + c * sh.n_head * sh.vd, m.data() + c * sh.n_head,
                                       l.data() + c * sh.n_head);
            MergeDecodeParts(np, sh.n_head, sh.vd, o.data(), m.data(), l.data(), got.data());
            for (size_t i = 0; i < want.size(); ++i)
              ASSERT_NEAR(got[i], want[i], 2e-5 + 2e-5 * std::fabs(want[i]))
                  << t->name << " heads " << sh.n_head << "/" << sh.n_kv << " hd " << sh.hd
                  << " vd " << sh.vd << " bt " << bt << " n_kv " << n_kv << " parts " << np << " i "
                  << i;
          }
          ++cases;
          q8_cases += k_dtype == KvDtype::kQ8_0;
        }
  EXPECT_EQ(cases, (6 * 2 + 3 + 2) * 3 * 4);
  EXPECT_EQ(q8_cases, 5 * 3 * 4);
}

TEST(AttentionDecodePart, EmptyRangeIsTheMergeIdentity) {
  std::mt19937 rng(7);
  const std::vector<int32_t> table = {0};
  PagedRows k = MakeRows(rng, kvquant::KvDtype::kF16, 2, 8, 4, table);
  PagedRows v = MakeRows(rng, kvquant::KvDtype::kF16, 2, 8, 4, table);
  std::vector<float> q(16, 0.5f);
  AttentionArgs a;
  a.q = q.data();
  a.n_q = 1;
  a.slot0 = 3;
  a.n_head = 2;
  a.n_kv_head = 2;
  a.head_dim = 8;
  a.scale = 0.25f;
  a.k = k.view;
  a.k.block_table = table.data();
  a.v = v.view;
  a.v.block_table = table.data();
  for (const KernelTable* t : AvailableTables()) {
    std::vector<float> o(16, 9.0f), m(2, 9.0f), l(2, 9.0f);
    t->attention_decode_part(a, 2, 2, o.data(), m.data(), l.data());
    for (float x : o) EXPECT_EQ(x, 0.0f) << t->name;
    for (int h = 0; h < 2; ++h) {
      EXPECT_EQ(m[h], -std::numeric_limits<float>::infinity()) << t->name;
      EXPECT_EQ(l[h], 0.0f) << t->name;
    }
  }
  // Merging nothing but empty parts writes zeros, not NaN.
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> o(16, 0.0f), m = {-inf, -inf}, l = {0, 0}, out(16, 3.0f);
  MergeDecodeParts(1, 2, 8, o.data(), m.data(), l.data(), out.data());
  for (float x : out) EXPECT_EQ(x, 0.0f);
}

TEST(AttentionDecodePart, AppliesOnlyToOneQueryOverPlainRows) {
  std::mt19937 rng(3);
  const std::vector<int32_t> table = {0};
  PagedRows k = MakeRows(rng, kvquant::KvDtype::kF16, 2, 8, 4, table);
  PagedRows v = MakeRows(rng, kvquant::KvDtype::kF32, 2, 8, 4, table);
  AttentionArgs a;
  a.n_q = 1;
  a.n_head = 4;
  a.n_kv_head = 2;
  a.head_dim = 8;
  a.k = k.view;
  a.v = v.view;
  EXPECT_TRUE(DecodePartApplies(a));
  AttentionArgs b = a;
  b.n_q = 2;  // a prefill chunk or a speculative verification
  EXPECT_FALSE(DecodePartApplies(b));
  b = a;
  b.dead_begin = 1;
  b.dead_end = 2;
  EXPECT_FALSE(DecodePartApplies(b));
  b = a;
  float scores[4];
  b.slot_scores = scores;  // an eviction policy observes the weights
  EXPECT_FALSE(DecodePartApplies(b));
  b = a;
  b.k.dtype = kvquant::KvDtype::kQ8_0;  // head_dim 8: q8_0 blocks would span heads
  EXPECT_FALSE(DecodePartApplies(b));
  b.k.dtype = kvquant::KvDtype::kQ4_0;
  EXPECT_FALSE(DecodePartApplies(b));
  b = a;
  b.head_dim = 12;
  EXPECT_FALSE(DecodePartApplies(b));
  b = a;
  uint8_t window[64] = {};
  b.v.recent = window;  // a KIVI residual window
  EXPECT_FALSE(DecodePartApplies(b));
}

}  // namespace
}  // namespace kvforge::kernels
