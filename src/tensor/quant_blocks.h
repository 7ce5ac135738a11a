// quant_blocks.h — bit-exact GGUF block layouts for the quantized weight types (ggml's
// block_q*_0/1 and the 256-value k-quant super-blocks). Multi-byte fields are little-endian, as
// on disk; f16 fields are stored as raw bits.
#pragma once

#include <cstdint>

namespace kvforge::tensor {

inline constexpr int kQK8_0 = 32;
inline constexpr int kQK4_0 = 32;
inline constexpr int kQK4_1 = 32;
inline constexpr int kQK5_0 = 32;
inline constexpr int kQK5_1 = 32;
inline constexpr int kQK_K = 256;       // k-quant super-block
inline constexpr int kKScaleSize = 12;  // packed 6-bit scales + mins of Q4_K / Q5_K

// 32 weights: x[i] = d * qs[i].  34 bytes.
struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34);

// 32 weights: low nibbles hold x[0..15], high nibbles x[16..31]; x = d * (nibble - 8). 18 bytes.
struct BlockQ4_0 {
  uint16_t d;  // f16 scale
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// 32 weights, nibbles as in Q4_0; x = d * nibble + m. 20 bytes.
struct BlockQ4_1 {
  uint16_t d;  // f16 scale
  uint16_t m;  // f16 minimum
  uint8_t qs[kQK4_1 / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// 32 weights: 5-bit codes; the low 4 bits are nibbles as in Q4_0, bit 4 of code i is bit i of
// the little-endian uint32 qh. x = d * (code - 16). 22 bytes.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK5_0 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

// As Q5_0 with a minimum: x = d * code + m. 24 bytes.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK5_1 / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// 256 weights in 8 sub-blocks of 32, each with a 6-bit scale sc and 6-bit min mn packed in
// `scales` (see UnpackScaleMinK4). x = d * sc * q - dmin * mn with q a 4-bit code. qs holds 4
// groups of 32 bytes; group g's low nibbles are sub-block 2g, its high nibbles sub-block 2g+1.
// 144 bytes.
struct BlockQ4_K {
  uint16_t d;     // f16 super-block scale of the scales
  uint16_t dmin;  // f16 super-block scale of the mins
  uint8_t scales[kKScaleSize];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// As Q4_K with 5-bit codes: bit 4 of the code for value 64g + i (i < 32) is bit 2g of qh[i],
// for value 64g + 32 + i it is bit 2g+1 of qh[i]. 176 bytes.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// 256 weights in 16 groups of 16, each with an int8 scale. x = d * scales[g] * (q - 32) with q a
// 6-bit code. In each half h (128 values), value 128h + 32k + i (k < 4, i < 32) takes its low 4
// bits from ql[64h + 32(k&1) + i] (low nibble for k < 2, high for k >= 2) and its high 2 bits
// from bits 2k..2k+1 of qh[32h + i]. 210 bytes.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// ggml's activation super-block for k-quant dot products: x = d * qs, bsums[g] = sum of the 16
// codes of group g. 292 bytes.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292);

// Sub-block j's 6-bit scale and min from the 12 packed bytes of a Q4_K / Q5_K block: j < 4 keep
// theirs in the low 6 bits of bytes j (scale) and j+4 (min); j >= 4 store their low 4 bits in
// the nibbles of byte j+4 and their top 2 bits in the spare top bits of bytes j-4 and j.
inline void UnpackScaleMinK4(int j, const uint8_t* q, uint8_t* sc, uint8_t* mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
    *mn = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

}  // namespace kvforge::tensor
