// Per-token row codecs: llama.cpp blocks bit-exact with the ggml reference (tensor::QuantizeRow),
// hand-computed q8_0 / q4_0 / int8 / KIVI-value rows, blocks that span heads, partial head slices,
// all-zero and outlier-heavy rows, FP8 scales and round-trip error bounds for every dtype.
#include "kvquant/row_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "tensor/dequant.h"
#include "tensor/quantize.h"

namespace kvforge::kvquant {
namespace {

constexpr KvDtype kAll[] = {KvDtype::kF32,     KvDtype::kF16,   KvDtype::kBf16,   KvDtype::kFp8E4M3,
                            KvDtype::kFp8E5M2, KvDtype::kInt8,  KvDtype::kQ8_0,   KvDtype::kQ4_0,
                            KvDtype::kKivi2,   KvDtype::kKivi4, KvDtype::kTurbo3, KvDtype::kTurbo4};

RowCodec Make(KvDtype d, int64_t heads, int64_t dim) {
  auto c = RowCodec::Create(d, heads, dim);
  EXPECT_TRUE(c.ok()) << c.error().ToString();
  return *c;
}

std::vector<float> RoundTrip(const RowCodec& c, const std::vector<float>& x,
                             const float* scales = nullptr) {
  std::vector<uint8_t> buf(static_cast<size_t>(c.row_bytes()));
  c.Encode(x.data(), buf.data(), scales);
  std::vector<float> out(x.size());
  c.Decode(buf.data(), 0, c.values(), out.data(), scales);
  return out;
}

float F16Scale(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return Fp16ToFp32(h);
}

// HeadByteRanges: the ranges of different heads are disjoint and cover the row, and a head's
// bytes depend on that head's values only (re-encoding with another head changed leaves them).
TEST(RowCodecTest, HeadByteRangesIsolateEachHead) {
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (KvDtype d : kAll) {
    for (int64_t dim : {32, 64}) {
      constexpr int64_t kHeads = 3;
      Result<HeadBytes> probe = HeadByteRanges(d, kHeads, dim, 0);
      const bool separable = d != KvDtype::kKivi2 && d != KvDtype::kKivi4 &&
                             d != KvDtype::kTurbo3 && d != KvDtype::kTurbo4;
      ASSERT_EQ(probe.ok(), separable) << KvDtypeName(d);
      if (!separable) continue;
      const RowCodec c = Make(d, kHeads, dim);
      std::vector<int> owner(static_cast<size_t>(c.row_bytes()), -1);
      for (int64_t h = 0; h < kHeads; ++h) {
        const HeadBytes hb = *HeadByteRanges(d, kHeads, dim, h);
        for (int part = 0; part < hb.parts; ++part)
          for (int64_t b = hb.offset[part]; b < hb.offset[part] + hb.bytes[part]; ++b) {
            ASSERT_LT(b, c.row_bytes());
            ASSERT_EQ(owner[static_cast<size_t>(b)], -1) << KvDtypeName(d) << " byte " << b;
            owner[static_cast<size_t>(b)] = static_cast<int>(h);
          }
      }
      for (int o : owner) ASSERT_NE(o, -1) << KvDtypeName(d);
      std::vector<float> x(static_cast<size_t>(kHeads * dim)), y = x;
      for (float& v : x) v = nd(rng);
      y = x;
      for (int64_t j = 0; j < dim; ++j) y[static_cast<size_t>(dim + j)] = 5 * nd(rng);  // head 1
      std::vector<uint8_t> ex(static_cast<size_t>(c.row_bytes())), ey(ex.size());
      c.Encode(x.data(), ex.data());
      c.Encode(y.data(), ey.data());
      for (size_t b = 0; b < ex.size(); ++b)
        if (owner[b] != 1) {
          ASSERT_EQ(ex[b], ey[b]) << KvDtypeName(d) << " byte " << b;
        }
    }
  }
  EXPECT_FALSE(HeadByteRanges(KvDtype::kQ8_0, 4, 16, 0).ok());  // a block spans two heads
  EXPECT_FALSE(HeadByteRanges(KvDtype::kKvQuant3, 2, 64, 0).ok());
  EXPECT_FALSE(HeadByteRanges(KvDtype::kF16, 2, 64, 2).ok());
}

TEST(RowCodecTest, RowBytesIncludeScales) {
  EXPECT_EQ(Make(KvDtype::kF32, 8, 128).row_bytes(), 4096);
  EXPECT_EQ(Make(KvDtype::kBf16, 8, 128).row_bytes(), 2048);
  EXPECT_EQ(Make(KvDtype::kFp8E4M3, 8, 128).row_bytes(), 1024);
  EXPECT_EQ(Make(KvDtype::kInt8, 8, 128).row_bytes(), 1024 + 16);
  EXPECT_EQ(Make(KvDtype::kQ8_0, 8, 128).row_bytes(), 32 * 34);
  EXPECT_EQ(Make(KvDtype::kQ4_0, 8, 128).row_bytes(), 32 * 18);
  EXPECT_EQ(Make(KvDtype::kKivi2, 8, 128).row_bytes(), 256 + 32 * 4);
  EXPECT_EQ(Make(KvDtype::kKivi4, 8, 128).row_bytes(), 512 + 32 * 4);
  // turbo: codes, then one f16 norm per head; QJL keys: (b-1)-bit codes, d sign bits, 2 norms.
  EXPECT_EQ(Make(KvDtype::kTurbo3, 8, 128).row_bytes(), 384 + 8 * 2);
  EXPECT_EQ(Make(KvDtype::kTurbo4, 8, 128).row_bytes(), 512 + 8 * 2);
  EXPECT_EQ(
      RowCodec::Create(KvDtype::kTurbo4, 8, 128, /*key=*/true, /*turbo_qjl=*/true)->row_bytes(),
      384 + 128 + 8 * 4);
  EXPECT_EQ(RowCodec::Create(KvDtype::kTurbo3, 1, 3)->row_bytes(), 2 + 2);  // 9 bits -> 2 bytes
  EXPECT_FALSE(RowCodec::Create(KvDtype::kTurbo3, 4, 1).ok());              // d = 1: no density
}

TEST(RowCodecTest, BlocksMustNotSplitARow) {
  EXPECT_FALSE(RowCodec::Create(KvDtype::kQ8_0, 1, 48).ok());
  EXPECT_FALSE(RowCodec::Create(KvDtype::kQ4_0, 3, 8).ok());
  EXPECT_FALSE(RowCodec::Create(KvDtype::kKivi2, 1, 16).ok());
  EXPECT_TRUE(RowCodec::Create(KvDtype::kInt8, 3, 7).ok());  // per-head scales, any width
  EXPECT_TRUE(RowCodec::Create(KvDtype::kQ8_0, 4, 8).ok());  // one block spans four heads
  EXPECT_FALSE(RowCodec::Create(KvDtype::kF16, 0, 8).ok());
}

TEST(RowCodecTest, LlamaCppBlocksAreBitExactWithGgmlReference) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (KvDtype d : {KvDtype::kQ8_0, KvDtype::kQ4_0}) {
    const auto t = d == KvDtype::kQ8_0 ? tensor::DType::kQ8_0 : tensor::DType::kQ4_0;
    const RowCodec c = Make(d, 4, 64);
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<float> x(256);
      for (auto& v : x) v = nd(rng);
      if (trial == 1) std::fill(x.begin(), x.end(), 0.0f);  // all zero
      if (trial == 2)
        for (auto& v : x) v = -std::fabs(v);  // max is negative
      if (trial == 3) x[5] = 1000.0f;         // outlier
      std::vector<uint8_t> ours(static_cast<size_t>(c.row_bytes())), ref(ours.size());
      c.Encode(x.data(), ours.data());
      ASSERT_TRUE(tensor::QuantizeRow(t, x.data(), ref.data(), 256).ok());
      EXPECT_EQ(ours, ref) << "trial " << trial;
      std::vector<float> a(256), b(256);
      c.Decode(ours.data(), 0, 256, a.data());
      ASSERT_TRUE(tensor::DequantizeRow(t, ref.data(), b.data(), 256).ok());
      EXPECT_EQ(a, b);
    }
  }
}

