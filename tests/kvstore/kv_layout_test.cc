// Tests for kvstore::KvLayout: dtype parsing, bytes per token for every dtype (codes and
// scales counted by hand here), KIVI's residual window, MLA latents, block placement and
// alignment, budgets, validation and overflow.
#include "kvstore/kv_layout.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <utility>

namespace kvforge::kvstore {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

KvLayout MakeLayout(KvLayoutConfig cfg) {
  Result<KvLayout> layout = KvLayout::Create(cfg);
  EXPECT_TRUE(layout.ok()) << layout.status().ToString();
  return std::move(layout).value();
}

// LLaMA-3-70B-like attention: 80 layers, 8 KV heads of 128.
KvLayoutConfig Llama70b(KvDtype dtype) {
  KvLayoutConfig cfg;
  cfg.num_layers = 80;
  cfg.num_kv_heads = 8;
  cfg.head_dim = 128;
  cfg.dtype = dtype;
  return cfg;
}

TEST(KvDtypeTest, ParseNamesAndAliases) {
  const KvDtype all[] = {KvDtype::kF32,     KvDtype::kF16,   KvDtype::kBf16,   KvDtype::kFp8E4M3,
                         KvDtype::kFp8E5M2, KvDtype::kInt8,  KvDtype::kQ8_0,   KvDtype::kQ4_0,
                         KvDtype::kKivi2,   KvDtype::kKivi4, KvDtype::kTurbo3, KvDtype::kTurbo4};
  for (KvDtype d : all) {
    Result<KvDtype> parsed = ParseKvDtype(KvDtypeName(d));
    ASSERT_TRUE(parsed.ok()) << KvDtypeName(d);
    EXPECT_EQ(*parsed, d);
  }
  EXPECT_EQ(*ParseKvDtype("fp8"), KvDtype::kFp8E4M3);
  EXPECT_EQ(*ParseKvDtype("FP16"), KvDtype::kF16);
  EXPECT_EQ(*ParseKvDtype("fp32"), KvDtype::kF32);
  EXPECT_EQ(*ParseKvDtype("e5m2"), KvDtype::kFp8E5M2);
  EXPECT_EQ(*ParseKvDtype("bfloat16"), KvDtype::kBf16);
  EXPECT_EQ(KvDtypeName(KvDtype::kQ8_0), "q8_0");
  Result<KvDtype> bad = ParseKvDtype("q5_k");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("kivi4"), std::string::npos);  // lists the choices
  EXPECT_FALSE(ParseKvDtype("").ok());
  EXPECT_TRUE(IsKivi(KvDtype::kKivi2));
  EXPECT_TRUE(IsFp8(KvDtype::kFp8E5M2));
  EXPECT_FALSE(IsFp8(KvDtype::kInt8));
}

TEST(KvLayoutTest, F16Llama70bMatchesTheFormula) {
  KvLayout l = MakeLayout(Llama70b(KvDtype::kF16));
  ASSERT_EQ(l.streams().size(), 2u);
  EXPECT_EQ(l.streams()[0].kind, KvStreamKind::kKey);
  EXPECT_EQ(l.streams()[1].kind, KvStreamKind::kValue);
  EXPECT_EQ(l.ValuesPerTokenPerLayer(), 2 * 8 * 128);
  EXPECT_EQ(l.BytesPerTokenPerLayer(), 2 * 8 * 128 * 2);
  EXPECT_EQ(l.BytesPerToken(), 80 * 4096);
  EXPECT_DOUBLE_EQ(l.BitsPerValue(), 16.0);
  EXPECT_EQ(l.FixedBytes(), 0);
  // 2 x L x T x H_kv x d_h x 2 bytes.
  EXPECT_EQ(*l.BytesForTokens(1024), 2LL * 80 * 1024 * 8 * 128 * 2);
  EXPECT_EQ(*l.BytesForTokens(1024), 5 * kGiB / 16);  // 0.3125 GiB
  EXPECT_EQ(*l.BytesForTokens(131072), 40 * kGiB);
  EXPECT_EQ(*l.BytesForTokens(0), 0);
  EXPECT_EQ(l.ResidualBytesPerSequence(), 0);
}

