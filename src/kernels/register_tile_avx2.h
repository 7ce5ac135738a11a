// register_tile_avx2.h — the 6x16 FMA register tile shared by the packed GEMM (gemm_avx2.cc) and
// prefill attention (attention_prefill_avx2.cc). Include ONLY from files compiled with -mavx2
// -mfma; everything is static inline / in an anonymous-namespace-like internal scope.
//
//   c[i][j] (+)= sum_k a[i][k] * b[k][j]    i < MR <= 6 rows of a, j < 16
//
// a: MR rows of floats a_row bytes apart (possibly unaligned); b: a micro-panel [kc][16] of
// floats, 32-byte aligned. 12 ymm accumulators, fed per k by two panel loads and MR broadcasts.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace kvforge::kernels::internal {

inline constexpr int kMR = 6;   // rows of a per register tile
inline constexpr int kNR = 16;  // columns per register tile (two ymm)

static inline float LoadF(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

// Transposes an 8x8 block: rows r[0..7] (8 floats each) -> columns stored at dst + i * 16.
static inline void Transpose8x8To(const __m256 r[8], float* dst) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  _mm256_store_ps(dst + 0 * kNR, _mm256_permute2f128_ps(s0, s4, 0x20));
  _mm256_store_ps(dst + 1 * kNR, _mm256_permute2f128_ps(s1, s5, 0x20));
  _mm256_store_ps(dst + 2 * kNR, _mm256_permute2f128_ps(s2, s6, 0x20));
  _mm256_store_ps(dst + 3 * kNR, _mm256_permute2f128_ps(s3, s7, 0x20));
  _mm256_store_ps(dst + 4 * kNR, _mm256_permute2f128_ps(s0, s4, 0x31));
  _mm256_store_ps(dst + 5 * kNR, _mm256_permute2f128_ps(s1, s5, 0x31));
  _mm256_store_ps(dst + 6 * kNR, _mm256_permute2f128_ps(s2, s6, 0x31));
  _mm256_store_ps(dst + 7 * kNR, _mm256_permute2f128_ps(s3, s7, 0x31));
}

// c[MR][nr] (row stride ldc) = (add ? c : 0) + x[MR][kc] . bp[kc][16]^T, x rows x_row bytes
// apart (possibly unaligned), bp a micro-panel. nr < 16 only at the end of a row range.
template <int MR>
static void RegisterTile(const uint8_t* x, size_t x_row, const float* bp, int64_t kc, float* c,
                         int64_t ldc, int64_t nr, bool add) {
  __m256 acc[MR][2];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(bp + k * kNR);
    const __m256 b1 = _mm256_load_ps(bp + k * kNR + 8);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const __m256 a = _mm256_set1_ps(LoadF(x + i * x_row + 4 * k));
      acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
    }
  }
  if (nr == kNR) {
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      float* ci = c + i * ldc;
      if (add) {
        acc[i][0] = _mm256_add_ps(acc[i][0], _mm256_loadu_ps(ci));
        acc[i][1] = _mm256_add_ps(acc[i][1], _mm256_loadu_ps(ci + 8));
      }
      _mm256_storeu_ps(ci, acc[i][0]);
      _mm256_storeu_ps(ci + 8, acc[i][1]);
    }
    return;
  }
  alignas(32) float tile[kNR];
  for (int i = 0; i < MR; ++i) {
    _mm256_store_ps(tile, acc[i][0]);
    _mm256_store_ps(tile + 8, acc[i][1]);
    float* ci = c + i * ldc;
    for (int64_t j = 0; j < nr; ++j) ci[j] = add ? ci[j] + tile[j] : tile[j];
  }
}

using TileFn = void (*)(const uint8_t*, size_t, const float*, int64_t, float*, int64_t, int64_t,
                        bool);
static constexpr TileFn kTiles[kMR + 1] = {nullptr,         RegisterTile<1>, RegisterTile<2>,
                                           RegisterTile<3>, RegisterTile<4>, RegisterTile<5>,
                                           RegisterTile<6>};

}  // namespace kvforge::kernels::internal
