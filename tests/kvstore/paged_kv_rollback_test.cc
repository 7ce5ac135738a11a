// Speculative decoding's rollback, per cache layout: a sequence that writes 1 + d tokens and
// is cut back to 1 + a (Truncate) must hold exactly what a sequence that wrote only those 1 + a
// tokens holds (every kept row as attention decodes it, the stored bytes of per-token codecs,
// KIVI's windows, block counts), step after step, also on blocks shared with a fork. A random
// sequence of steps against the plain writer as the model.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kvquant/kivi.h"
#include "kvstore/kv_test_util.h"
#include "kvstore/paged_kv_cache.h"

namespace kvforge::kvstore {
namespace {

using kvquant::KvDtype;

constexpr int32_t kLayers = 2;

struct Layout {
  std::string name;
  PagedKvCacheConfig config;
  int64_t width = 0;  // floats per K (and V) row
  bool latent = false;
};

std::vector<Layout> Layouts() {
  std::vector<Layout> out;
  for (KvDtype d : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16, KvDtype::kFp8E4M3, KvDtype::kQ8_0,
                    KvDtype::kQ4_0, KvDtype::kKvQuant3, KvDtype::kTurbo3, KvDtype::kTurbo4,
                    KvDtype::kKivi2, KvDtype::kKivi4}) {
    const bool kivi = kvquant::IsKivi(d);
    Layout l{std::string(kvquant::KvDtypeName(d)),
             testutil::SmallCacheConfig(d, d, 2, 16, kivi ? 32 : 16, kLayers), 32, false};
    if (kivi) l.config.kivi_residual_tokens = 32;
    out.push_back(l);
  }
  Layout mla{"latent q8_0",
             testutil::SmallCacheConfig(KvDtype::kQ8_0, KvDtype::kQ8_0, 1, 64, 16, kLayers), 64,
             true};
  mla.config.store.latent_rank = 32;
  out.push_back(mla);
  return out;
}

// Writes rows [pos0, pos0 + n) of `k`/`v` ([tokens][width]) into every layer of `seq`.
void WriteRows(PagedKvCache& c, int64_t seq, int64_t pos0, int64_t n, const std::vector<float>& k,
               const std::vector<float>& v, const Layout& l) {
  ASSERT_TRUE(c.EnsureTokens(seq, pos0 + n));
  for (int32_t layer = 0; layer < kLayers; ++layer)
    c.Write(layer, seq, pos0, n, k.data() + pos0 * l.width,
            l.latent ? nullptr : v.data() + pos0 * l.width, l.width);
}

std::vector<float> Decoded(const kernels::KvPageView& v, int64_t p, int64_t width) {
  std::vector<float> out(static_cast<size_t>(width));
  kernels::DecodeKvRow(v, p, out.data());
  return out;
}

// What attention reads, and for per-token codecs the stored bytes, of every kept position.
void ExpectSame(const PagedKvCache& a, const PagedKvCache& b, int64_t seq, const Layout& l,
                const std::string& where) {
  ASSERT_EQ(a.NumTokens(seq), b.NumTokens(seq)) << where;
  ASSERT_EQ(a.Blocks(seq)->size(), b.Blocks(seq)->size()) << where;
  EXPECT_EQ(a.num_free_blocks(), b.num_free_blocks()) << where;
  EXPECT_EQ(a.ResidualBytes(), b.ResidualBytes()) << where;
  const bool kivi = a.has_sequence_state();
  const int32_t bt = a.block_tokens();
  for (int32_t layer = 0; layer < kLayers; ++layer)
    for (KvKind kind : {KvKind::kKey, KvKind::kValue}) {
      if (l.latent && kind == KvKind::kValue) continue;
      const auto va = kind == KvKind::kKey ? a.KeyView(layer, seq) : a.ValueView(layer, seq);
      const auto vb = kind == KvKind::kKey ? b.KeyView(layer, seq) : b.ValueView(layer, seq);
      // The row's codes and scales (its padding to the stride is never written).
      const auto& streams = a.store().layout().streams();
      const size_t row_bytes =
          static_cast<size_t>(streams[l.latent ? 0 : (kind == KvKind::kKey ? 0 : 1)].row_bytes);
      for (int64_t p = 0; p < a.NumTokens(seq); ++p) {
        ASSERT_EQ(Decoded(va, p, l.width), Decoded(vb, p, l.width))
            << where << " layer " << layer << " pos " << p;
        if (kivi) continue;  // KIVI rows are written when they leave the window
        const uint8_t* ra = a.store().SlotRow(kind, layer, (*a.Blocks(seq))[p / bt], p % bt);
        const uint8_t* rb = b.store().SlotRow(kind, layer, (*b.Blocks(seq))[p / bt], p % bt);
        ASSERT_EQ(std::memcmp(ra, rb, row_bytes), 0) << where << " bytes, pos " << p;
      }
    }
}

TEST(PagedKvRollbackTest, CutDraftsLeaveTheCacheAsIfNeverWritten) {
  for (const Layout& l : Layouts()) {
    SCOPED_TRACE(l.name);
    auto a = testutil::CreateOrFail(l.config), b = testutil::CreateOrFail(l.config);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    constexpr int64_t kMax = 400;
    const std::vector<float> k = testutil::RandomRows(kMax, l.width, 1);
    const std::vector<float> v = testutil::RandomRows(kMax, l.width, 2);
    std::vector<float> junk_k = testutil::RandomRows(kMax, l.width, 3);
    std::vector<float> junk_v = testutil::RandomRows(kMax, l.width, 4);
    // A prompt, then a fork that shares its blocks (the partial last one too).
    for (PagedKvCache* c : {a.get(), b.get()}) {
      ASSERT_TRUE(c->AddSequence(0, 45));
      WriteRows(*c, 0, 0, 45, k, v, l);
      ASSERT_TRUE(c->Fork(0, 1).ok());
    }
    std::mt19937 rng(7);
    int64_t n = 45;  // tokens both hold for sequence 1
    for (int step = 0; step < 60 && n + 8 < kMax; ++step) {
      const int64_t d = 1 + static_cast<int64_t>(rng() % 7);
      const int64_t kept = static_cast<int64_t>(rng() % (d + 1));
      // a: the last token and d drafts; the rejected ones are junk rows.
      std::vector<float> ak = k, av = v;
      for (int64_t i = n + 1 + kept; i < n + 1 + d; ++i)
        for (int64_t c = 0; c < l.width; ++c) {
          ak[static_cast<size_t>(i * l.width + c)] = junk_k[static_cast<size_t>(i * l.width + c)];
          av[static_cast<size_t>(i * l.width + c)] = junk_v[static_cast<size_t>(i * l.width + c)];
        }
      WriteRows(*a, 1, n, 1 + d, ak, av, l);
      ASSERT_TRUE(a->Truncate(1, n + 1 + kept).ok());
      WriteRows(*b, 1, n, 1 + kept, k, v, l);  // the model: only what was kept
      n += 1 + kept;
      ExpectSame(*a, *b, 1, l, "step " + std::to_string(step));
      ExpectSame(*a, *b, 0, l, "the fork's parent, step " + std::to_string(step));
      ASSERT_TRUE(a->CheckInvariants().ok());
    }
  }
}

}  // namespace
}  // namespace kvforge::kvstore
