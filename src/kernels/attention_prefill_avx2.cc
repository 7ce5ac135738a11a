// attention_prefill_avx2.cc — causal attention for a chunk of many queries over plain f32 / f16
// K/V rows, as two register-tiled GEMMs per KV head.
//
// Decode reads each K/V row once per query, so attention_avx2.cc streams rows with dot products.
// A prefill chunk has many queries over the same rows: here the rows of one KV head are
// converted once into f32 panels (K transposed, [slots/16][head_dim][16]; V as
// [v_dim/16][slots][16]) and shared by every query of the chunk and of the group, and both
//   scores  S[t][p] = scale * sum_d q[t][d] K[p][d]     (6 queries x 16 slots per tile)
//   outputs O[t][d] = sum_p w[t][p] V[p][d]             (6 queries x 16 dims per tile)
// run the GEMM's 6x16 FMA register tile (register_tile_avx2.h). Query t sees slots
// 0 .. slot0 + t; a tile of queries computes scores up to its last query's slot and each
// earlier query's extra slots get weight 0, exactly as the softmax over its own slots gives.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/avx2_util.h"
#include "kernels/kernels.h"
#include "kernels/kernels_common.h"
#include "kernels/register_tile_avx2.h"

namespace kvforge::kernels::internal {
namespace {

// K panel [ceil(n / 16)][hd][16]: slot p's head kvh at column p % 16 of micro-panel p / 16;
// columns past n are zeros.
void PackKeys(const KvPageView& k, int32_t kvh, int64_t n, int64_t hd, float* kp) {
  const bool f16 = k.dtype == kvquant::KvDtype::kF16;
  const size_t off = static_cast<size_t>(kvh) * k.head_stride;
  for (int64_t p0 = 0; p0 < n; p0 += kNR) {
    float* panel = kp + p0 * hd;  // (p0 / 16) * hd * 16
    for (int half = 0; half < 2; ++half)
      for (int64_t d = 0; d < hd; d += 8) {
        // Slots p0 + 8 half + j (j < 8), dims d .. d + 7, transposed into the panel's columns.
        __m256 r[8];
        for (int j = 0; j < 8; ++j) {
          const int64_t p = p0 + 8 * half + j;
          r[j] = p < n ? LoadKv8(k.Token(p) + off, d, f16) : _mm256_setzero_ps();
        }
        Transpose8x8To(r, panel + d * kNR + 8 * half);
      }
  }
}

// V panels [vd / 16][n][16]: dims 16c .. 16c + 15 of slot p at vp + (c * n + p) * 16.
void PackValues(const KvPageView& v, int32_t kvh, int64_t n, int64_t vd, float* vp) {
  const bool f16 = v.dtype == kvquant::KvDtype::kF16;
  const size_t off = static_cast<size_t>(kvh) * v.head_stride;
  for (int64_t p = 0; p < n; ++p) {
    const uint8_t* row = v.Token(p) + off;
    for (int64_t c = 0; c < vd / kNR; ++c) {
      float* dst = vp + (c * n + p) * kNR;
      _mm256_store_ps(dst, LoadKv8(row, kNR * c, f16));
      _mm256_store_ps(dst + 8, LoadKv8(row, kNR * c + 8, f16));
    }
  }
}

// Softmax weights of query i (its slots 0 .. n_own - 1) in place, a row of n_tile scores; the
// slots past its own (up to the tile's last query) get 0.
void QueryWeights(const AttentionArgs& a, int64_t i, float* s, int64_t n_own, int64_t n_tile) {
  MaskDeadSlots(a, s, n_own);
  SoftmaxAvx2(s, n_own);
  ClearDeadWeights(a, s, n_own);
  for (int64_t p = n_own; p < n_tile; ++p) s[p] = 0.0f;
  ObserveWeights(a, i, s, n_own);
}

}  // namespace

bool PrefillAttentionFits(const AttentionArgs& a) {
  return a.n_q >= kPrefillAttentionMinQueries && a.head_dim % kNR == 0 && a.VDim() % kNR == 0;
}

void AttentionPrefillAvx2(const AttentionArgs& a, int32_t kvh_begin, int32_t kvh_end) {
  const int32_t group = a.n_head / a.n_kv_head;
  const int64_t hd = a.head_dim, vd = a.VDim();
  const int64_t n_kv = a.slot0 + a.n_q;                // slots the last query sees
  const int64_t n_pad = (n_kv + kNR - 1) / kNR * kNR;  // score rows, whole micro-panels
  thread_local AlignedFloats k_buf, v_buf, s_buf;
  float* kp = k_buf.Get(static_cast<size_t>(n_pad * hd));
  float* vp = v_buf.Get(static_cast<size_t>(n_kv * vd));
  float* s = s_buf.Get(static_cast<size_t>(kMR * n_pad));  // [kMR][n_pad] scores, then weights
  const size_t s_row = static_cast<size_t>(n_pad) * 4;
  for (int32_t kvh = kvh_begin; kvh < kvh_end; ++kvh) {
    PackKeys(a.k, kvh, n_kv, hd, kp);
    PackValues(a.v, kvh, n_kv, vd, vp);
    for (int32_t g = 0; g < group; ++g) {
      const int64_t h = static_cast<int64_t>(kvh) * group + g;
      for (int64_t i0 = 0; i0 < a.n_q; i0 += kMR) {
        const int64_t mr = std::min<int64_t>(kMR, a.n_q - i0);
        const int64_t n_tile = a.slot0 + i0 + mr;  // slots the tile's last query sees
        const auto* q = reinterpret_cast<const uint8_t*>(a.q + i0 * a.q_stride + h * hd);
        const size_t q_row = static_cast<size_t>(a.q_stride) * 4;
        for (int64_t p0 = 0; p0 < n_tile; p0 += kNR)
          kTiles[mr](q, q_row, kp + p0 * hd, hd, s + p0, n_pad, kNR, false);
        const __m256 scale = _mm256_set1_ps(a.scale);
        for (int64_t t = 0; t < mr; ++t) {
          float* row = s + t * n_pad;
          for (int64_t p = 0; p < n_tile; p += 8)
            _mm256_store_ps(row + p, _mm256_mul_ps(_mm256_load_ps(row + p), scale));
          QueryWeights(a, i0 + t, row, a.slot0 + i0 + t + 1, n_tile);
        }
        float* out = a.out + i0 * a.out_stride + h * vd;
        for (int64_t c = 0; c < vd / kNR; ++c)
          kTiles[mr](reinterpret_cast<const uint8_t*>(s), s_row, vp + c * n_kv * kNR, n_tile,
                     out + c * kNR, a.out_stride, kNR, false);
      }
    }
  }
}

}  // namespace kvforge::kernels::internal
