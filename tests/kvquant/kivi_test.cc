// KIVI: bit packing order, per-channel key groups (full, partial, constant and outlier channels)
// against hand-computed statistics, and the round-trip bound s / 2.
#include "kvquant/kivi.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/fp16.h"

namespace kvforge::kvquant {
namespace {

float F16At(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return Fp16ToFp32(h);
}

TEST(KiviTest, CodesPackLittleEndFirst) {
  const uint8_t two[8] = {1, 2, 3, 0, 3, 3, 0, 1};
  uint8_t out[2];
  PackCodes(two, 8, 2, out);
  EXPECT_EQ(out[0], 1 | 2 << 2 | 3 << 4);  // 0x39
  EXPECT_EQ(out[1], 3 | 3 << 2 | 1 << 6);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(UnpackCode(out, i, 2), two[i]);
  const uint8_t four[3] = {0xA, 0x5, 0xF};
  uint8_t o4[2];
  PackCodes(four, 3, 4, o4);
  EXPECT_EQ(o4[0], 0x5A);
  EXPECT_EQ(o4[1], 0x0F);  // partial byte: the unused high bits stay 0
}

TEST(KiviTest, GroupQuantizerHandComputed) {
  // Four values, 2 bits: mn = -1, s = (2 - -1) / 3 = 1; codes round(x + 1).
  const float x[4] = {-1.0f, 0.4f, 0.6f, 2.0f};
  uint8_t codes[4];
  uint16_t step, zero;
  KiviQuantizeGroup(x, 4, 1, 2, codes, &step, &zero);
  EXPECT_EQ(Fp16ToFp32(step), 1.0f);
  EXPECT_EQ(Fp16ToFp32(zero), -1.0f);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 1);  // 1.4 -> 1
  EXPECT_EQ(codes[2], 2);  // 1.6 -> 2
  EXPECT_EQ(codes[3], 3);
  // A constant group has no range: code 0, decodes to mn.
  const float c[3] = {0.7f, 0.7f, 0.7f};
  KiviQuantizeGroup(c, 3, 1, 4, codes, &step, &zero);
  EXPECT_EQ(Fp16ToFp32(step), 0.0f);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(Fp16ToFp32(zero), Fp16ToFp32(Fp32ToFp16(0.7f)));
}

TEST(KiviTest, KeyGroupsArePerChannelOverTokens) {
  // 32 tokens x 3 channels: channel c of token t is (c + 1) * t, so channel c's range is
  // [0, 31 (c + 1)] and its step 31 (c + 1) / 3 (2 bits).
  const int64_t values = 3;
  std::vector<float> k(32 * values);
  for (int t = 0; t < 32; ++t)
    for (int c = 0; c < values; ++c)
      k[static_cast<size_t>(t * values + c)] = static_cast<float>((c + 1) * t);
  std::vector<uint8_t> row(static_cast<size_t>(KiviKeyGroupBytes(values, 2)));
  ASSERT_EQ(row.size(), 3u * 8u + 3u * 4u);
  KiviEncodeKeyGroup(k.data(), 32, values, values, 2, row.data());
  for (int c = 0; c < values; ++c) {
    EXPECT_FLOAT_EQ(F16At(row.data() + 24 + 4 * c), Fp16ToFp32(Fp32ToFp16(31.0f * (c + 1) / 3)));
    EXPECT_FLOAT_EQ(F16At(row.data() + 24 + 4 * c + 2), 0.0f);
  }
  float out[3];
  KiviDecodeKeyToken(row.data(), 31, values, 2, 0, 3, out);  // the max of every channel: code 3
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(out[c], 31.0f * (c + 1), 0.02f * (c + 1));
  KiviDecodeKeyToken(row.data(), 0, values, 2, 1, 2, out);  // channels 1..2 of token 0
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
}

TEST(KiviTest, PartialGroupUsesOnlyTheTokensGiven) {
  const int64_t values = 2;
  std::vector<float> k(5 * values);
  for (int t = 0; t < 5; ++t) {
    k[static_cast<size_t>(2 * t)] = static_cast<float>(t);       // 0..4
    k[static_cast<size_t>(2 * t + 1)] = -static_cast<float>(t);  // 0..-4
  }
  std::vector<uint8_t> row(static_cast<size_t>(KiviKeyGroupBytes(values, 4)));
  std::memset(row.data(), 0xAB, row.size());
  KiviEncodeKeyGroup(k.data(), 5, values, values, 4, row.data());
  EXPECT_FLOAT_EQ(F16At(row.data() + 32 + 0), Fp16ToFp32(Fp32ToFp16(4.0f / 15)));
  EXPECT_FLOAT_EQ(F16At(row.data() + 32 + 2), 0.0f);
  EXPECT_FLOAT_EQ(F16At(row.data() + 32 + 6), -4.0f);
  for (int t = 5; t < 32; ++t) EXPECT_EQ(UnpackCode(row.data(), t, 4), 0) << t;  // unused: 0
  float out[2];
  for (int t = 0; t < 5; ++t) {
    KiviDecodeKeyToken(row.data(), t, values, 4, 0, 2, out);
    EXPECT_NEAR(out[0], t, 0.14f);
    EXPECT_NEAR(out[1], -t, 0.14f);
  }
}

TEST(KiviTest, OutlierChannelDoesNotHurtOtherChannels) {
  const int64_t values = 4;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  std::vector<float> k(32 * values);
  for (auto& v : k) v = nd(rng);
  for (int t = 0; t < 32; ++t) k[static_cast<size_t>(t * values + 2)] *= 500.0f;  // channel 2
  for (int bits : {2, 4}) {
    std::vector<uint8_t> row(static_cast<size_t>(KiviKeyGroupBytes(values, bits)));
    KiviEncodeKeyGroup(k.data(), 32, values, values, bits, row.data());
    for (int c = 0; c < values; ++c) {
      float mn = 1e30f, mx = -1e30f;
      for (int t = 0; t < 32; ++t) {
        mn = std::min(mn, k[static_cast<size_t>(t * values + c)]);
        mx = std::max(mx, k[static_cast<size_t>(t * values + c)]);
      }
      const float bound = (mx - mn) / ((1 << bits) - 1) * 0.5f * 1.01f + (mx - mn) * 2e-3f;
      for (int t = 0; t < 32; ++t) {
        float out;
        KiviDecodeKeyToken(row.data(), t, values, bits, c, 1, &out);
        EXPECT_LE(std::fabs(out - k[static_cast<size_t>(t * values + c)]), bound) << c;
      }
    }
  }
}

}  // namespace
}  // namespace kvforge::kvquant