TEST(RowCodecTest, Q8_0AndQ4_0HandComputed) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(j)] = static_cast<float>(j - 16);
  const RowCodec q8 = Make(KvDtype::kQ8_0, 1, 32);
  std::vector<uint8_t> b(34);
  q8.Encode(x.data(), b.data());
  EXPECT_FLOAT_EQ(F16Scale(b.data()), Fp16ToFp32(Fp32ToFp16(16.0f / 127.0f)));
  EXPECT_EQ(static_cast<int8_t>(b[2 + 0]), -127);  // the extreme value
  EXPECT_EQ(static_cast<int8_t>(b[2 + 16]), 0);
  EXPECT_EQ(static_cast<int8_t>(b[2 + 17]), 8);    // 1 * 127/16 = 7.94
  EXPECT_EQ(static_cast<int8_t>(b[2 + 31]), 119);  // 15 * 127/16 = 119.06
  // q4_0: the value of largest magnitude is -16, d = -16 / -8 = 2, q = min(15, trunc(x/2 + 8.5)).
  const RowCodec q4 = Make(KvDtype::kQ4_0, 1, 32);
  std::vector<uint8_t> c(18);
  q4.Encode(x.data(), c.data());
  EXPECT_FLOAT_EQ(F16Scale(c.data()), 2.0f);
  EXPECT_EQ(c[2 + 0] & 0x0F, 0);  // x = -16 -> code 0 exactly
  EXPECT_EQ(c[2 + 1] & 0x0F, 1);  // x = -15 -> trunc(1.0)
  EXPECT_EQ(c[2 + 2] & 0x0F, 1);  // x = -14 -> trunc(1.5)
  EXPECT_EQ(c[2 + 0] >> 4, 8);    // element 16: x = 0 -> 8
  EXPECT_EQ(c[2 + 15] >> 4, 15);  // element 31: x = 15 -> trunc(16) clamped to 15
  std::vector<float> out(32);
  q4.Decode(c.data(), 0, 32, out.data());
  EXPECT_FLOAT_EQ(out[0], -16.0f);
  EXPECT_FLOAT_EQ(out[31], 14.0f);  // the clamp costs one step on the positive side
}