TEST(KvLayoutTest, PlainDtypes) {
  EXPECT_EQ(MakeLayout(Llama70b(KvDtype::kF32)).BytesPerTokenPerLayer(), 2 * 1024 * 4);
  EXPECT_EQ(MakeLayout(Llama70b(KvDtype::kBf16)).BytesPerTokenPerLayer(), 2 * 1024 * 2);
}

TEST(KvLayoutTest, Fp8CountsItsScalesOncePerCache) {
  for (KvDtype d : {KvDtype::kFp8E4M3, KvDtype::kFp8E5M2}) {
    KvLayout l = MakeLayout(Llama70b(d));
    EXPECT_EQ(l.BytesPerTokenPerLayer(), 2 * 1024);
    EXPECT_DOUBLE_EQ(l.BitsPerValue(), 8.0);
    EXPECT_EQ(l.FixedBytes(), 80 * 2 * 4);  // one f32 k_scale and v_scale per layer
    Result<KvBytes> split = l.BytesForTokensSplit(1000);
    ASSERT_TRUE(split.ok());
    EXPECT_EQ(split->code_bytes, 80LL * 1000 * 2048);
    EXPECT_EQ(split->scale_bytes, 0);  // per-token bytes carry no scales
  }
  KvLayoutConfig per_head = Llama70b(KvDtype::kFp8E4M3);
  per_head.fp8_scales = Fp8ScaleGranularity::kPerHead;
  EXPECT_EQ(MakeLayout(per_head).FixedBytes(), 80 * 2 * 8 * 4);
}

TEST(KvLayoutTest, Int8HasOneScalePerTokenPerHead) {
  KvLayout l = MakeLayout(Llama70b(KvDtype::kInt8));
  EXPECT_EQ(l.streams()[0].row_code_bytes, 1024);
  EXPECT_EQ(l.streams()[0].row_scale_bytes, 8 * 2);  // f16 scale per head
  EXPECT_EQ(l.BytesPerTokenPerLayer(), 2 * (1024 + 16));
  EXPECT_DOUBLE_EQ(l.BitsPerValue(), 8.0 + 16.0 / 128.0);  // 8.125 bits at d = 128
  KvLayoutConfig f32_scale = Llama70b(KvDtype::kInt8);
  f32_scale.int8_scale_bytes = 4;
  EXPECT_EQ(MakeLayout(f32_scale).BytesPerTokenPerLayer(), 2 * (1024 + 32));
  Result<KvBytes> split = l.BytesForTokensSplit(10);
  EXPECT_EQ(split->scale_bytes, 80LL * 10 * 2 * 16);
}

TEST(KvLayoutTest, GgmlBlockQuants) {
  KvLayout q8 = MakeLayout(Llama70b(KvDtype::kQ8_0));
  EXPECT_EQ(q8.streams()[0].row_bytes, 1024 / 32 * 34);  // 34 bytes per 32 values
  EXPECT_EQ(q8.BytesPerTokenPerLayer(), 2 * 1088);
  EXPECT_DOUBLE_EQ(q8.BitsPerValue(), 8.5);
  KvLayout q4 = MakeLayout(Llama70b(KvDtype::kQ4_0));
  EXPECT_EQ(q4.streams()[0].row_code_bytes, 512);
  EXPECT_EQ(q4.streams()[0].row_scale_bytes, 64);
  EXPECT_EQ(q4.BytesPerTokenPerLayer(), 2 * 1024 / 32 * 18);
  EXPECT_DOUBLE_EQ(q4.BitsPerValue(), 4.5);
  // Blocks of 32 must not straddle heads.
  KvLayoutConfig odd = Llama70b(KvDtype::kQ8_0);
  odd.head_dim = 80;
  EXPECT_EQ(KvLayout::Create(odd).status().code(), StatusCode::kInvalidArgument);
  odd.dtype = KvDtype::kF16;
  EXPECT_TRUE(KvLayout::Create(odd).ok());
}

