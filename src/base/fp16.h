// fp16.h — scalar IEEE half and bfloat16 conversions (bit-exact, round-to-nearest-even).
// Header-only and branch-light; SIMD variants live in kernels/.
#pragma once
// Functions here are `static inline` on purpose: the AVX2 translation unit includes this header,
// and internal linkage keeps its ISA-specific copies from being merged into generic code.

#include <cstdint>
#include <cstring>

namespace kvforge {

static inline float Fp32FromBits(uint32_t w) {
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}
static inline uint32_t Fp32ToBits(float f) {
  uint32_t w;
  std::memcpy(&w, &f, 4);
  return w;
}

// IEEE binary16 -> binary32, exact for all inputs (incl. subnormals, inf, NaN).
static inline float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      mant &= 0x3FF;
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | (mant << 13);
    }
  } else if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else {
    bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
  }
  return Fp32FromBits(bits);
}

// binary32 -> binary16 with round-to-nearest-even; overflow goes to inf, NaN stays NaN.
static inline uint16_t Fp32ToFp16(float f) {
  const uint32_t x = Fp32ToBits(f);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t absx = x & 0x7FFFFFFF;
  if (absx >= 0x7F800000) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7C00 | (absx > 0x7F800000 ? 0x200 : 0));
  }
  if (absx >= 0x477FF000) return static_cast<uint16_t>(sign | 0x7C00);  // rounds to inf
  if (absx < 0x38800000) {                                      // result is subnormal or zero
    if (absx < 0x33000000) return static_cast<uint16_t>(sign);  // < half of min subnormal
    const uint32_t e = absx >> 23;
    const uint32_t m = (absx & 0x7FFFFF) | 0x800000;
    const uint32_t shift = 126 - e;  // 14 - (e - 127) + 10 - 23 + ... => total right shift
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = ((absx >> 13) - (112u << 10));
  const uint32_t rem = absx & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) ++r;
  return static_cast<uint16_t>(sign | r);
}

static inline float Bf16ToFp32(uint16_t b) { return Fp32FromBits(static_cast<uint32_t>(b) << 16); }

static inline uint16_t Fp32ToBf16(float f) {
  uint32_t x = Fp32ToBits(f);
  if ((x & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7FFF + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace kvforge
