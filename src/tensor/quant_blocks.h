// quant_blocks.h — bit-exact GGUF block layouts for the quantized weight types.
#pragma once

#include <cstdint>

namespace kvforge::tensor {

inline constexpr int kQK8_0 = 32;
inline constexpr int kQK4_0 = 32;

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

}  // namespace kvforge::tensor