// kvquant3, 1024 values per row: 384 B of 3-bit codes; keys 21 outlier slots (2%, rounded up)
// of 4 B; values 11 slots (1%) + f16 center and radius. Per layer and stream, f32 tables of 8
// and (keys) an f32 center and radius per channel, stored once.
TEST(KvLayoutTest, KvQuant3CountsOutlierSlotsAndCalibration) {
  KvLayout l = MakeLayout(Llama70b(KvDtype::kKvQuant3));
  const KvStream& k = l.streams()[0];
  const KvStream& v = l.streams()[1];
  EXPECT_EQ(k.row_code_bytes, 384);
  EXPECT_EQ(k.row_scale_bytes, 21 * 4);
  EXPECT_EQ(v.row_code_bytes, 384);
  EXPECT_EQ(v.row_scale_bytes, 11 * 4 + 4);
  EXPECT_EQ(l.BytesPerTokenPerLayer(), 468 + 432);
  EXPECT_DOUBLE_EQ(l.BitsPerValue(), 8.0 * 900 / 2048);
  EXPECT_EQ(l.FixedBytes(), 80 * (32 + 1024 * 8 + 32));
  KvLayoutConfig odd = Llama70b(KvDtype::kKvQuant3);
  odd.num_kv_heads = 1;
  odd.head_dim = 12;  // 12 channels do not fill 3-byte groups of 8 codes
  EXPECT_EQ(KvLayout::Create(odd).status().code(), StatusCode::kInvalidArgument);
  KvLayoutConfig mla = Llama70b(KvDtype::kKvQuant3);
  mla.mla_kv_lora_rank = 512;
  mla.mla_rope_dim = 64;
  EXPECT_EQ(KvLayout::Create(mla).status().code(), StatusCode::kUnimplemented);
}

// Per layer, one stream of n = 1024 values (8 heads x 128), G = 32, R = 128, 2 bits:
//   key row (32 tokens): codes 1024 * 32 * 2 / 8 = 8192 B, scale + zero f16 per channel 4096 B
//   value per token: codes 256 B, 32 groups x 4 B = 128 B; residual token: 2048 B (f16)
TEST(KvLayoutTest, Kivi2AsymptoticRate) {
  KvLayoutConfig cfg = Llama70b(KvDtype::kKivi2);
  cfg.block_tokens = 32;
  KvLayout l = MakeLayout(cfg);
  const KvStream& k = l.streams()[0];
  const KvStream& v = l.streams()[1];
  EXPECT_EQ(k.row_tokens, 32);
  EXPECT_EQ(k.row_code_bytes, 8192);
  EXPECT_EQ(k.row_scale_bytes, 4096);
  EXPECT_EQ(k.BytesPerToken(), 384);
  EXPECT_EQ(v.row_tokens, 1);
  EXPECT_EQ(v.row_code_bytes, 256);
  EXPECT_EQ(v.row_scale_bytes, 128);
  EXPECT_EQ(l.BytesPerTokenPerLayer(), 768);
  EXPECT_DOUBLE_EQ(l.BitsPerValue(), 3.0);  // 2 bits + 32 bits of (scale, zero) per 32 values
  KvLayoutConfig cfg4 = cfg;
  cfg4.dtype = KvDtype::kKivi4;
  EXPECT_DOUBLE_EQ(MakeLayout(cfg4).BitsPerValue(), 5.0);
}

