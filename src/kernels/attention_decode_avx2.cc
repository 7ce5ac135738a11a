// AVX2 + FMA + F16C decode attention over a slot range, row by row (the dispatch table's
// attention_decode_part; kernels.h says what it computes). The K rows and then the V rows of a
// chunk are read once, four rows at a time, every query head served from them, so the KV bytes
// stream in address order within a block. Compiled with -mavx2 -mfma -mf16c like every *_avx2.cc
// file; called only after dispatch.cc checked the CPU.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/avx2_util.h"
#include "kernels/kernels.h"
#include "kernels/kernels_common.h"

namespace kvforge::kernels::internal {
namespace {

// Rows per chunk: the online softmax updates each head's maximum once per chunk, and the chunk's
// scores ([n_head][kChunkRows] floats) stay in L1 between the K and V halves.
constexpr int64_t kChunkRows = 16;

// Rows ahead whose bytes are prefetched, head by head as the walk reaches each head: the walk
// reads four rows at a time (four streams), which the hardware prefetchers follow less well than
// one (110M f16 tg64 at depth 2048 on Zen 4: 76.0 / 79.9 without, 81.3 / 83.4 t/s with 8 rows).
constexpr int64_t kAheadRows = 8;

// Prefetches KV head kvh (head_stride bytes, one prefetch per 64-byte line) of the four rows
// rows[0..3] (null entries skipped).
inline void PrefetchHead(const uint8_t* const* rows, int32_t kvh, size_t head_stride) {
  for (int r = 0; r < 4; ++r) {
    if (rows[r] == nullptr) continue;
    const uint8_t* p = rows[r] + static_cast<size_t>(kvh) * head_stride;
    for (size_t off = 0; off < head_stride; off += 64)
      _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
  }
}

// q_i . k_i for 4 (query head, K segment) pairs of hd values (a multiple of 8), as 4 lanes.
inline __m128 Dot4Heads(const float* const q[4], const uint8_t* const k[4], int64_t hd, bool f16) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t d = 0; d < hd; d += 8) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q[0] + d), LoadKv8(k[0], d, f16), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q[1] + d), LoadKv8(k[1], d, f16), a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(q[2] + d), LoadKv8(k[2], d, f16), a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(q[3] + d), LoadKv8(k[3], d, f16), a3);
  }
  // Pairwise sums: after two hadds lane i of each half holds part of a_i's total.
  const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

inline float Dot1Head(const float* q, const uint8_t* k, int64_t hd, bool f16) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t d = 0; d < hd; d += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), LoadKv8(k, d, f16), acc);
  return HSum(acc);
}

// Scores of every query head against rows [0, cnt) from krow0: s[h * kChunkRows + j]. Rows go
// four at a time, head by head: four sequential streams a row apart, each query loaded once per
// four rows and four scores stored as one vector.
// ahead[j]: row j + kAheadRows of the walk (nullptr past its end).
void ChunkScores(const AttentionArgs& a, const uint8_t* krow0, int64_t cnt,
                 const uint8_t* const* ahead, float* s) {
  const int32_t nh = a.n_head, group = nh / a.n_kv_head;
  const int64_t hd = a.head_dim;
  const bool f16 = a.k.dtype == kvquant::KvDtype::kF16;
  const size_t ts = a.k.token_stride;
  const __m128 scale = _mm_set1_ps(a.scale);
  int64_t j = 0;
  for (; j + 4 <= cnt; j += 4) {
    const uint8_t* row = krow0 + static_cast<size_t>(j) * ts;
    for (int32_t h = 0; h < nh; ++h) {
      const float* qh = a.q + static_cast<int64_t>(h) * hd;
      const float* q[4] = {qh, qh, qh, qh};
      const uint8_t* seg = row + static_cast<size_t>(h / group) * a.k.head_stride;
      const uint8_t* k[4] = {seg, seg + ts, seg + 2 * ts, seg + 3 * ts};
      if (h % group == 0) PrefetchHead(ahead + j, h / group, a.k.head_stride);
      _mm_storeu_ps(s + h * kChunkRows + j, _mm_mul_ps(Dot4Heads(q, k, hd, f16), scale));
    }
  }
  for (; j < cnt; ++j) {
    const uint8_t* row = krow0 + static_cast<size_t>(j) * ts;
    for (int32_t h = 0; h < nh; ++h)
      s[h * kChunkRows + j] =
          a.scale * Dot1Head(a.q + static_cast<int64_t>(h) * hd,
                             row + static_cast<size_t>(h / group) * a.k.head_stride, hd, f16);
  }
}