TEST(RowCodecTest, Int8HandComputedWithPerHeadScales) {
  const RowCodec c = Make(KvDtype::kInt8, 2, 4);
  const std::vector<float> x = {1.0f, -2.0f, 0.5f, 127.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  std::vector<uint8_t> b(static_cast<size_t>(c.row_bytes()));
  ASSERT_EQ(b.size(), 8u + 4u);
  c.Encode(x.data(), b.data());
  EXPECT_EQ(static_cast<int8_t>(b[0]), 1);
  EXPECT_EQ(static_cast<int8_t>(b[1]), -2);
  EXPECT_EQ(static_cast<int8_t>(b[2]), 1);  // 0.5 rounds half away from zero
  EXPECT_EQ(static_cast<int8_t>(b[3]), 127);
  EXPECT_FLOAT_EQ(F16Scale(b.data() + 8), 1.0f);   // head 0: amax 127
  EXPECT_FLOAT_EQ(F16Scale(b.data() + 10), 0.0f);  // head 1: all zero
  std::vector<float> out(8);
  c.Decode(b.data(), 0, 8, out.data());
  EXPECT_FLOAT_EQ(out[2], 1.0f);
  EXPECT_FLOAT_EQ(out[6], 0.0f);
}

TEST(RowCodecTest, KiviValueRowHandComputed) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(j)] = static_cast<float>(j);
  const RowCodec c = Make(KvDtype::kKivi2, 1, 32);
  std::vector<uint8_t> b(static_cast<size_t>(c.row_bytes()));
  ASSERT_EQ(b.size(), 8u + 4u);
  c.Encode(x.data(), b.data());
  const float step = F16Scale(b.data() + 8), zero = F16Scale(b.data() + 10);
  EXPECT_FLOAT_EQ(step, Fp16ToFp32(Fp32ToFp16(31.0f / 3)));  // 10.3359375
  EXPECT_FLOAT_EQ(zero, 0.0f);
  // Codes round(x / 10.336): x = 0..5 -> 0, 6..15 -> 1, 16..25 -> 2, 26..31 -> 3.
  EXPECT_EQ(b[0], 0x00);        // x = 0..3
  EXPECT_EQ(b[1], 0b01010000);  // x = 4, 5 -> 0; 6, 7 -> 1
  EXPECT_EQ(b[7], 0xFF);        // x = 28..31 -> 3
  std::vector<float> out(32);
  c.Decode(b.data(), 0, 32, out.data());
  EXPECT_FLOAT_EQ(out[31], 3 * step);
  EXPECT_FLOAT_EQ(out[10], step);
}

