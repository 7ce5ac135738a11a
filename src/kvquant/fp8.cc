#include "kvquant/fp8.h"

#include <algorithm>
#include <cmath>

namespace kvforge::kvquant {
namespace {

// One mini-float format: `man` mantissa bits, exponent `bias`, largest finite code (no sign).
struct MiniFloat {
  int man;
  int bias;
  uint8_t max_code;
  uint8_t nan_code;
};

constexpr MiniFloat kE4M3{3, 7, 0x7E, 0x7F};
constexpr MiniFloat kE5M2{2, 15, 0x7B, 0x7F};

uint8_t Encode(const MiniFloat& f, float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return static_cast<uint8_t>(sign | f.nan_code);
  const float a = std::fabs(x);
  if (a == 0.0f) return sign;
  if (std::isinf(a)) return static_cast<uint8_t>(sign | f.max_code);
  int e2 = 0;
  std::frexp(a, &e2);  // a = m * 2^e2 with m in [0.5, 1): the unbiased exponent is e2 - 1
  const int min_normal_exp = 1 - f.bias;
  const int exp = std::max(e2 - 1, min_normal_exp);
  // Scaling by a power of two is exact, so nearbyint sees the true quotient (ties to even in the
  // default rounding mode). Below the normal range the quantum is fixed: subnormals.
  const float q = std::nearbyint(std::ldexp(a, f.man - exp));
  int mant = static_cast<int>(q);
  int biased;
  if (e2 - 1 < min_normal_exp) {
    biased = 0;  // subnormal; mant == 2^man rolls over into the smallest normal code below
  } else {
    biased = exp + f.bias;
    mant -= 1 << f.man;          // drop the implicit leading one
    if (mant == (1 << f.man)) {  // rounded up to the next binade
      mant = 0;
      ++biased;
    }
  }
  const int code = (biased << f.man) + mant;
  return static_cast<uint8_t>(sign | (code > f.max_code ? f.max_code : code));
}

float Decode(const MiniFloat& f, uint8_t code) {
  const bool neg = (code & 0x80) != 0;
  const int body = code & 0x7F;
  const int biased = body >> f.man;
  const int mant = body & ((1 << f.man) - 1);
  float v;
  if (body > f.max_code) {
    // Beyond the finite range: E5M2 has inf at 0x7C and NaN above; E4M3FN only NaN.
    v = (f.man == 2 && body == 0x7C) ? INFINITY : NAN;
  } else if (biased == 0) {
    v = std::ldexp(static_cast<float>(mant), 1 - f.bias - f.man);
  } else {
    v = std::ldexp(static_cast<float>((1 << f.man) + mant), biased - f.bias - f.man);
  }
  return neg ? -v : v;
}

}  // namespace

uint8_t FloatToE4M3(float x) { return Encode(kE4M3, x); }
float E4M3ToFloat(uint8_t code) { return Decode(kE4M3, code); }
uint8_t FloatToE5M2(float x) { return Encode(kE5M2, x); }
float E5M2ToFloat(uint8_t code) { return Decode(kE5M2, code); }

}  // namespace kvforge::kvquant
