// BlockTranscoder: serialized pool blocks to a smaller stored dtype and back, checked row by row
// against the reference row codecs (kvquant/row_codec.h): what ToStored writes is the stored
// codec's encoding of the decoded pool row, and ToPool writes the pool codec's encoding of the
// decoded stored row. Streams that would not shrink are copied byte for byte; padding is zero;
// blocks convert independently; impossible choices are refused with a reason.
#include "kvstore/block_transcoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kvquant/row_codec.h"
#include "kvstore/kv_store.h"

namespace kvforge::kvstore {
namespace {

using kvquant::KvDtype;
using kvquant::RowCodec;

struct Shape {
  int32_t layers = 2;
  int32_t heads = 2;
  int32_t head_dim = 32;
  int32_t block_tokens = 4;
  int32_t latent_rank = 0;  // > 0: one MLA latent of head_dim values (n_kv_head 1)
};

KvStoreConfig PoolConfig(const Shape& s, KvDtype k, KvDtype v, int64_t blocks = 8) {
  KvStoreConfig c;
  c.n_layer = s.layers;
  c.n_kv_head = s.latent_rank > 0 ? 1 : s.heads;
  c.head_dim = s.head_dim;
  c.block_tokens = s.block_tokens;
  c.num_blocks = blocks;
  c.k_dtype = k;
  c.v_dtype = v;
  c.latent_rank = s.latent_rank;
  return c;
}

int64_t RowValues(const KvStoreConfig& c) { return int64_t{c.n_kv_head} * c.head_dim; }

RowCodec Codec(KvDtype d, const KvStoreConfig& c, bool key) {
  Result<RowCodec> r = RowCodec::Create(d, c.n_kv_head, c.head_dim, key);
  EXPECT_TRUE(r.ok()) << r.error().ToString();
  return *r;
}

// Fills every row of every block with seeded normal values (scaled per row, so blocks of 32
// see different magnitudes) encoded in the pool's dtypes.
void Fill(KvStore& store, uint32_t seed) {
  const KvStoreConfig& c = store.config();
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(RowValues(c)));
  for (KvKind kind : {KvKind::kKey, KvKind::kValue}) {
    if (store.num_streams() == 1 && kind == KvKind::kValue) break;
    const RowCodec codec = Codec(store.dtype(kind), c, kind == KvKind::kKey);
    for (int32_t b = 0; b < c.num_blocks; ++b)
      for (int32_t l = 0; l < c.n_layer; ++l)
        for (int32_t r = 0; r < c.block_tokens; ++r) {
          const float scale = 0.1f + static_cast<float>(r + l + b % 3);
          for (float& x : row) x = scale * n(rng);
          codec.Encode(row.data(), store.Row(kind, l, b, r));
        }
  }
}

// Serialized blocks [n x block bytes] of `store`.
std::vector<uint8_t> ReadBlocks(const KvStore& store, int32_t n) {
  std::vector<uint8_t> out(static_cast<size_t>(n) * store.block_bytes_all_layers());
  for (int32_t b = 0; b < n; ++b)
    store.ReadBlock(b, out.data() + b * store.block_bytes_all_layers());
  return out;
}

struct Case {
  const char* name;
  Shape shape;
  KvDtype k, v, stored;
};

// For each case: every stored row is the reference encoding of the decoded pool row, and every
// row ToPool writes back is the pool codec's encoding of the decoded stored row.
void CheckAgainstReference(const Case& tc) {
  SCOPED_TRACE(tc.name);
  const KvStoreConfig pc = PoolConfig(tc.shape, tc.k, tc.v);
  auto store = KvStore::Create(pc);
  ASSERT_TRUE(store.ok()) << store.error().ToString();
  Fill(**store, 7);
  auto t = BlockTranscoder::Create(pc, tc.stored);
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  const BlockTranscoder& tr = **t;
  ASSERT_EQ(tr.pool_block_bytes(), (*store)->block_bytes_all_layers());
  EXPECT_LT(tr.stored_block_bytes(), tr.pool_block_bytes());
  const int32_t n = 3;
  const std::vector<uint8_t> pool = ReadBlocks(**store, n);
  std::vector<uint8_t> stored(n * tr.stored_block_bytes(), 0xAB);
  tr.ToStored(pool.data(), n, stored.data());
  std::vector<uint8_t> back(n * tr.pool_block_bytes(), 0xCD);
  tr.ToPool(stored.data(), n, back.data());
  // Write the converted blocks into blocks n .. 2n-1 of the same store and compare row by row.
  for (int32_t b = 0; b < n; ++b)
    (*store)->WriteBlock(n + b, back.data() + b * tr.pool_block_bytes());

  const int64_t values = RowValues(pc);
  const int streams = (*store)->num_streams();
  size_t at = 0;  // walks the stored form: [block][layer][stream][row][row bytes]
  std::vector<float> x(static_cast<size_t>(values)), y(x.size()), z(x.size());
  std::vector<uint8_t> want_stored, want_pool;
  for (int32_t b = 0; b < n; ++b)
    for (int32_t l = 0; l < pc.n_layer; ++l)
      for (int s = 0; s < streams; ++s) {
        const KvKind kind = s == 0 ? KvKind::kKey : KvKind::kValue;
        const KvDtype pool_dtype = (*store)->dtype(kind);
        const RowCodec from = Codec(pool_dtype, pc, kind == KvKind::kKey);
        const RowCodec to =
            Codec(tr.stored_dtype(static_cast<size_t>(s)), pc, kind == KvKind::kKey);
        const bool copied = tr.stored_dtype(static_cast<size_t>(s)) == pool_dtype;
        want_stored.resize(static_cast<size_t>(to.row_bytes()));
        want_pool.resize(static_cast<size_t>(from.row_bytes()));
        for (int32_t r = 0; r < pc.block_tokens; ++r) {
          const uint8_t* orig = (*store)->Row(kind, l, b, r);
          const uint8_t* got_stored = stored.data() + at;
          at += want_stored.size();
          from.Decode(orig, 0, values, x.data());
          to.Encode(x.data(), want_stored.data());
          ASSERT_TRUE(std::equal(want_stored.begin(), want_stored.end(), got_stored))
              << "stored row: block " << b << " layer " << l << " stream " << s << " row " << r;
          to.Decode(got_stored, 0, values, y.data());
          from.Encode(y.data(), want_pool.data());
          const uint8_t* got_pool = (*store)->Row(kind, l, n + b, r);
          ASSERT_TRUE(std::equal(want_pool.begin(), want_pool.end(), got_pool))
              << "pool row: block " << b << " layer " << l << " stream " << s << " row " << r;
          if (copied) {
            EXPECT_TRUE(std::equal(want_pool.begin(), want_pool.end(), orig)) << "copied stream";
          }
          // The loaded values stay within the stored dtype's rounding of the computed ones:
          // at most half a step of the largest 32-value block (q8_0: amax / 254, q4_0:
          // amax / 16 since it rounds by truncating x / d + 8.5), plus f16's own rounding.
          from.Decode(got_pool, 0, values, z.data());
          for (int64_t blk = 0; blk < values; blk += 32) {
            float amax = 0.0f;
            for (int64_t i = blk; i < std::min(values, blk + 32); ++i)
              amax = std::max(amax, std::fabs(x[i]));
            const float tol =
                amax * (tc.stored == KvDtype::kQ4_0 ? 1.0f / 7.0f : 1.0f / 100.0f) + 1e-6f;
            for (int64_t i = blk; i < std::min(values, blk + 32); ++i)
              ASSERT_NEAR(z[i], x[i], tol) << "value " << i;
          }
        }
      }
  EXPECT_EQ(at, stored.size()) << "the stored form is packed rows, nothing else";
}

TEST(BlockTranscoder, MatchesTheReferenceRowCodecs) {
  const Shape mha;                      // 2 layers, 2 heads x 32, blocks of 4
  const Shape narrow{3, 4, 8, 2, 0};    // head_dim 8: blocks of 32 span heads
  const Shape latent{2, 1, 96, 4, 64};  // MLA: 64 latent + 32 RoPE values
  const Case cases[] = {
      {"f32 -> f16", mha, KvDtype::kF32, KvDtype::kF32, KvDtype::kF16},
      {"f16 -> q8_0", mha, KvDtype::kF16, KvDtype::kF16, KvDtype::kQ8_0},
      {"f16 -> q4_0", narrow, KvDtype::kF16, KvDtype::kF16, KvDtype::kQ4_0},
      {"bf16 -> int8", mha, KvDtype::kBf16, KvDtype::kBf16, KvDtype::kInt8},
      {"q8_0 -> q4_0", mha, KvDtype::kQ8_0, KvDtype::kQ8_0, KvDtype::kQ4_0},
      {"K q8_0 kept, V f16 -> q8_0", mha, KvDtype::kQ8_0, KvDtype::kF16, KvDtype::kQ8_0},
      {"MLA latent f16 -> q8_0", latent, KvDtype::kF16, KvDtype::kF16, KvDtype::kQ8_0},
  };
  for (const Case& c : cases) CheckAgainstReference(c);
}

TEST(BlockTranscoder, F16OfF32IsExactlyTheF16Rounding) {
  // f32 pool through f16: what comes back is each value rounded to f16, bit for bit, and the
  // record is half the size (no row padding either: 2 x 32 x 4 B rows are 64-aligned already).
  const Shape s;
  const KvStoreConfig pc = PoolConfig(s, KvDtype::kF32, KvDtype::kF32);
  auto store = KvStore::Create(pc);
  ASSERT_TRUE(store.ok());
  Fill(**store, 11);
  auto t = BlockTranscoder::Create(pc, KvDtype::kF16);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->stored_block_bytes() * 2, (*t)->pool_block_bytes());
  EXPECT_EQ((*t)->Describe(), "k f32 -> f16, v f32 -> f16 (0.50x the bytes)");
  const std::vector<uint8_t> pool = ReadBlocks(**store, 1);
  std::vector<uint8_t> stored((*t)->stored_block_bytes()), back(pool.size());
  (*t)->ToStored(pool.data(), 1, stored.data());
  (*t)->ToPool(stored.data(), 1, back.data());
  const RowCodec f16 = Codec(KvDtype::kF16, pc, true);
  std::vector<uint8_t> h(static_cast<size_t>(f16.row_bytes()));
  std::vector<float> want(static_cast<size_t>(RowValues(pc)));
  for (size_t i = 0; i < pool.size(); i += want.size() * 4) {
    f16.Encode(reinterpret_cast<const float*>(pool.data() + i), h.data());
    f16.Decode(h.data(), 0, RowValues(pc), want.data());
    ASSERT_EQ(0, std::memcmp(back.data() + i, want.data(), want.size() * 4)) << "row at " << i;
  }
}