TEST(KvLayoutTest, TurboCountsCodesSignsAndNorms) {
  // 8 KV heads of 128: turbo4 = 4 bits + one f16 norm per head = 4.125 bits/value; turbo3 3.125.
  KvLayout l4 = MakeLayout(Llama70b(KvDtype::kTurbo4));
  const KvStream& k4 = l4.streams()[0];
  EXPECT_EQ(k4.row_code_bytes, 512);
  EXPECT_EQ(k4.row_scale_bytes, 16);
  EXPECT_DOUBLE_EQ(l4.BitsPerValue(), 4.125);
  EXPECT_DOUBLE_EQ(MakeLayout(Llama70b(KvDtype::kTurbo3)).BitsPerValue(), 3.125);
  // head_dim 64: 4.25 / 3.25 bits per value, as the format promises.
  KvLayoutConfig d64 = Llama70b(KvDtype::kTurbo4);
  d64.head_dim = 64;
  EXPECT_DOUBLE_EQ(MakeLayout(d64).BitsPerValue(), 4.25);
  d64.dtype = KvDtype::kTurbo3;
  EXPECT_DOUBLE_EQ(MakeLayout(d64).BitsPerValue(), 3.25);
  // QJL keys: 3-bit codes + 1 sign bit + two f16 norms per head; values unchanged.
  KvLayoutConfig qjl = Llama70b(KvDtype::kTurbo4);
  qjl.turbo_qjl = true;
  KvLayout lq = MakeLayout(qjl);
  EXPECT_EQ(lq.streams()[0].row_code_bytes, 384 + 128);
  EXPECT_EQ(lq.streams()[0].row_scale_bytes, 32);
  EXPECT_EQ(lq.streams()[1].row_code_bytes, 512);
  EXPECT_EQ(lq.streams()[1].row_scale_bytes, 16);
  EXPECT_EQ(*lq.BytesForTokens(10), 80LL * 10 * (544 + 528));
  EXPECT_EQ(lq.ResidualBytesPerSequence(), 0);  // no state outside the blocks
  // Bit streams pad to whole bytes: 3 heads x 3 values x 3 bits = 27 bits -> 4 bytes.
  KvLayoutConfig odd = Llama70b(KvDtype::kTurbo3);
  odd.num_kv_heads = 3;
  odd.head_dim = 3;
  EXPECT_EQ(MakeLayout(odd).streams()[0].row_code_bytes, 4);
  odd.head_dim = 1;  // the rotated-coordinate density needs d >= 2
  EXPECT_FALSE(KvLayout::Create(odd).ok());
}

TEST(KvLayoutTest, KiviExactBytesIncludeTheResidualWindow) {
  KvLayoutConfig cfg = Llama70b(KvDtype::kKivi2);
  cfg.num_layers = 1;
  cfg.block_tokens = 32;
  KvLayout l = MakeLayout(cfg);
  // Shorter than R: everything is still f16.
  EXPECT_EQ(*l.BytesForTokens(100), 100 * 2048 * 2);
  // T = R: keys quantize all 128 at once (4 groups), values keep the last 128 in f16.
  EXPECT_EQ(*l.BytesForTokens(128), 4 * 12288 + 128 * 2048);
  // T = 1000: keys 896 quantized (28 groups) + 104 f16; values 872 quantized + 128 f16.
  Result<KvBytes> split = l.BytesForTokensSplit(1000);
  ASSERT_TRUE(split.ok());
  EXPECT_EQ(split->code_bytes, 28 * 8192 + 872 * 256);
  EXPECT_EQ(split->scale_bytes, 28 * 4096 + 872 * 128);
  EXPECT_EQ(split->residual_bytes, (104 + 128) * 2048);
  EXPECT_EQ(*l.BytesForTokens(1000), 344064 + 212992 + 334848 + 262144);
  // Far from the window the cost per token tends to the asymptotic rate.
  const int64_t big = 1 << 20;
  const double per_token = static_cast<double>(*l.BytesForTokens(big)) / big;
  EXPECT_NEAR(per_token, 768.0, 1.0);
  EXPECT_EQ(l.ResidualBytesPerSequence(), (127 + 128) * 2048);
}

TEST(KvLayoutTest, KiviValidation) {
  KvLayoutConfig cfg = Llama70b(KvDtype::kKivi4);
  cfg.block_tokens = 16;  // key groups span 32 tokens
  EXPECT_EQ(KvLayout::Create(cfg).status().code(), StatusCode::kInvalidArgument);
  cfg.block_tokens = 64;
  EXPECT_TRUE(KvLayout::Create(cfg).ok());
  cfg.kivi_residual_tokens = 100;  // not a multiple of G
  EXPECT_EQ(KvLayout::Create(cfg).status().code(), StatusCode::kInvalidArgument);
  cfg.kivi_residual_tokens = 128;
  cfg.head_dim = 48;  // value groups of 32 channels would straddle heads
  EXPECT_EQ(KvLayout::Create(cfg).status().code(), StatusCode::kInvalidArgument);
  KvLayoutConfig mla;
  mla.num_layers = 4;
  mla.mla_kv_lora_rank = 512;
  mla.mla_rope_dim = 64;
  mla.dtype = KvDtype::kKivi2;
  mla.block_tokens = 32;
  EXPECT_EQ(KvLayout::Create(mla).status().code(), StatusCode::kUnimplemented);
}

