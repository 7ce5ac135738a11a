// kvquant/fp8.h — scalar reference casts between float and the two OCP FP8 formats.
//
//   E4M3FN: 1 sign, 4 exponent (bias 7), 3 mantissa bits; max finite ±448, subnormals down to
//           2^-9, no infinities, 0x7F / 0xFF are NaN.
//   E5M2:   1 sign, 5 exponent (bias 15), 2 mantissa bits; max finite ±57344, subnormals down to
//           2^-16, 0x7C is +inf, 0x7D..0x7F NaN (the top byte of an IEEE half).
// Encoding rounds to nearest, ties to even, and SATURATES: anything beyond the largest finite value
// (infinities included) becomes ±max, because a KV cache has no use for inf and E4M3FN cannot hold
// it (vLLM clamps before its cast too). NaN stays NaN. -0 keeps its sign.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

namespace kvforge::kvquant {

inline constexpr float kE4M3Max = 448.0f;
inline constexpr float kE5M2Max = 57344.0f;

uint8_t FloatToE4M3(float x);
float E4M3ToFloat(uint8_t code);
uint8_t FloatToE5M2(float x);
float E5M2ToFloat(uint8_t code);

}  // namespace kvforge::kvquant
