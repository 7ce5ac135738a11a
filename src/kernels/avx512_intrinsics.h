// avx512_intrinsics.h — <immintrin.h> for the AVX-512 translation units (kernels_avx512.cc,
// gemm_avx512.cc, gemm_avx512_bf16.cc, kernels_avx512_vnni.cc), and the helpers they share;
// include ONLY from files compiled with -mavx512f. The helpers are `static inline`, so each unit
// keeps its own copy and no AVX-512 code becomes a weak symbol another caller could link to.
//
// gcc 12's AVX-512 intrinsics pass _mm512_undefined_ps() as the unused merge source of their
// masked builtins, which -Wuninitialized reports inside the header (GCC PR 105593). The
// diagnostic's location is the header, so ignoring it there leaves the including file checked.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstddef>
#include <cstdint>

namespace kvforge::kernels::internal {

// The sum of 16 lanes, in a fixed order: halves, then quarters, pairs, lanes.
static inline float HSum16(__m512 v) {
  const __m512 halves = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  const __m256 h = _mm512_castps512_ps256(halves);
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  const __m128 p = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(p, _mm_movehdup_ps(p)));
}

// Rows per block of a float-weight GEMM: a block stays in L2 while every token tile passes it,
// 48 rows (f16, cols 8192: 768 KiB), fewer for wider rows, a multiple of the tile's `tile_rows`
// and at least one tile (a 44032-wide f16 down projection: 6 rows, 516 KiB), so that a verify or
// prefill call of a few token tiles reads each weight from memory once, not once per tile.
static inline int64_t L2RowBlock(size_t row_bytes, int64_t tile_rows) {
  const int64_t fit = 768 * 1024 / static_cast<int64_t>(row_bytes);
  return fit >= 48 ? 48 : (fit < tile_rows ? tile_rows : fit / tile_rows * tile_rows);
}

}  // namespace kvforge::kernels::internal