TEST(KvLayoutTest, MlaLatentIsSharedByKAndV) {
  KvLayoutConfig cfg;
  cfg.num_layers = 61;
  cfg.mla_kv_lora_rank = 512;
  cfg.mla_rope_dim = 64;
  cfg.num_kv_heads = 128;  // ignored for MLA
  cfg.head_dim = 128;
  KvLayout l = MakeLayout(cfg);
  EXPECT_TRUE(l.is_mla());
  ASSERT_EQ(l.streams().size(), 1u);
  EXPECT_EQ(l.streams()[0].kind, KvStreamKind::kLatent);
  EXPECT_EQ(l.ValuesPerTokenPerLayer(), 576);
  EXPECT_EQ(l.BytesPerTokenPerLayer(), 1152);
  EXPECT_EQ(l.BytesPerToken(), 61 * 1152);
  cfg.dtype = KvDtype::kQ8_0;  // 576 = 18 blocks of 32
  EXPECT_EQ(MakeLayout(cfg).BytesPerTokenPerLayer(), 18 * 34);
  cfg.dtype = KvDtype::kFp8E4M3;
  EXPECT_EQ(MakeLayout(cfg).FixedBytes(), 61 * 4);  // one latent scale per layer
  cfg.mla_rope_dim = -1;
  EXPECT_EQ(KvLayout::Create(cfg).status().code(), StatusCode::kInvalidArgument);
}

TEST(KvLayoutTest, SeparateValueHeadDim) {
  KvLayoutConfig cfg = Llama70b(KvDtype::kF16);
  cfg.head_dim = 192;
  cfg.v_head_dim = 128;
  KvLayout l = MakeLayout(cfg);
  EXPECT_EQ(l.streams()[0].values_per_token, 8 * 192);
  EXPECT_EQ(l.streams()[1].values_per_token, 8 * 128);
  EXPECT_EQ(l.BytesPerTokenPerLayer(), (8 * 192 + 8 * 128) * 2);
}

TEST(KvLayoutTest, BlockPlacementIsAlignedAndContiguous) {
  for (KvDtype d : {KvDtype::kF16, KvDtype::kQ8_0, KvDtype::kQ4_0, KvDtype::kInt8,
                    KvDtype::kFp8E4M3, KvDtype::kKivi2}) {
    KvLayoutConfig cfg = Llama70b(d);
    cfg.num_layers = 3;
    cfg.block_tokens = 32;
    KvLayout l = MakeLayout(cfg);
    int64_t expect = 0;
    for (int64_t layer = 0; layer < 3; ++layer) {
      for (int64_t s = 0; s < static_cast<int64_t>(l.streams().size()); ++s) {
        for (int64_t row = 0; row < l.RowsPerBlock(s); ++row) {
          const int64_t off = l.OffsetInBlock(layer, s, row);
          EXPECT_EQ(off, expect) << KvDtypeName(d);
          EXPECT_EQ(off % 64, 0) << KvDtypeName(d);
          expect += l.streams()[static_cast<size_t>(s)].row_stride_bytes;
        }
      }
    }
    EXPECT_EQ(expect, l.BlockBytes()) << KvDtypeName(d);
    EXPECT_EQ(l.BlockBytes() % 64, 0);
    EXPECT_EQ(l.LayerSliceBytes() * 3, l.BlockBytes());
  }
}