// Online softmax over one chunk: raises m[h] to the chunk's maximum (rescaling l[h] and the head's
// output o[h][vd] by exp(old - new)), turns the scores into exp(s - m[h]) and adds them to l[h].
void ChunkWeights(int32_t nh, int64_t vd, int64_t cnt, float* s, float* o, float* m, float* l) {
  for (int32_t h = 0; h < nh; ++h) {
    float* sh = s + h * kChunkRows;
    float cm = sh[0];
    for (int64_t j = 1; j < cnt; ++j) cm = std::max(cm, sh[j]);
    if (cm > m[h]) {
      if (l[h] > 0) {
        const float corr = std::exp(m[h] - cm);
        l[h] *= corr;
        const __m256 c = _mm256_set1_ps(corr);
        float* oh = o + h * vd;
        for (int64_t d = 0; d < vd; d += 8)
          _mm256_storeu_ps(oh + d, _mm256_mul_ps(c, _mm256_loadu_ps(oh + d)));
      }
      m[h] = cm;
    }
    const __m256 mx = _mm256_set1_ps(m[h]);
    for (int64_t j = 0; j < kChunkRows; j += 8)  // the lanes past cnt are computed, never read
      _mm256_storeu_ps(sh + j, Exp256(_mm256_sub_ps(_mm256_loadu_ps(sh + j), mx)));
    float sum = 0;
    for (int64_t j = 0; j < cnt; ++j) sum += sh[j];
    l[h] += sum;
  }
}

// o[h] += sum_j w[h][j] * V_j[h / group] over rows [0, cnt) from vrow0: four rows per load and
// store of a head's output (the accumulators live in o, [n_head][vd] floats in L1); ahead as in
// ChunkScores.
void ChunkValues(const AttentionArgs& a, const uint8_t* vrow0, int64_t cnt, const float* w,
                 const uint8_t* const* ahead, float* o) {
  const int32_t nh = a.n_head, group = nh / a.n_kv_head;
  const int64_t vd = a.VDim();
  const bool f16 = a.v.dtype == kvquant::KvDtype::kF16;
  const size_t ts = a.v.token_stride;
  int64_t j = 0;
  for (; j + 4 <= cnt; j += 4) {
    const uint8_t* row = vrow0 + static_cast<size_t>(j) * ts;
    for (int32_t h = 0; h < nh; ++h) {
      const float* wh = w + h * kChunkRows + j;
      const __m256 w0 = _mm256_set1_ps(wh[0]), w1 = _mm256_set1_ps(wh[1]);
      const __m256 w2 = _mm256_set1_ps(wh[2]), w3 = _mm256_set1_ps(wh[3]);
      const uint8_t* seg = row + static_cast<size_t>(h / group) * a.v.head_stride;
      if (h % group == 0) PrefetchHead(ahead + j, h / group, a.v.head_stride);
      float* oh = o + h * vd;
      for (int64_t d = 0; d < vd; d += 8) {
        __m256 acc = _mm256_fmadd_ps(w0, LoadKv8(seg, d, f16), _mm256_loadu_ps(oh + d));
        acc = _mm256_fmadd_ps(w1, LoadKv8(seg + ts, d, f16), acc);
        acc = _mm256_fmadd_ps(w2, LoadKv8(seg + 2 * ts, d, f16), acc);
        _mm256_storeu_ps(oh + d, _mm256_fmadd_ps(w3, LoadKv8(seg + 3 * ts, d, f16), acc));
      }
    }
  }
  for (; j < cnt; ++j) {
    const uint8_t* row = vrow0 + static_cast<size_t>(j) * ts;
    for (int32_t h = 0; h < nh; ++h) {
      const __m256 wv = _mm256_set1_ps(w[h * kChunkRows + j]);
      const uint8_t* seg = row + static_cast<size_t>(h / group) * a.v.head_stride;
      float* oh = o + h * vd;
      for (int64_t d = 0; d < vd; d += 8)
        _mm256_storeu_ps(oh + d,
                         _mm256_fmadd_ps(wv, LoadKv8(seg, d, f16), _mm256_loadu_ps(oh + d)));
    }
  }
}

}  // namespace

void AttentionDecodePartAvx2(const AttentionArgs& a, int64_t slot_begin, int64_t slot_end, float* o,
                             float* m, float* l) {
  const int32_t nh = a.n_head;
  const int64_t vd = a.VDim();
  std::fill(o, o + nh * vd, 0.0f);
  std::fill(m, m + nh, -std::numeric_limits<float>::infinity());
  std::fill(l, l + nh, 0.0f);
  thread_local AlignedFloats scores_buf;
  float* s = scores_buf.Get(static_cast<size_t>(nh * kChunkRows));  // [nh][kChunkRows]
  const int64_t kbt = a.k.block_tokens, vbt = a.v.block_tokens;
  for (int64_t p = slot_begin; p < slot_end;) {
    // A chunk stays inside one block of each view (rows are contiguous only there).
    const int64_t cnt = std::min({kChunkRows, kbt - p % kbt, vbt - p % vbt, slot_end - p});
    const uint8_t* ka[kChunkRows] = {};  // rows kAheadRows ahead of the chunk's, K and V
    const uint8_t* va[kChunkRows] = {};
    for (int64_t j = 0; j < cnt && p + j + kAheadRows < slot_end; ++j) {
      ka[j] = a.k.Token(p + j + kAheadRows);
      va[j] = a.v.Token(p + j + kAheadRows);
    }
    ChunkScores(a, a.k.Token(p), cnt, ka, s);
    ChunkWeights(nh, vd, cnt, s, o, m, l);
    ChunkValues(a, a.v.Token(p), cnt, s, va, o);
    p += cnt;
  }
}

}  // namespace kvforge::kernels::internal
