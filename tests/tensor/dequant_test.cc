// Reference (de)quantizers against hand-computed blocks.
#include "tensor/dequant.h"

#include <gtest/gtest.h>

#include <cstring>

#include "base/fp16.h"
#include "tensor/quant_blocks.h"
#include "tensor/quantize.h"

namespace kvforge::tensor {
namespace {

TEST(DequantTest, Q8_0HandBuiltBlock) {
  BlockQ8_0 b;
  b.d = Fp32ToFp16(0.5f);
  for (int i = 0; i < 32; ++i) b.qs[i] = static_cast<int8_t>(i - 16);
  float out[32];
  ASSERT_TRUE(DequantizeRow(DType::kQ8_0, &b, out, 32).ok());
  EXPECT_FLOAT_EQ(out[0], -8.0f);
  EXPECT_FLOAT_EQ(out[16], 0.0f);
  EXPECT_FLOAT_EQ(out[31], 7.5f);
}

TEST(DequantTest, Q4_0HandBuiltBlock) {
  BlockQ4_0 b;
  b.d = Fp32ToFp16(2.0f);
  for (int i = 0; i < 16; ++i) b.qs[i] = static_cast<uint8_t>((i & 0xF) | ((15 - i) << 4));
  float out[32];
  ASSERT_TRUE(DequantizeRow(DType::kQ4_0, &b, out, 32).ok());
  EXPECT_FLOAT_EQ(out[0], (0 - 8) * 2.0f);    // low nibble of byte 0
  EXPECT_FLOAT_EQ(out[15], (15 - 8) * 2.0f);  // low nibble of byte 15
  EXPECT_FLOAT_EQ(out[16], (15 - 8) * 2.0f);  // high nibble of byte 0
  EXPECT_FLOAT_EQ(out[31], (0 - 8) * 2.0f);   // high nibble of byte 15
}

TEST(DequantTest, F16AndBf16) {
  const uint16_t h[3] = {0x3C00, 0xC000, 0x3555};
  float out[3];
  ASSERT_TRUE(DequantizeRow(DType::kF16, h, out, 3).ok());
  EXPECT_FLOAT_EQ(out[0], 1.0f);
  EXPECT_FLOAT_EQ(out[1], -2.0f);
  EXPECT_FLOAT_EQ(out[2], 0.333251953125f);
  const uint16_t bf[2] = {0x3F80, 0x4049};
  ASSERT_TRUE(DequantizeRow(DType::kBF16, bf, out, 2).ok());
  EXPECT_FLOAT_EQ(out[0], 1.0f);
  EXPECT_FLOAT_EQ(out[1], 3.140625f);
}

TEST(DequantTest, QuantizeRoundTripErrorIsBounded) {
  float x[64];
  for (int i = 0; i < 64; ++i) x[i] = static_cast<float>((i * 37) % 23) - 11.0f;
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kF16, DType::kBF16, DType::kF32}) {
    uint8_t buf[64 * 4];
    float y[64];
    ASSERT_TRUE(QuantizeRow(t, x, buf, 64).ok());
    ASSERT_TRUE(DequantizeRow(t, buf, y, 64).ok());
    // Max error: half a step (amax/127) for q8_0; for q4_0 one step (amax/8), because its codes
    // span [-8d, 7d] and the side opposite the signed maximum clips by up to a step (as ggml).
    const float tol = t == DType::kQ8_0   ? 11.0f / 127 * 0.51f
                      : t == DType::kQ4_0 ? 11.0f / 8 * 1.01f
                                          : 0.05f;
    for (int i = 0; i < 64; ++i) EXPECT_NEAR(y[i], x[i], tol) << DTypeName(t) << " " << i;
  }
}

TEST(DequantTest, BadLengthsAndUnsupportedTypes) {
  float out[33];
  uint8_t in[64] = {};
  EXPECT_EQ(DequantizeRow(DType::kQ8_0, in, out, 33).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DequantizeRow(DType::kQ2_K, in, out, 256).code(), StatusCode::kUnimplemented);
  EXPECT_EQ(RowBytes(DType::kQ4_K, 256), 144u);
  EXPECT_FALSE(RowBytes(DType::kQ4_K, 100).has_value());
  EXPECT_EQ(DTypeFromName("q8_0"), DType::kQ8_0);
  EXPECT_FALSE(GetDTypeTraits(1000).has_value());
}

}  // namespace
}  // namespace kvforge::tensor