TEST(BlockTranscoder, PoolRowPaddingIsZeroAndStoredRowsArePacked) {
  // Rows of 2 x 32 f16 values are 128 B; as q8_0 68 B (stored packed). A pool with 256-byte
  // alignment pads each f16 row by 128 B, which ToPool must write as zeros.
  const Shape s;
  KvStoreConfig pc = PoolConfig(s, KvDtype::kF16, KvDtype::kF16);
  pc.row_align_bytes = 256;
  auto t = BlockTranscoder::Create(pc, KvDtype::kQ8_0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->stored_block_bytes(), uint64_t{2 * 2 * 4 * 68});  // layers x streams x rows
  EXPECT_EQ((*t)->pool_block_bytes(), uint64_t{2 * 2 * 4 * 256});
  std::vector<uint8_t> stored((*t)->stored_block_bytes(), 0);
  std::vector<uint8_t> back((*t)->pool_block_bytes(), 0xEE);
  (*t)->ToPool(stored.data(), 1, back.data());
  for (size_t row = 0; row < back.size(); row += 256)
    for (size_t i = 128; i < 256; ++i) ASSERT_EQ(back[row + i], 0) << "padding of row at " << row;
}

TEST(BlockTranscoder, BlocksConvertIndependently) {
  // Property: converting n blocks at once equals converting each alone, for random n and
  // random starting blocks (a chunk is any run of blocks).
  const Shape s{2, 2, 32, 4, 0};
  const KvStoreConfig pc = PoolConfig(s, KvDtype::kF16, KvDtype::kF16, 16);
  auto store = KvStore::Create(pc);
  ASSERT_TRUE(store.ok());
  Fill(**store, 3);
  auto t = BlockTranscoder::Create(pc, KvDtype::kQ4_0);
  ASSERT_TRUE(t.ok());
  const std::vector<uint8_t> all = ReadBlocks(**store, 16);
  const size_t pb = (*t)->pool_block_bytes(), sb = (*t)->stored_block_bytes();
  std::mt19937 rng(5);
  for (int iter = 0; iter < 40; ++iter) {
    const int64_t first = std::uniform_int_distribution<int64_t>(0, 15)(rng);
    const int64_t n = std::uniform_int_distribution<int64_t>(1, 16 - first)(rng);
    std::vector<uint8_t> together(n * sb), alone(sb);
    (*t)->ToStored(all.data() + first * pb, n, together.data());
    for (int64_t i = 0; i < n; ++i) {
      (*t)->ToStored(all.data() + (first + i) * pb, 1, alone.data());
      ASSERT_TRUE(std::equal(alone.begin(), alone.end(), together.begin() + i * sb))
          << "block " << first + i << " of a run of " << n;
    }
    std::vector<uint8_t> back_together(n * pb), back_alone(pb);
    (*t)->ToPool(together.data(), n, back_together.data());
    for (int64_t i = 0; i < n; ++i) {
      (*t)->ToPool(together.data() + i * sb, 1, back_alone.data());
      ASSERT_TRUE(std::equal(back_alone.begin(), back_alone.end(), back_together.begin() + i * pb));
    }
  }
}