TEST(KvLayoutTest, BlockBytesAndPadding) {
  // f16 rows are already multiples of 64: no padding.
  KvLayout f16 = MakeLayout(Llama70b(KvDtype::kF16));
  EXPECT_EQ(f16.BlockBytes(), 80 * 16 * 4096);
  EXPECT_EQ(f16.BlockPaddingBytes(), 0);
  // q8_0 with 8 heads x 128: 32 blocks x 34 = 1088 bytes = 17 x 64, already aligned.
  KvLayoutConfig cfg = Llama70b(KvDtype::kQ8_0);
  cfg.num_layers = 1;
  EXPECT_EQ(MakeLayout(cfg).BlockPaddingBytes(), 0);
  // One KV head of 128 (MQA): 4 x 34 = 136 bytes pad to 192.
  cfg.num_kv_heads = 1;
  KvLayout q8 = MakeLayout(cfg);
  EXPECT_EQ(q8.streams()[0].row_bytes, 136);
  EXPECT_EQ(q8.streams()[0].row_stride_bytes, 192);
  EXPECT_EQ(q8.BlockBytes(), 2 * 16 * 192);
  EXPECT_EQ(q8.BlockPaddingBytes(), 2 * 16 * 56);
  cfg.row_align_bytes = 1;  // no padding at all
  EXPECT_EQ(MakeLayout(cfg).BlockBytes(), 2 * 16 * 136);
  // int8 with f16 scales: 1024 + 16 = 1040 bytes pad to 1088.
  KvLayoutConfig i8 = Llama70b(KvDtype::kInt8);
  i8.num_layers = 1;
  EXPECT_EQ(MakeLayout(i8).streams()[1].row_stride_bytes, 1088);
  // KIVI: one key row of 32 tokens plus 32 value rows.
  KvLayoutConfig kivi = Llama70b(KvDtype::kKivi2);
  kivi.num_layers = 1;
  kivi.block_tokens = 64;
  KvLayout k = MakeLayout(kivi);
  EXPECT_EQ(k.RowsPerBlock(0), 2);
  EXPECT_EQ(k.RowsPerBlock(1), 64);
  EXPECT_EQ(k.BlockBytes(), 2 * 12288 + 64 * 384);
}

TEST(KvLayoutTest, BlocksForBudget) {
  KvLayoutConfig cfg = Llama70b(KvDtype::kF16);
  cfg.num_layers = 32;  // LLaMA-3-8B: 128 KiB per token, 2 MiB per 16-token block
  KvLayout l = MakeLayout(cfg);
  EXPECT_EQ(l.BlockBytes(), 2 << 20);
  EXPECT_EQ(l.BlocksForBudget(kGiB), 512);
  EXPECT_EQ(l.BlocksForBudget(kGiB - 1), 511);
  EXPECT_EQ(l.BlocksForBudget(0), 0);
  EXPECT_EQ(l.BlocksForBudget(-5), 0);
  cfg.dtype = KvDtype::kFp8E4M3;
  KvLayout fp8 = MakeLayout(cfg);
  EXPECT_EQ(fp8.BlocksForBudget(kGiB), (kGiB - 256) / (1 << 20));  // scales come off first
  EXPECT_EQ(fp8.BlocksForBudget(256), 0);
}

TEST(KvLayoutTest, RejectsBadShapes) {
  auto code = [](KvLayoutConfig cfg) { return KvLayout::Create(cfg).status().code(); };
  KvLayoutConfig good = Llama70b(KvDtype::kF16);
  KvLayoutConfig c = good;
  c.num_layers = 0;
  EXPECT_EQ(code(c), StatusCode::kInvalidArgument);
  c = good;
  c.num_kv_heads = 0;
  EXPECT_EQ(code(c), StatusCode::kInvalidArgument);
  c = good;
  c.head_dim = -128;
  EXPECT_EQ(code(c), StatusCode::kInvalidArgument);
  c = good;
  c.block_tokens = 0;
  EXPECT_EQ(code(c), StatusCode::kInvalidArgument);
  c = good;
  c.row_align_bytes = 48;
  EXPECT_EQ(code(c), StatusCode::kInvalidArgument);
  c = good;
  c.dtype = KvDtype::kInt8;
  c.int8_scale_bytes = 3;
  EXPECT_EQ(code(c), StatusCode::kInvalidArgument);
  c = good;
  c.num_kv_heads = int64_t{1} << 40;
  c.head_dim = int64_t{1} << 30;
  EXPECT_EQ(code(c), StatusCode::kInvalidArgument);  // overflows int64
}

TEST(KvLayoutTest, BytesForTokensRejectsNegativeAndOverflow) {
  KvLayout l = MakeLayout(Llama70b(KvDtype::kF16));
  EXPECT_EQ(l.BytesForTokens(-1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(l.BytesForTokens(std::numeric_limits<int64_t>::max() / 1000).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_NE(l.Describe().find("f16"), std::string::npos);
}

}  // namespace
}  // namespace kvforge::kvstore
