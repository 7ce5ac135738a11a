// AVX2 + FMA + F16C paged attention over f32 / f16 KV rows (the dispatch table's attention
// entry). Views in other dtypes, or with a residual window, go to attention_quant_avx2.cc.
// Compiled with -mavx2 -mfma -mf16c like every *_avx2.cc file; called only after dispatch.cc
// checked the CPU.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/avx2_util.h"
#include "kernels/kernels.h"
#include "kernels/kernels_common.h"

namespace kvforge::kernels::internal {
namespace {

// Rows ahead of the one being read whose bytes are prefetched. A decode walk over one KV head
// reads head_dim values every token_stride bytes (the row holds every KV head), 2-3 rows per 4 KiB
// page, too few for the hardware prefetchers to train: without this the K and V passes ran at
// about a third of the weight matvec's bandwidth at depth 2048 (`perf`: the FMAs waiting on
// their loads; 8 rows measured best of 4-64 on Zen 4, 6.8 against 5.6 GB/s one thread at depth
// 8192). Decode steps that can read whole rows take attention_decode_avx2.cc instead.
constexpr int64_t kPrefetchRows = 8;

// Starts loading the `bytes` bytes at p into the cache (one prefetch per 64-byte line).
inline void PrefetchBytes(const uint8_t* p, size_t bytes) {
  for (size_t off = 0; off < bytes; off += 64)
    _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
}

// Row j + kPrefetchRows of a walk whose current block holds `cnt` rows at `row0`, the next block
// (nullptr at the end) `next_cnt` rows at `next0`; nullptr when that row is past both.
inline const uint8_t* RowAhead(const uint8_t* row0, int64_t cnt, const uint8_t* next0,
                               int64_t next_cnt, int64_t j, size_t stride) {
  const int64_t ahead = j + kPrefetchRows;
  if (ahead < cnt) return row0 + static_cast<size_t>(ahead) * stride;
  if (next0 != nullptr && ahead - cnt < next_cnt)
    return next0 + static_cast<size_t>(ahead - cnt) * stride;
  return nullptr;
}

// The first row of head_off in logical block p0 / bt of view v, or nullptr past n_kv.
inline const uint8_t* BlockRow0(const KvPageView& v, size_t head_off, int64_t p0, int64_t n_kv) {
  if (p0 >= n_kv) return nullptr;
  return v.base + static_cast<size_t>(v.block_table[p0 / v.block_tokens]) * v.block_stride +
         head_off;
}

// o[0 .. 8*NREG) = sum_p w[p] * V[p][d0 ..]: the output chunk lives in registers across all
// positions (walked block by block, no per-position division), each V row chunk is read once.
template <int NREG>
void AccumulateV(const KvPageView& v, size_t head_off, int64_t d0, int64_t n_kv, const float* w,
                 float* o) {
  __m256 acc[NREG];
  for (int r = 0; r < NREG; ++r) acc[r] = _mm256_setzero_ps();
  const int64_t bt = v.block_tokens;
  const size_t elt = v.dtype == kvquant::KvDtype::kF16 ? 2 : 4;
  const size_t chunk_off = static_cast<size_t>(d0) * elt, chunk_bytes = 8 * NREG * elt;
  for (int64_t p0 = 0; p0 < n_kv; p0 += bt) {
    const uint8_t* row0 = BlockRow0(v, head_off, p0, n_kv);
    const uint8_t* next0 = BlockRow0(v, head_off, p0 + bt, n_kv);
    const int64_t cnt = std::min<int64_t>(bt, n_kv - p0);
    const int64_t next_cnt = std::min<int64_t>(bt, n_kv - p0 - bt);
    const uint8_t* row = row0;
    for (int64_t j = 0; j < cnt; ++j, row += v.token_stride) {
      if (const uint8_t* ahead = RowAhead(row0, cnt, next0, next_cnt, j, v.token_stride))
        PrefetchBytes(ahead + chunk_off, chunk_bytes);
      const __m256 vw = _mm256_set1_ps(w[p0 + j]);
      for (int r = 0; r < NREG; ++r)
        acc[r] = _mm256_fmadd_ps(vw, LoadKv8(row, d0 + 8 * r, v.dtype == kvquant::KvDtype::kF16),
                                 acc[r]);
    }
  }
  for (int r = 0; r < NREG; ++r) _mm256_storeu_ps(o + d0 + 8 * r, acc[r]);
}

void AccumulateVChunk(int nreg, const KvPageView& v, size_t head_off, int64_t d0, int64_t n_kv,
                      const float* w, float* o) {
  switch (nreg) {
    case 1:
      return AccumulateV<1>(v, head_off, d0, n_kv, w, o);
    case 2:
      return AccumulateV<2>(v, head_off, d0, n_kv, w, o);
    case 3:
      return AccumulateV<3>(v, head_off, d0, n_kv, w, o);
    case 4:
      return AccumulateV<4>(v, head_off, d0, n_kv, w, o);
    case 5:
      return AccumulateV<5>(v, head_off, d0, n_kv, w, o);
    case 6:
      return AccumulateV<6>(v, head_off, d0, n_kv, w, o);
    case 7:
      return AccumulateV<7>(v, head_off, d0, n_kv, w, o);
    default:
      return AccumulateV<8>(v, head_off, d0, n_kv, w, o);
  }
}

// Dot products of q with the first hd8 elements of 4 K rows at once (independent FMA chains).
inline void Dot4(const float* q, const uint8_t* k0, size_t stride, int64_t hd8, bool f16,
                 float* out) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t d = 0; d < hd8; d += 8) {
    const __m256 qv = _mm256_loadu_ps(q + d);
    a0 = _mm256_fmadd_ps(qv, LoadKv8(k0, d, f16), a0);
    a1 = _mm256_fmadd_ps(qv, LoadKv8(k0 + stride, d, f16), a1);
    a2 = _mm256_fmadd_ps(qv, LoadKv8(k0 + 2 * stride, d, f16), a2);
    a3 = _mm256_fmadd_ps(qv, LoadKv8(k0 + 3 * stride, d, f16), a3);
  }
  out[0] = HSum(a0);
  out[1] = HSum(a1);
  out[2] = HSum(a2);
  out[3] = HSum(a3);
}