TEST(BlockTranscoder, RefusesWhatItCannotServe) {
  const Shape s;
  struct Refusal {
    KvDtype k, v, stored;
    Shape shape;
    const char* says;
  };
  const Shape odd{2, 1, 40, 4, 0};  // rows of 40 values: not whole 32-value blocks
  const Refusal refusals[] = {
      {KvDtype::kF16, KvDtype::kF16, KvDtype::kF32, s, "can be stored as"},
      {KvDtype::kF16, KvDtype::kF16, KvDtype::kFp8E4M3, s, "can be stored as"},
      {KvDtype::kF16, KvDtype::kF16, KvDtype::kBf16, s, "not smaller"},
      {KvDtype::kQ4_0, KvDtype::kQ4_0, KvDtype::kQ8_0, s, "not smaller"},
      {KvDtype::kFp8E4M3, KvDtype::kFp8E4M3, KvDtype::kQ4_0, s, "cannot be transcoded"},
      {KvDtype::kKivi4, KvDtype::kKivi4, KvDtype::kQ4_0, Shape{2, 2, 32, 32, 0},
       "cannot be transcoded"},
      {KvDtype::kF16, KvDtype::kF16, KvDtype::kQ8_0, odd, "multiple of 32"},
  };
  for (const Refusal& r : refusals) {
    auto t = BlockTranscoder::Create(PoolConfig(r.shape, r.k, r.v), r.stored);
    ASSERT_FALSE(t.ok()) << r.says;
    EXPECT_EQ(t.error().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(t.error().message().find(r.says), std::string::npos) << t.error().message();
  }
}

}  // namespace
}  // namespace kvforge::kvstore
