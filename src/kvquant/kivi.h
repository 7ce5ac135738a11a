// kvquant/kivi.h — KIVI (arXiv 2402.02750) asymmetric min-max group quantization.
//
// A group of values x_1..x_n gets an f16 zero point mn = min x and an f16 step
// s = (max x - min x) / (2^b - 1); each value becomes the b-bit code
// q = clamp(round_half_even((x - mn) / s), 0, 2^b - 1) and decodes as q * s + mn. The codes are
// computed against the f16-ROUNDED s and mn, the values decoding will use, so the round trip
// error is at most s / 2 plus f16 rounding of s and mn. A group whose values are all equal (s = 0)
// stores code 0 and decodes to mn.
// Codes are packed as a little-endian bit stream: code i occupies bits [i*b, i*b + b) of the
// bytes, so 2-bit codes i = 0..3 fill byte 0 from its low bits up (KIVI packs 16 two-bit or 8
// four-bit codes per int32, first code in the lowest bits; on little-endian bytes this is the
// same stream).
//
// Keys are grouped PER CHANNEL over kKiviGroup consecutive tokens: one "key group row" holds
// kKiviGroup tokens of every channel of a token row (all KV heads),
//   [values][kKiviGroup * b / 8 bytes of codes]  then  [values][f16 s, f16 mn]
// Values are grouped PER TOKEN over kKiviGroup consecutive channels; their row codec is in
// row_codec.h (dtype kivi2 / kivi4).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

namespace kvforge::kvquant {

inline constexpr int64_t kKiviGroup = 32;

// Quantizes n values read with a stride of `stride` floats into codes[0..n) (one code per byte,
// unpacked) and returns the f16 bits of the step and the zero point.
void KiviQuantizeGroup(const float* x, int64_t n, int64_t stride, int bits, uint8_t* codes,
                       uint16_t* step_f16, uint16_t* min_f16);

// Bit-stream packing (see above). PackCodes writes ceil(n * bits / 8) bytes.
void PackCodes(const uint8_t* codes, int64_t n, int bits, uint8_t* dst);
inline uint8_t UnpackCode(const uint8_t* src, int64_t i, int bits) {
  const int64_t bit = i * bits;
  return static_cast<uint8_t>((src[bit >> 3] >> (bit & 7)) & ((1 << bits) - 1));
}

// Bytes of one key group row of `values` channels.
int64_t KiviKeyGroupBytes(int64_t values, int bits);
// Encodes the keys of n_tokens tokens (1..kKiviGroup; rows `stride` floats apart, `values`
// channels each) as one group row. With fewer than kKiviGroup tokens (a partial group) the
// statistics cover only the tokens given and the remaining codes are 0.
void KiviEncodeKeyGroup(const float* keys, int64_t n_tokens, int64_t stride, int64_t values,
                        int bits, uint8_t* dst);
// Decodes channels [c0, c0 + count) of token t (0..kKiviGroup-1) of a key group row.
void KiviDecodeKeyToken(const uint8_t* row, int64_t t, int64_t values, int bits, int64_t c0,
                        int64_t count, float* out);

}  // namespace kvforge::kvquant
