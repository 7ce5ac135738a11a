#include "base/fp16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kvforge {
namespace {

TEST(Fp16Test, KnownValues) {
  EXPECT_EQ(Fp32ToFp16(0.0f), 0x0000);
  EXPECT_EQ(Fp32ToFp16(-0.0f), 0x8000);
  EXPECT_EQ(Fp32ToFp16(1.0f), 0x3C00);
  EXPECT_EQ(Fp32ToFp16(-2.0f), 0xC000);
  EXPECT_EQ(Fp32ToFp16(65504.0f), 0x7BFF);
  EXPECT_EQ(Fp32ToFp16(65520.0f), 0x7C00);               // rounds to infinity
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -25)), 0x0000);  // tie rounds to even (zero)
  EXPECT_EQ(Fp32ToFp16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_TRUE(std::isnan(Fp16ToFp32(Fp32ToFp16(std::nanf("")))));
  EXPECT_EQ(Fp16ToFp32(0x3555), 0.333251953125f);
}

TEST(Fp16Test, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t x = static_cast<uint16_t>(h);
    const float f = Fp16ToFp32(x);
    if (std::isnan(f)) continue;
    EXPECT_EQ(Fp32ToFp16(f), x) << "h=" << h;
  }
}

TEST(Fp16Test, RoundToNearestEven) {
  // 1 + 2^-11 is exactly between 1 and the next half (1 + 2^-10): ties to even -> 1.
  EXPECT_EQ(Fp32ToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  // 1 + 3*2^-11 is between 1+2^-10 (odd) and 1+2^-9 (even) -> rounds up to even.
  EXPECT_EQ(Fp32ToFp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
}

TEST(Bf16Test, RoundTripAndRounding) {
  EXPECT_EQ(Fp32ToBf16(1.0f), 0x3F80);
  EXPECT_EQ(Bf16ToFp32(0x3F80), 1.0f);
  EXPECT_EQ(Fp32ToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);  // tie -> even
  EXPECT_TRUE(std::isnan(Bf16ToFp32(Fp32ToBf16(std::nanf("")))));
}

}  // namespace
}  // namespace kvforge