// f32 / f16 rows without a residual window take the direct path below; every other view is
// dequantized tile by tile (attention_quant_avx2.cc).
inline bool PlainFloat(const KvPageView& v) {
  return (v.dtype == kvquant::KvDtype::kF32 || v.dtype == kvquant::KvDtype::kF16) &&
         v.recent == nullptr && v.row_tokens == 1;
}

}  // namespace

void AttentionAvx2(const AttentionArgs& a, int32_t kvh_begin, int32_t kvh_end, float* scratch) {
  if (!PlainFloat(a.k) || !PlainFloat(a.v))
    return AttentionQuantAvx2(a, kvh_begin, kvh_end, scratch);
  if (PrefillAttentionFits(a)) return AttentionPrefillAvx2(a, kvh_begin, kvh_end);
  const bool k_f16 = a.k.dtype == kvquant::KvDtype::kF16;
  const bool v_f16 = a.v.dtype == kvquant::KvDtype::kF16;
  const int32_t group = a.n_head / a.n_kv_head;
  const int64_t hd = a.head_dim;
  const int64_t hd8 = hd / 8 * 8;
  const int64_t vd = a.VDim(), vd8 = vd / 8 * 8;
  const int64_t bt = a.k.block_tokens;
  const size_t k_row_bytes = static_cast<size_t>(hd) * (k_f16 ? 2 : 4);
  for (int64_t i = 0; i < a.n_q; ++i) {
    const int64_t n_kv = a.slot0 + i + 1;
    for (int32_t kvh = kvh_begin; kvh < kvh_end; ++kvh) {
      const float* q0 = a.q + i * a.q_stride + static_cast<int64_t>(kvh) * group * hd;
      const size_t k_off = static_cast<size_t>(kvh) * a.k.head_stride;
      // Scores, block by block; each K row chunk stays in cache for the whole query group.
      for (int64_t p0 = 0; p0 < n_kv; p0 += bt) {
        const uint8_t* kb = BlockRow0(a.k, k_off, p0, n_kv);
        const uint8_t* next_kb = BlockRow0(a.k, k_off, p0 + bt, n_kv);
        const int64_t cnt = std::min<int64_t>(bt, n_kv - p0);
        const int64_t next_cnt = std::min<int64_t>(bt, n_kv - p0 - bt);
        for (int32_t g = 0; g < group; ++g) {
          const float* q = q0 + g * hd;
          float* s = scratch + g * n_kv + p0;
          int64_t j = 0;
          for (; j + 4 <= cnt; j += 4) {
            if (g == 0)  // the rest of the group finds the block's rows in cache
              for (int64_t r = 0; r < 4; ++r)
                if (const uint8_t* ahead =
                        RowAhead(kb, cnt, next_kb, next_cnt, j + r, a.k.token_stride))
                  PrefetchBytes(ahead, k_row_bytes);
            Dot4(q, kb + j * a.k.token_stride, a.k.token_stride, hd8, k_f16, s + j);
          }
          for (; j < cnt; ++j) {
            const uint8_t* krow = kb + j * a.k.token_stride;
            __m256 acc = _mm256_setzero_ps();
            for (int64_t d = 0; d < hd8; d += 8)
              acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), LoadKv8(krow, d, k_f16), acc);
            s[j] = HSum(acc);
          }
          if (hd8 < hd) {
            for (j = 0; j < cnt; ++j) {
              const uint8_t* krow = kb + j * a.k.token_stride;
              for (int64_t d = hd8; d < hd; ++d) s[j] += q[d] * KvAt(krow, d, k_f16);
            }
          }
          for (j = 0; j < cnt; ++j) s[j] *= a.scale;
        }
      }
      for (int32_t g = 0; g < group; ++g) {
        MaskDeadSlots(a, scratch + g * n_kv, n_kv);
        SoftmaxAvx2(scratch + g * n_kv, n_kv);
        ClearDeadWeights(a, scratch + g * n_kv, n_kv);
        ObserveWeights(a, i, scratch + g * n_kv, n_kv);
      }
      float* o0 = a.out + i * a.out_stride + static_cast<int64_t>(kvh) * group * vd;
      const size_t v_off = static_cast<size_t>(kvh) * a.v.head_stride;
      for (int32_t g = 0; g < group; ++g) {
        float* o = o0 + g * vd;
        const float* w = scratch + g * n_kv;
        for (int64_t d0 = 0; d0 < vd8; d0 += 64)
          AccumulateVChunk(static_cast<int>(std::min<int64_t>(8, (vd8 - d0) / 8)), a.v, v_off, d0,
                           n_kv, w, o);
        for (int64_t d = vd8; d < vd; ++d) {
          float acc = 0;
          for (int64_t p = 0; p < n_kv; ++p) acc += w[p] * KvAt(a.v.Token(p) + v_off, d, v_f16);
          o[d] = acc;
        }
      }
    }
  }
}

}  // namespace kvforge::kernels::internal
