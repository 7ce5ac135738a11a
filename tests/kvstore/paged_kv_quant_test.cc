// PagedKvCache with quantized dtypes: rows written through KvAccess::Write read back through the
// attention view as the codec decodes them (every per-token dtype, copy-on-write after a fork);
// KIVI windows follow KIVI's order (keys R at a time, values one by one, flushed at the next
// write), the eager (simulated) mode, fork and truncate; FP8 first-batch calibration.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "kernels/kernels.h"
#include "kernels/kernels_common.h"
#include "kvquant/nuq.h"
#include "kvquant/row_codec.h"
#include "kvstore/kv_test_util.h"
#include "kvstore/paged_kv_cache.h"

namespace kvforge::kvstore {
namespace {

using kvquant::KvDtype;

constexpr int32_t kHeads = 2, kDim = 16, kValues = kHeads * kDim;

std::unique_ptr<PagedKvCache> MakeCache(KvDtype k, KvDtype v, int32_t bt, int64_t r = 128,
                                        bool eager = false, int32_t layers = 1,
                                        bool turbo_qjl = false) {
  PagedKvCacheConfig c = testutil::SmallCacheConfig(k, v, kHeads, kDim, bt, layers);
  c.kivi_residual_tokens = r;
  c.kivi_eager = eager;
  c.store.turbo_qjl = turbo_qjl;
  return testutil::CreateOrFail(c);
}

std::vector<float> Random(int64_t tokens, uint32_t seed) {
  return testutil::RandomRows(tokens, kValues, seed);
}

// Token p of a view, all heads.
std::vector<float> Read(const kernels::KvPageView& v, int64_t p) {
  std::vector<float> out(kValues);
  for (int32_t h = 0; h < kHeads; ++h)
    kernels::internal::DecodeKvHeadRef(v, p, h, out.data() + h * kDim);
  return out;
}

std::vector<float> CodecRoundTrip(KvDtype d, const float* x, bool turbo_qjl = false) {
  const auto codec = *kvquant::RowCodec::Create(d, kHeads, kDim, /*key=*/true, turbo_qjl);
  std::vector<uint8_t> b(static_cast<size_t>(codec.row_bytes()));
  const float ones[kHeads] = {1.0f, 1.0f};
  codec.Encode(x, b.data(), ones);
  std::vector<float> y(kValues);
  codec.Decode(b.data(), 0, kValues, y.data(), ones);
  return y;
}

TEST(PagedKvQuantTest, RowsReadBackAsTheCodecDecodesThemAcrossCopyOnWrite) {
  for (KvDtype d :
       {KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16, KvDtype::kFp8E4M3, KvDtype::kFp8E5M2,
        KvDtype::kInt8, KvDtype::kQ8_0, KvDtype::kQ4_0, KvDtype::kTurbo3, KvDtype::kTurbo4})
    for (bool qjl : {false, true}) {  // turbo: QJL keys too (values are never QJL)
      if (qjl && !kvquant::IsTurbo(d)) continue;
      auto c = MakeCache(d, d, 16, 128, false, 1, qjl);
      ASSERT_NE(c, nullptr);
      EXPECT_EQ(c->store().row_stride(KvKind::kKey) % 64, 0u);
      const std::vector<float> k = Random(45, 1), v = Random(45, 2), k2 = Random(45, 3);
      ASSERT_TRUE(c->AddSequence(0, 40));
      c->Write(0, 0, 0, 25, k.data(), v.data(), kValues);
      c->Write(0, 0, 25, 15, k.data() + 25 * kValues, v.data() + 25 * kValues, kValues);
      ASSERT_TRUE(c->Fork(0, 1).ok());  // shares the partial last block (tokens 32..39)
      ASSERT_TRUE(c->AppendSlots(0, 5));
      ASSERT_TRUE(c->AppendSlots(1, 5));
      c->Write(0, 0, 40, 5, k.data() + 40 * kValues, v.data() + 40 * kValues, kValues);
      c->Write(0, 1, 40, 5, k2.data() + 40 * kValues, v.data() + 40 * kValues, kValues);
      for (int64_t seq : {0, 1}) {
        const auto kv = c->KeyView(0, seq), vv = c->ValueView(0, seq);
        EXPECT_EQ(kv.dtype, d);
        EXPECT_EQ(kv.turbo != nullptr, kvquant::IsTurbo(d));
        if (kv.turbo != nullptr) {
          EXPECT_EQ(kv.turbo->qjl, qjl);
        }
        if (vv.turbo != nullptr) {
          EXPECT_FALSE(vv.turbo->qjl);
        }
        for (int64_t p = 0; p < 45; ++p) {
          const float* src = (seq == 1 && p >= 40 ? k2 : k).data() + p * kValues;
          EXPECT_EQ(Read(kv, p), CodecRoundTrip(d, src, qjl))
              << KvDtypeName(d) << " seq " << seq << " p " << p;
          EXPECT_EQ(Read(vv, p), CodecRoundTrip(d, v.data() + p * kValues)) << KvDtypeName(d);
        }
      }
      ASSERT_TRUE(c->CheckInvariants().ok());
    }
}

TEST(PagedKvQuantTest, KiviFollowsTheReferenceOrder) {
  auto c = MakeCache(KvDtype::kKivi2, KvDtype::kKivi2, 32, /*r=*/64);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->has_sequence_state());
  EXPECT_EQ(c->store().row_tokens(KvKind::kKey), 32);
  const std::vector<float> k = Random(200, 4), v = Random(200, 5);
  ASSERT_TRUE(c->AddSequence(0, 100));
  c->Write(0, 0, 0, 100, k.data(), v.data(), kValues);
  // A prefill attends to itself in full precision: nothing is quantized yet.
  EXPECT_EQ(c->KeyView(0, 0).recent_begin, 0);
  EXPECT_EQ(c->ValueView(0, 0).recent_begin, 0);
  EXPECT_EQ(c->ResidualBytes(), 2 * 100 * kValues * 2);
  // The next step quantizes keys R = 64 at a time (36 stay) and values down to R - 1 (+ 1 new).
  ASSERT_TRUE(c->AppendSlots(0, 1));
  c->Write(0, 0, 100, 1, k.data() + 100 * kValues, v.data() + 100 * kValues, kValues);
  EXPECT_EQ(c->KeyView(0, 0).recent_begin, 64);
  EXPECT_EQ(c->ValueView(0, 0).recent_begin, 37);
  // Decode steps: the key window grows back to R, then empties at the following step.
  for (int64_t p = 101; p < 129; ++p) {
    ASSERT_TRUE(c->AppendSlots(0, 1));
    c->Write(0, 0, p, 1, k.data() + p * kValues, v.data() + p * kValues, kValues);
    EXPECT_EQ(c->KeyView(0, 0).recent_begin, p < 128 ? 64 : 128) << p;
    EXPECT_EQ(c->ValueView(0, 0).recent_begin, p + 1 - 64) << p;
  }
  const auto kv = c->KeyView(0, 0), vv = c->ValueView(0, 0);
  for (int64_t p = 0; p < 129; ++p) {
    const std::vector<float> kr = Read(kv, p), vr = Read(vv, p);
    for (int i = 0; i < kValues; ++i) {
      const float kx = k[static_cast<size_t>(p * kValues + i)],
                  vx = v[static_cast<size_t>(p * kValues + i)];
      // Quantized: within a 2-bit step of a Gaussian group; in the window: f16 exact.
      if (p < 128) {
        EXPECT_NEAR(kr[static_cast<size_t>(i)], kx, 3.0f) << p;
      } else {
        EXPECT_EQ(kr[static_cast<size_t>(i)], Fp16ToFp32(Fp32ToFp16(kx)));
      }
      if (p < 65) {
        EXPECT_NEAR(vr[static_cast<size_t>(i)], vx, 3.0f) << p;
      } else {
        EXPECT_EQ(vr[static_cast<size_t>(i)], Fp16ToFp32(Fp32ToFp16(vx))) << p;
      }
    }
  }
  // The quantized keys are the codec's groups, not a copy of the window: some error exists.
  double err = 0;
  for (int64_t p = 0; p < 64; ++p)
    err += std::fabs(Read(kv, p)[0] - k[static_cast<size_t>(p * kValues)]);
  EXPECT_GT(err, 0.0);
}

TEST(PagedKvQuantTest, KiviEagerModeQuantizesBeforeAttention) {
  auto c = MakeCache(KvDtype::kKivi4, KvDtype::kKivi4, 32, /*r=*/0, /*eager=*/true);
  ASSERT_NE(c, nullptr);
  const std::vector<float> k = Random(40, 6), v = Random(40, 7);
  ASSERT_TRUE(c->AddSequence(0, 40));
  c->Write(0, 0, 0, 40, k.data(), v.data(), kValues);
  EXPECT_EQ(c->KeyView(0, 0).recent_begin, 32);  // one whole group; 8 keys wait for theirs
  EXPECT_EQ(c->ValueView(0, 0).recent_begin, 40);
  // Lazy KIVI needs R >= 32.
  PagedKvCacheConfig bad;
  bad.store = c->store().config();
  bad.kivi_residual_tokens = 0;
  EXPECT_FALSE(PagedKvCache::Create(bad).ok());
  bad.kivi_residual_tokens = 48;
  EXPECT_FALSE(PagedKvCache::Create(bad).ok());
}

TEST(PagedKvQuantTest, KiviForkAndTruncate) {
  auto c = MakeCache(KvDtype::kKivi2, KvDtype::kKivi2, 32, /*r=*/64, false, /*layers=*/2);
  ASSERT_NE(c, nullptr);
  const std::vector<float> k = Random(200, 8), v = Random(200, 9), k2 = Random(200, 10);
  ASSERT_TRUE(c->AddSequence(0, 150));
  for (int32_t l = 0; l < 2; ++l) c->Write(l, 0, 0, 150, k.data(), v.data(), kValues);
  ASSERT_TRUE(c->Fork(0, 1).ok());
  for (int64_t seq : {0, 1}) {
    ASSERT_TRUE(c->AppendSlots(seq, 1));
    const auto& src = seq == 0 ? k : k2;
    for (int32_t l = 0; l < 2; ++l)
      c->Write(l, seq, 150, 1, src.data() + 150 * kValues, v.data() + 150 * kValues, kValues);
  }
  // Both flushed 128 keys into the shared blocks (identical bytes) and keep their own window.
  for (int64_t seq : {0, 1}) {
    const auto kv = c->KeyView(1, seq);
    EXPECT_EQ(kv.recent_begin, 128);
    EXPECT_EQ(Read(kv, 150)[0], Fp16ToFp32(Fp32ToFp16((seq == 0 ? k : k2)[150 * kValues])));
    EXPECT_NEAR(Read(kv, 10)[3], k[10 * kValues + 3], 3.0f);
  }
  EXPECT_EQ(Read(c->KeyView(0, 0), 20), Read(c->KeyView(0, 1), 20));
  // Truncating inside the quantized keys reopens the window at the unit boundary (64).
  const std::vector<float> before = Read(c->KeyView(0, 0), 66);
  ASSERT_TRUE(c->Truncate(0, 70).ok());
  EXPECT_EQ(c->NumTokens(0), 70);
  const auto kv = c->KeyView(0, 0);
  EXPECT_EQ(kv.recent_begin, 64);
  const std::vector<float> after = Read(kv, 66);
  for (int i = 0; i < kValues; ++i)
    EXPECT_EQ(after[static_cast<size_t>(i)],
              Fp16ToFp32(Fp32ToFp16(before[static_cast<size_t>(i)])));
  EXPECT_EQ(c->ValueView(0, 0).recent_begin, 70);  // values below the cut stay quantized
  // Writing continues from the cut.
  ASSERT_TRUE(c->AppendSlots(0, 1));
  for (int32_t l = 0; l < 2; ++l) c->Write(l, 0, 70, 1, k2.data(), v.data(), kValues);
  EXPECT_EQ(c->KeyView(0, 0).recent_begin, 64);
  ASSERT_TRUE(c->CheckInvariants().ok());
  c->Free(0);
  c->Free(1);
  EXPECT_EQ(c->ResidualBytes(), 0);
}

TEST(PagedKvQuantTest, Fp8CalibratesOnTheFirstBatch) {
  PagedKvCacheConfig cfg;
  cfg.store.n_layer = 2;
  cfg.store.n_kv_head = kHeads;
  cfg.store.head_dim = kDim;
  cfg.store.num_blocks = 8;
  cfg.store.k_dtype = cfg.store.v_dtype = KvDtype::kFp8E4M3;
  cfg.fp8_calibrate = true;
  auto created = PagedKvCache::Create(cfg);
  ASSERT_TRUE(created.ok());
  auto c = std::move(*created);
  std::vector<float> k(kValues * 3, 0.5f), v(kValues * 3, 0.25f);
  k[5] = -400.0f;
  v[kValues + 2] = 50.0f;
  ASSERT_TRUE(c->AddSequence(0, 8));
  c->Write(0, 0, 0, 3, k.data(), v.data(), kValues);
  EXPECT_FLOAT_EQ(c->fp8_scales().key(0)[0], 2.0f);
  EXPECT_FLOAT_EQ(c->fp8_scales().value(0)[1], 0.5f);
  EXPECT_FALSE(c->fp8_scales().calibrated(1));
  // Frozen after the first batch: a larger later value saturates instead of rescaling.
  k[5] = -4000.0f;
  c->Write(0, 0, 3, 1, k.data(), v.data(), kValues);
  EXPECT_FLOAT_EQ(c->fp8_scales().key(0)[0], 2.0f);
  EXPECT_FLOAT_EQ(Read(c->KeyView(0, 0), 3)[5], -896.0f);  // 448 x 2
  EXPECT_FLOAT_EQ(Read(c->KeyView(0, 0), 0)[0], 0.5f);
}

TEST(PagedKvQuantTest, KvQuant3StoresKeysBeforeRopeAndCalibratesOnTheFirstBatch) {
  PagedKvCacheConfig cfg;
  cfg.store.n_layer = 2;
  cfg.store.n_kv_head = kHeads;
  cfg.store.head_dim = kDim;
  cfg.store.num_blocks = 16;
  cfg.store.k_dtype = cfg.store.v_dtype = KvDtype::kKvQuant3;
  cfg.rope.freq_base = 10000.0f;
  auto created = PagedKvCache::Create(cfg);
  ASSERT_TRUE(created.ok()) << created.error().ToString();
  auto c = std::move(*created);
  // Pre-RoPE keys with a strong per-channel offset (what KVQuant's per-channel keys exploit),
  // rotated to their positions as the model hands them over.
  std::vector<float> pre = Random(40, 7), v = Random(40, 8);
  for (int64_t t = 0; t < 40; ++t)
    for (int64_t i = 0; i < kValues; ++i) pre[static_cast<size_t>(t * kValues + i)] += 0.5f * i;
  std::vector<float> post = pre;
  for (int64_t t = 0; t < 40; ++t)
    kernels::Rope(post.data() + t * kValues, kHeads, kDim, kDim, t, 10000.0f, 1.0f, false);
  ASSERT_TRUE(c->AddSequence(0, 40));
  EXPECT_FALSE(c->nuq_calibration().calibrated(0));
  c->Write(0, 0, 0, 32, post.data(), v.data(), kValues);
  ASSERT_TRUE(c->nuq_calibration().calibrated(0));
  EXPECT_FALSE(c->nuq_calibration().calibrated(1));
  // The calibration saw pre-RoPE keys: channel centers follow the 0.5 * i offsets.
  const kvquant::NuqLayer& kl = c->nuq_calibration().key(0);
  for (int64_t i = 0; i < kValues; i += 7)
    EXPECT_NEAR(kl.center[static_cast<size_t>(i)], 0.5f * i, 1.0f) << i;
  c->Write(0, 0, 32, 8, post.data() + 32 * kValues, v.data() + 32 * kValues, kValues);
  ASSERT_TRUE(c->Fork(0, 1).ok());
  const auto kv = c->KeyView(0, 1), vv = c->ValueView(0, 1);
  double kerr = 0, knorm = 0, verr = 0, vnorm = 0;
  for (int64_t p = 0; p < 40; ++p) {
    // Reads are the encoder's rows decoded and rotated back to position p.
    std::vector<uint8_t> enc(static_cast<size_t>(kvquant::NuqRowBytes(kValues, true)));
    kvquant::NuqEncodeKeyRow(pre.data() + p * kValues, kValues, kl, enc.data());
    std::vector<float> want(kValues);
    kvquant::NuqDecode(enc.data(), kValues, true, kl, 0, kValues, want.data());
    kernels::Rope(want.data(), kHeads, kDim, kDim, p, 10000.0f, 1.0f, false);
    const std::vector<float> got = Read(kv, p);
    for (int64_t i = 0; i < kValues; ++i) {
      const size_t u = static_cast<size_t>(i), at = static_cast<size_t>(p * kValues + i);
      // Rotating back and forth costs a few ulps, which can move a value across a code boundary
      // only with vanishing probability on random data; allow float noise.
      EXPECT_NEAR(got[u], want[u], 1e-4f * (1.0f + std::fabs(want[u]))) << p << " " << i;
      kerr += (got[u] - post[at]) * (got[u] - post[at]);
      knorm += post[at] * post[at];
    }
    const std::vector<float> vg = Read(vv, p);
    for (int64_t i = 0; i < kValues; ++i) {
      const size_t at = static_cast<size_t>(p * kValues + i);
      verr += (vg[static_cast<size_t>(i)] - v[at]) * (vg[static_cast<size_t>(i)] - v[at]);
      vnorm += v[at] * v[at];
    }
  }
  EXPECT_LT(kerr / knorm, 0.02);  // the offsets are absorbed by the per-channel centers
  EXPECT_LT(verr / vnorm, 0.08);  // 3-bit per-token values
  ASSERT_TRUE(c->CheckInvariants().ok());
}

}  // namespace
}  // namespace kvforge::kvstore
