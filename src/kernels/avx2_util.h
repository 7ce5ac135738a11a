// avx2_util.h — small AVX2/FMA helpers shared by the AVX2 translation units. Include ONLY from
// files compiled with -mavx2 -mfma -mf16c; everything is static inline so no ISA-specific copy
// leaks into generic code.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace kvforge::kernels::internal {

// Expands 32 bits to 32 bytes: byte i is 0x10 when bit i is set (the 5th bit of q5 codes).
static inline __m256i HighBitBytes(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                           2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// Low nibbles of 16 packed bytes are codes 0..15, high nibbles codes 16..31.
static inline __m256i Nibbles32(const uint8_t* qs) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i bytes =
      _mm256_insertf128_si256(_mm256_castsi128_si256(packed), _mm_srli_epi16(packed, 4), 1);
  return _mm256_and_si256(bytes, _mm256_set1_epi8(0x0F));
}

// An f16 scalar (unaligned).
static inline float LoadHalf(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// 8 values at d of an f32 or f16 row (K/V rows), as floats.
static inline __m256 LoadKv8(const uint8_t* row, int64_t d, bool is_f16) {
  if (is_f16)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * d)));
  return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + d);
}

// q4_k / q5_k: the 6-bit scales and mins of a super-block's 8 sub-blocks from its 12 packed bytes
// (tensor::UnpackScaleMinK4's layout), 4 per word: byte j % 4 of sc[j / 4] / mn[j / 4] is
// sub-block j's. Scales/mins 0-3 are the low 6 bits of words 0 and 1; 4-7 take their low 4 bits
// from the nibbles of word 2 and their top 2 bits from the top bits of words 0 / 1.
struct ScaleMinK4 {
  uint32_t sc[2], mn[2];
};
static inline ScaleMinK4 UnpackScaleMinK4Words(const uint8_t* packed) {
  uint32_t w[3];
  std::memcpy(w, packed, 12);
  return {{w[0] & 0x3F3F3F3F, (w[2] & 0x0F0F0F0F) | ((w[0] >> 2) & 0x30303030)},
          {w[1] & 0x3F3F3F3F, ((w[2] >> 4) & 0x0F0F0F0F) | ((w[1] >> 2) & 0x30303030)}};
}

// q4_k / q5_k super-block wb: the 32 unsigned codes of sub-block j as bytes, into q[8].
template <bool kQ5>
static inline void Q45KCodes(const uint8_t* wb, __m256i q[8]) {
  constexpr int kQsOffset = kQ5 ? 48 : 16;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int g = 0; g < 4; ++g) {
    const __m256i raw =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + kQsOffset + 32 * g));
    q[2 * g] = _mm256_and_si256(raw, low4);
    q[2 * g + 1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
  }
  if constexpr (kQ5) {
    // Bit j of qh[i] is the 5th bit of value i of sub-block j: shift it to bit 0 of each byte
    // (16-bit shifts; the mask drops what crosses bytes), then up to bit 4.
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + 16));
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    for (int j = 0; j < 8; ++j)
      q[j] = _mm256_or_si256(
          q[j], _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(qh, j), 4), bit4));
  }
}

// q6_k super-block wb: its 256 unsigned 6-bit codes (value code - 32) as 8 chunks of 32 bytes,
// chunk c = values 32c .. 32c + 31 (groups 2c and 2c + 1 of 16, in the low and high lanes).
static inline void Q6KCodes(const uint8_t* wb, __m256i q[8]) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i hi2 = _mm256_set1_epi8(0x30);
  for (int h = 0; h < 2; ++h) {
    const __m256i la = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + 64 * h));
    const __m256i lb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + 64 * h + 32));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + 128 + 32 * h));
    // High bits 2k..2k+1 of qh moved to bits 4..5 (16-bit shifts; the mask keeps each byte's
    // own bits).
    q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(la, low4),
                                   _mm256_and_si256(_mm256_slli_epi16(qh, 4), hi2));
    q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(lb, low4),
                                   _mm256_and_si256(_mm256_slli_epi16(qh, 2), hi2));
    q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(la, 4), low4),
                                   _mm256_and_si256(qh, hi2));
    q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lb, 4), low4),
                                   _mm256_and_si256(_mm256_srli_epi16(qh, 2), hi2));
  }
}

static inline float HSum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  __m128 sh = _mm_movehdup_ps(lo);
  lo = _mm_add_ps(lo, sh);
  sh = _mm_movehl_ps(sh, lo);
  lo = _mm_add_ss(lo, sh);
  return _mm_cvtss_f32(lo);
}

// exp(x) for 8 lanes, relative error ~2e-7 over the float range (Cephes-style polynomial).
static inline __m256 Exp256(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.3762626647949f);
  const __m256 lo = _mm256_set1_ps(-87.3365478515625f);
  x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  __m256 fx = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f));
  fx = _mm256_floor_ps(fx);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
  __m256 y = _mm256_set1_ps(1.9875691500E-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507E-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073E-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894E-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459E-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201E-1f));
  const __m256 x2 = _mm256_mul_ps(x, x);
  y = _mm256_fmadd_ps(y, x2, _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
  __m256i n = _mm256_cvttps_epi32(fx);
  n = _mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(n));
}

static inline void SoftmaxAvx2(float* s, int64_t n) {
  float mx = s[0];
  for (int64_t p = 1; p < n; ++p) mx = s[p] > mx ? s[p] : mx;
  const __m256 vmx = _mm256_set1_ps(mx);
  __m256 vsum = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 8 <= n; p += 8) {
    const __m256 e = Exp256(_mm256_sub_ps(_mm256_loadu_ps(s + p), vmx));
    _mm256_storeu_ps(s + p, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  double sum = HSum(vsum);
  for (; p < n; ++p) {
    s[p] = std::exp(s[p] - mx);
    sum += s[p];
  }
  const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / sum));
  p = 0;
  for (; p + 8 <= n; p += 8) _mm256_storeu_ps(s + p, _mm256_mul_ps(_mm256_loadu_ps(s + p), inv));
  const float finv = static_cast<float>(1.0 / sum);
  for (; p < n; ++p) s[p] *= finv;
}

}  // namespace kvforge::kernels::internal