TEST(RowCodecTest, BlocksSpanningHeadsDecodeAnySlice) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  for (KvDtype d : kAll) {
    const RowCodec c = Make(d, 4, 8);  // 32 values: one q8_0 block spans the four heads
    std::vector<float> x(32);
    for (auto& v : x) v = nd(rng);
    const float scales[4] = {0.5f, 1.0f, 2.0f, 4.0f};
    std::vector<uint8_t> b(static_cast<size_t>(c.row_bytes()));
    c.Encode(x.data(), b.data(), scales);
    std::vector<float> all(32), part(8);
    c.Decode(b.data(), 0, 32, all.data(), scales);
    for (int h = 0; h < 4; ++h) {
      c.Decode(b.data(), 8 * h, 8, part.data(), scales);
      for (int i = 0; i < 8; ++i)
        EXPECT_EQ(part[static_cast<size_t>(i)], all[static_cast<size_t>(8 * h + i)]);
    }
  }
}

TEST(RowCodecTest, AllZeroRowsDecodeToZero) {
  for (KvDtype d : kAll) {
    const RowCodec c = Make(d, 2, 64);
    const std::vector<float> x(128, 0.0f);
    for (float v : RoundTrip(c, x)) EXPECT_EQ(v, 0.0f) << KvDtypeName(d);
  }
}

