// gemm_avx512.cc — the packed GEMM of gemm_avx2.cc (quantized weights, large batches) with an
// AVX-512 register tile. Compiled with -mavx512f; called only from the "avx512" table.
//
//   y[t][r] = sum_k x[t][k] * W[r][k]    t in [0, n_tok) tokens, r in [r0, r1) weight rows
//
// The blocking and the panels are gemm_avx2.cc's (PackQuantPanelAvx2 dequantizes 128 rows x 256
// depth into micro-panels [kc][16]); a micro-panel row of 16 weights is one zmm. The tile is
// 12 tokens x 2 micro-panels: 24 zmm accumulators, per depth step two panel loads and twelve
// broadcasts of x feeding 24 FMAs.
// It calls no inline function of a shared header (no std::min, no AlignedFloats): a copy compiled
// here could be the one the linker keeps for every caller, AVX-512 instructions and all.
#include <cstring>

#include "kernels/avx512_intrinsics.h"
#include "kernels/kernels_common.h"

namespace kvforge::kernels::internal {
namespace {

constexpr int64_t kKC = kPackedDepth;
constexpr int64_t kNC = kPackedRows;
constexpr int64_t kPanel = kPackedPanelRows;  // weight rows per micro-panel = zmm lanes
constexpr int kTileToks = 12;                 // tokens per register tile
constexpr int64_t kMC = 72;                   // tokens per block of x: 72 x 256 x 4 B = 72 KiB
static_assert(kMC % kTileToks == 0);

inline int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }

inline float LoadX(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

// Writes (add ? c + acc : acc) to the first n (<= 16) floats of c.
inline void StoreRow(float* c, __m512 acc, int64_t n, bool add) {
  if (n == kPanel) {
    if (add) acc = _mm512_add_ps(acc, _mm512_loadu_ps(c));
    _mm512_storeu_ps(c, acc);
    return;
  }
  const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
  if (add) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, c));
  _mm512_mask_storeu_ps(c, m, acc);
}

// c[MR][nr] (row stride ldc) = (add ? c : 0) + x[MR][kc] . [bp | bp + 16 kc][kc][16 NP]^T:
// MR tokens (rows of x, x_row bytes apart) against NP micro-panels (nr <= 16 NP weight rows).
template <int MR, int NP>
void Tile(const uint8_t* x, size_t x_row, const float* bp, int64_t kc, float* c, int64_t ldc,
          int64_t nr, bool add) {
  __m512 acc[MR][NP];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p) acc[i][p] = _mm512_setzero_ps();
  const float* bp1 = bp + kPanel * kc;
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_loadu_ps(bp + k * kPanel);
    const __m512 b1 = NP == 2 ? _mm512_loadu_ps(bp1 + k * kPanel) : b0;
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      const __m512 a = _mm512_set1_ps(LoadX(x + i * x_row + 4 * k));
      acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
      if constexpr (NP == 2) acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    StoreRow(c + i * ldc, acc[i][0], Min(kPanel, nr), add);
    if constexpr (NP == 2) StoreRow(c + i * ldc + kPanel, acc[i][1], nr - kPanel, add);
  }
}

using TileFn = void (*)(const uint8_t*, size_t, const float*, int64_t, float*, int64_t, int64_t,
                        bool);

// kTiles[np - 1][mr]: the tile for mr tokens (1..12) and np micro-panels (1..2). (A plain
// array: std::array's inline operator[] would be one of the shared inline functions.)
constexpr TileFn kTiles[2][kTileToks + 1] = {
    {nullptr, Tile<1, 1>, Tile<2, 1>, Tile<3, 1>, Tile<4, 1>, Tile<5, 1>, Tile<6, 1>, Tile<7, 1>,
     Tile<8, 1>, Tile<9, 1>, Tile<10, 1>, Tile<11, 1>, Tile<12, 1>},
    {nullptr, Tile<1, 2>, Tile<2, 2>, Tile<3, 2>, Tile<4, 2>, Tile<5, 2>, Tile<6, 2>, Tile<7, 2>,
     Tile<8, 2>, Tile<9, 2>, Tile<10, 2>, Tile<11, 2>, Tile<12, 2>}};
static_assert(kTileToks == 12, "kTiles lists 12 token counts");

}  // namespace

void PackedGemmAvx512(WType w, const uint8_t* weights, size_t row_bytes, int64_t cols,
                      const uint8_t* x, int64_t n_tok, float* y, int64_t y_stride, int64_t r0,
                      int64_t r1) {
  // The panel [kNC][kKC] and the packing scratch [16][kKC], the thread's, reused across calls.
  float* panel = PackedGemmBuffer();
  float* scratch = panel + kNC * kKC;
  const size_t x_row = static_cast<size_t>(cols) * 4;
  for (int64_t jc = r0; jc < r1; jc += kNC) {
    const int64_t nc = Min(kNC, r1 - jc);
    for (int64_t pc = 0; pc < cols; pc += kKC) {
      const int64_t kc = Min(kKC, cols - pc);
      PackQuantPanelAvx2(w, weights + static_cast<size_t>(jc) * row_bytes, row_bytes, pc, kc, nc,
                         panel, scratch);
      for (int64_t ic = 0; ic < n_tok; ic += kMC) {
        const int64_t mc = Min(kMC, n_tok - ic);
        for (int64_t jr = 0; jr < nc; jr += 2 * kPanel) {
          const int64_t nr = Min(2 * kPanel, nc - jr);
          const TileFn* tiles = kTiles[nr > kPanel ? 1 : 0];
          for (int64_t ir = ic; ir < ic + mc; ir += kTileToks) {
            const int64_t mr = Min(kTileToks, ic + mc - ir);
            tiles[mr](x + static_cast<size_t>(ir) * x_row + 4 * static_cast<size_t>(pc), x_row,
                      panel + jr * kc, kc, y + ir * y_stride + jc + jr, y_stride, nr, pc > 0);
          }
        }
      }
    }
  }
}

}  // namespace kvforge::kernels::internal
