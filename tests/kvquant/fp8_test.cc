// FP8 casts against hand-computed codes: exact values, ties to even, subnormals, saturation,
// signed zero, NaN, and an exhaustive decode -> encode round trip of every finite code.
#include "kvquant/fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "base/fp16.h"

namespace kvforge::kvquant {
namespace {

TEST(Fp8Test, E4M3HandComputedCodes) {
  EXPECT_EQ(FloatToE4M3(0.0f), 0x00);
  EXPECT_EQ(FloatToE4M3(-0.0f), 0x80);
  EXPECT_EQ(FloatToE4M3(1.0f), 0x38);    // unbiased exponent 0 + bias 7 = 0111, mantissa 000
  EXPECT_EQ(FloatToE4M3(-2.0f), 0xC0);   // sign, exponent 8
  EXPECT_EQ(FloatToE4M3(1.125f), 0x39);  // one mantissa step
  EXPECT_EQ(FloatToE4M3(448.0f), 0x7E);  // largest finite
  EXPECT_EQ(FloatToE4M3(-448.0f), 0xFE);
  EXPECT_FLOAT_EQ(E4M3ToFloat(0x7E), 448.0f);
  EXPECT_FLOAT_EQ(E4M3ToFloat(0x38), 1.0f);
  EXPECT_FLOAT_EQ(E4M3ToFloat(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_FLOAT_EQ(E4M3ToFloat(0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_FLOAT_EQ(E4M3ToFloat(0x08), std::ldexp(1.0f, -6));  // smallest normal
}

TEST(Fp8Test, E4M3RoundsHalfToEven) {
  EXPECT_EQ(FloatToE4M3(1.0625f), 0x38);  // halfway 1.0 / 1.125 -> even mantissa 0
  EXPECT_EQ(FloatToE4M3(1.1875f), 0x3A);  // halfway 1.125 / 1.25 -> even mantissa 2
  EXPECT_EQ(FloatToE4M3(1.07f), 0x39);    // above halfway
  EXPECT_EQ(FloatToE4M3(1.9999f), 0x40);  // rounds into the next binade: 2.0
}

TEST(Fp8Test, E4M3SubnormalsAndUnderflow) {
  const float tiny = std::ldexp(1.0f, -9);
  EXPECT_EQ(FloatToE4M3(tiny), 0x01);
  EXPECT_EQ(FloatToE4M3(3 * tiny), 0x03);
  EXPECT_EQ(FloatToE4M3(0.5f * tiny), 0x00);   // tie with 0 -> even (0)
  EXPECT_EQ(FloatToE4M3(0.75f * tiny), 0x01);  // above the tie
  EXPECT_EQ(FloatToE4M3(1.5f * tiny), 0x02);   // tie 1 / 2 -> even
  EXPECT_EQ(FloatToE4M3(-2.5f * tiny), 0x82);  // tie 2 / 3 -> even, sign kept
  EXPECT_EQ(FloatToE4M3(7.5f * tiny), 0x08);   // rounds up into the smallest normal
  EXPECT_EQ(FloatToE4M3(1e-30f), 0x00);
}

TEST(Fp8Test, E4M3Saturates) {
  EXPECT_EQ(FloatToE4M3(464.0f), 0x7E);  // halfway 448 / 480: the even one is 448
  EXPECT_EQ(FloatToE4M3(472.0f), 0x7E);  // nearest is 480, whose code is NaN: saturate
  EXPECT_EQ(FloatToE4M3(500.0f), 0x7E);
  EXPECT_EQ(FloatToE4M3(1e30f), 0x7E);
  EXPECT_EQ(FloatToE4M3(INFINITY), 0x7E);
  EXPECT_EQ(FloatToE4M3(-INFINITY), 0xFE);
  EXPECT_TRUE(std::isnan(E4M3ToFloat(FloatToE4M3(NAN))));
  EXPECT_TRUE(std::isnan(E4M3ToFloat(0x7F)));
  EXPECT_TRUE(std::isnan(E4M3ToFloat(0xFF)));
}

TEST(Fp8Test, E5M2HandComputedCodesAndSaturation) {
  EXPECT_EQ(FloatToE5M2(1.0f), 0x3C);  // same bits as the top byte of f16 1.0 (0x3C00)
  EXPECT_EQ(FloatToE5M2(-1.5f), 0xBE);
  EXPECT_EQ(FloatToE5M2(57344.0f), 0x7B);
  EXPECT_EQ(FloatToE5M2(60000.0f), 0x7B);
  EXPECT_EQ(FloatToE5M2(INFINITY), 0x7B);
  EXPECT_EQ(FloatToE5M2(-1e9f), 0xFB);
  EXPECT_EQ(FloatToE5M2(std::ldexp(1.0f, -16)), 0x01);  // smallest subnormal
  EXPECT_EQ(FloatToE5M2(std::ldexp(1.0f, -17)), 0x00);  // tie with zero -> even
  EXPECT_EQ(FloatToE5M2(1.125f), 0x3C);                 // tie 1.0 / 1.25 -> even
  EXPECT_EQ(FloatToE5M2(1.375f), 0x3E);                 // tie 1.25 / 1.5 -> even
  EXPECT_TRUE(std::isinf(E5M2ToFloat(0x7C)));
  EXPECT_TRUE(std::isnan(E5M2ToFloat(0x7D)));
}

TEST(Fp8Test, EveryFiniteCodeRoundTripsAndE5M2IsTheTopByteOfAHalf) {
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<uint8_t>(c);
    const float a = E4M3ToFloat(code);
    if (!std::isnan(a)) {
      EXPECT_EQ(FloatToE4M3(a), code) << c;
    }
    const float b = E5M2ToFloat(code);
    const float h = Fp16ToFp32(static_cast<uint16_t>(code << 8));
    if (std::isnan(h)) {
      EXPECT_TRUE(std::isnan(b)) << c;
    } else {
      EXPECT_EQ(b, h) << c;
      if (!std::isinf(b)) {
        EXPECT_EQ(FloatToE5M2(b), code) << c;
      }
    }
  }
}

TEST(Fp8Test, RelativeErrorIsHalfAnUlpInTheNormalRange) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> e4(-6, 7), e5(-14, 14);
  for (int i = 0; i < 20000; ++i) {
    const float x = std::ldexp(mant(rng), e4(rng)) * (i % 2 ? -1.0f : 1.0f);
    EXPECT_LE(std::fabs(E4M3ToFloat(FloatToE4M3(x)) - x), std::fabs(x) / 16 * 1.0001f) << x;
    const float y = std::ldexp(mant(rng), e5(rng));
    EXPECT_LE(std::fabs(E5M2ToFloat(FloatToE5M2(y)) - y), y / 8 * 1.0001f) << y;
  }
}

}  // namespace
}  // namespace kvforge::kvquant