// Round-trip error bounds on Gaussian rows with outliers, per dtype.
TEST(RowCodecTest, RoundTripErrorBounds) {
  std::mt19937 rng(13);
  std::normal_distribution<float> nd;
  for (KvDtype d : kAll) {
    const RowCodec c = Make(d, 2, 64);
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> x(128);
      for (auto& v : x) v = nd(rng);
      if (trial % 2) x[static_cast<size_t>(trial * 5 % 128)] = 60.0f;  // outlier-heavy rows
      // FP8 gets the calibrated per-tensor scale (amax / 200 keeps 60 in range).
      const float s = 60.0f / 200.0f;
      const float scales[2] = {s, s};
      const std::vector<float> y = RoundTrip(c, x, scales);
      for (size_t i = 0; i < x.size(); ++i) {
        // Bound for element i by dtype: the group's step (amax / 127, f16-rounded) etc.
        float bound = 0;
        const size_t g0 = i / 32 * 32, h0 = i / 64 * 64;
        float amax_g = 0, amax_h = 0, mn = x[g0], mx = x[g0];
        for (size_t j = g0; j < g0 + 32; ++j) {
          amax_g = std::max(amax_g, std::fabs(x[j]));
          mn = std::min(mn, x[j]);
          mx = std::max(mx, x[j]);
        }
        for (size_t j = h0; j < h0 + 64; ++j) amax_h = std::max(amax_h, std::fabs(x[j]));
        switch (d) {
          case KvDtype::kF32:
            bound = 0;
            break;
          case KvDtype::kF16:
            bound = std::fabs(x[i]) * 4.9e-4f;
            break;
          case KvDtype::kBf16:
            bound = std::fabs(x[i]) * 3.91e-3f;
            break;
          case KvDtype::kFp8E4M3:
            bound = std::max(std::fabs(x[i]) / 16, s * std::ldexp(1.0f, -10));
            break;
          case KvDtype::kFp8E5M2:
            bound = std::max(std::fabs(x[i]) / 8, s * std::ldexp(1.0f, -17));
            break;
          case KvDtype::kInt8:
            bound = amax_h / 127 * 0.5f * 1.01f + amax_h * 1e-3f;
            break;
          case KvDtype::kQ8_0:
            bound = amax_g / 127 * 0.5f * 1.01f + amax_g * 1e-3f;
            break;
          case KvDtype::kQ4_0:
            bound = amax_g / 8 * 1.01f + amax_g * 1e-3f;
            break;
          case KvDtype::kKivi2:
            bound = (mx - mn) / 3 * 0.5f * 1.01f + (mx - mn) * 2e-3f;
            break;
          case KvDtype::kKivi4:
            bound = (mx - mn) / 15 * 0.5f * 1.01f + (mx - mn) * 2e-3f;
            break;
          case KvDtype::kKvQuant3:  // not a RowCodec dtype (nuq_test.cc)
            break;
          case KvDtype::kTurbo3:
          case KvDtype::kTurbo4: {
            // No per-element bound: the error is spread over the head by the rotation. Each
            // element is within the head's error norm, which is well under half its norm at 3
            // bits (expected ~0.18 ||x||; turbo_test.cc checks the MSE itself).
            float ss = 0;
            for (size_t j = h0; j < h0 + 64; ++j) ss += x[j] * x[j];
            bound = 0.5f * std::sqrt(ss);
            break;
          }
        }
        ASSERT_LE(std::fabs(y[i] - x[i]), bound + 1e-7f)
            << KvDtypeName(d) << " trial " << trial << " i " << i << " x " << x[i];
      }
    }
  }
}

TEST(RowCodecTest, OutliersOnlyCostTheirOwnGroup) {
  // int8 scales per head, q8_0 per 32 values: an outlier in head 0 leaves head 1 exact-ish.
  std::vector<float> x(64, 0.25f);
  x[3] = 1000.0f;
  for (KvDtype d : {KvDtype::kInt8, KvDtype::kQ8_0}) {
    const std::vector<float> y = RoundTrip(Make(d, 2, 32), x);
    EXPECT_GT(std::fabs(y[5] - 0.25f), 0.2f) << KvDtypeName(d);  // crushed next to the outlier
    for (size_t i = 32; i < 64; ++i) EXPECT_NEAR(y[i], 0.25f, 1e-3f) << KvDtypeName(d);
  }
}

TEST(RowCodecTest, Fp8ScaleDividesOnStoreAndMultipliesOnLoad) {
  const RowCodec c = Make(KvDtype::kFp8E4M3, 2, 2);
  const std::vector<float> x = {896.0f, 2.0f, 0.5f, 1000.0f};
  const float scales[2] = {2.0f, 1.0f};  // head 0: 896 / 2 = 448 fits; head 1 saturates
  std::vector<uint8_t> b(4);
  c.Encode(x.data(), b.data(), scales);
  EXPECT_EQ(b[0], 0x7E);
  EXPECT_EQ(b[1], 0x38);  // 2 / 2 = 1.0
  EXPECT_EQ(b[3], 0x7E);  // 1000 saturates at 448
  std::vector<float> y(4);
  c.Decode(b.data(), 0, 4, y.data(), scales);
  EXPECT_FLOAT_EQ(y[0], 896.0f);
  EXPECT_FLOAT_EQ(y[1], 2.0f);
  EXPECT_FLOAT_EQ(y[2], 0.5f);
  EXPECT_FLOAT_EQ(y[3], 448.0f);
}

}  // namespace
}  // namespace kvforge::kvquant
