// AVX2 + FMA + F16C decode attention over a slot range, row by row (the dispatch table's
// attention_decode_part; kernels.h says what it computes). The K rows and then the V rows of a
// chunk are read once each, row after row and every row from its first byte to its last, every
// query head served from them, so the KV bytes stream in address order within a block (the only
// order the hardware prefetchers follow at the memory's sequential rate; ADR 0022). Compiled
// with -mavx2 -mfma -mf16c like every *_avx2.cc file; called only after dispatch.cc checked the
// CPU.
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
// scores ([n_head][kChunkRows] floats, twice: row-major as computed, head-major for the softmax)
// stay in L1 between the K and V halves.
constexpr int64_t kChunkRows = 16;

// 8 values at d of a K or V row, f16 or f32 (a template, so the hot loops carry no dtype test).
template <bool kF16>
inline __m256 Load8(const uint8_t* row, int64_t d) {
  if constexpr (kF16)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * d)));
  return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + d);
}

template <bool kF16>
inline float Dot1Row(const float* q, const uint8_t* k, int64_t hd) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t d = 0; d < hd; d += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), Load8<kF16>(k, d), acc);
  return HSum(acc);
}

// q_i . k_i for 4 query heads q[i] against their K segments k[i] (hd values, a multiple of 8), as
// 4 lanes.
template <bool kF16>
inline __m128 Dot4Heads(const float* const q[4], const uint8_t* const k[4], int64_t hd) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t d = 0; d < hd; d += 8) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q[0] + d), Load8<kF16>(k[0], d), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q[1] + d), Load8<kF16>(k[1], d), a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(q[2] + d), Load8<kF16>(k[2], d), a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(q[3] + d), Load8<kF16>(k[3], d), a3);
  }
  const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

// How a K or V row holds its heads. Float rows: head h at h * head_stride, read 8 values at a
// time. q8_0 rows (llama.cpp blocks along the row, head_dim a multiple of 32): head h is
// head_dim / 32 blocks of {f16 d, int8 qs[32]} at h * head_dim / 32 * 34; a block's scale is
// applied once per block (to the dot product, or to the weight of a V row).
template <bool kF16>
struct FloatRows {
  static constexpr bool kFloat = true;
  static const uint8_t* Head(const KvPageView& v, const uint8_t* row, int32_t kvh) {
    return row + static_cast<size_t>(kvh) * v.head_stride;
  }
  static float Dot(const float* q, const uint8_t* seg, int64_t hd) {
    return Dot1Row<kF16>(q, seg, hd);
  }
  static __m128 Dot4(const float* const q[4], const uint8_t* const k[4], int64_t hd) {
    return Dot4Heads<kF16>(q, k, hd);
  }
  static void Axpy(float w, const uint8_t* seg, int64_t vd, float* o) {
    const __m256 wv = _mm256_set1_ps(w);
    for (int64_t d = 0; d < vd; d += 8)
      _mm256_storeu_ps(o + d, _mm256_fmadd_ps(wv, Load8<kF16>(seg, d), _mm256_loadu_ps(o + d)));
  }
};

struct Q8Rows {
  static constexpr bool kFloat = false;
  static constexpr size_t kBlockBytes = 34;
  static const uint8_t* Head(const KvPageView& v, const uint8_t* row, int32_t kvh) {
    return row + static_cast<size_t>(kvh) * static_cast<size_t>(v.head_dim / 32) * kBlockBytes;
  }
  // 8 int8 codes at qs as floats.
  static __m256 Codes8(const uint8_t* qs) {
    return _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs))));
  }
  static float Dot(const float* q, const uint8_t* seg, int64_t hd) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < hd / 32; ++b, seg += kBlockBytes, q += 32) {
      __m256 blk = _mm256_mul_ps(_mm256_loadu_ps(q), Codes8(seg + 2));
      blk = _mm256_fmadd_ps(_mm256_loadu_ps(q + 8), Codes8(seg + 10), blk);
      blk = _mm256_fmadd_ps(_mm256_loadu_ps(q + 16), Codes8(seg + 18), blk);
      blk = _mm256_fmadd_ps(_mm256_loadu_ps(q + 24), Codes8(seg + 26), blk);
      acc = _mm256_fmadd_ps(_mm256_set1_ps(LoadHalf(seg)), blk, acc);
    }
    return HSum(acc);
  }
  static __m128 Dot4(const float* const q[4], const uint8_t* const k[4], int64_t hd) {
    return _mm_setr_ps(Dot(q[0], k[0], hd), Dot(q[1], k[1], hd), Dot(q[2], k[2], hd),
                       Dot(q[3], k[3], hd));
  }
  static void Axpy(float w, const uint8_t* seg, int64_t vd, float* o) {
    for (int64_t b = 0; b < vd / 32; ++b, seg += kBlockBytes, o += 32) {
      const __m256 wd = _mm256_set1_ps(w * LoadHalf(seg));
      for (int i = 0; i < 4; ++i)
        _mm256_storeu_ps(o + 8 * i,
                         _mm256_fmadd_ps(wd, Codes8(seg + 2 + 8 * i), _mm256_loadu_ps(o + 8 * i)));
    }
  }
};

// Scores of every query head against rows [0, cnt) from krow0, into st[j * n_head + h] (row-major:
// one vector store per 4 heads). Each row is read once from its first byte to its last, heads in
// order: only that order streams at the memory's sequential rate (a walk of 4 rows at a time,
// head by head, read 14 against 35 GB/s in a one-thread test over 48 MB).
template <class Rows>
void ChunkScores(const AttentionArgs& a, const uint8_t* krow0, int64_t cnt, float* st) {
  const int32_t nh = a.n_head, group = nh / a.n_kv_head;
  const int64_t hd = a.head_dim;
  const __m128 scale = _mm_set1_ps(a.scale);
  for (int64_t j = 0; j < cnt; ++j) {
    const uint8_t* row = krow0 + static_cast<size_t>(j) * a.k.token_stride;
    float* sj = st + j * nh;
    int32_t h = 0;
    for (; Rows::kFloat && h + 4 <= nh; h += 4) {
      const float* q[4];
      const uint8_t* k[4];
      for (int i = 0; i < 4; ++i) {
        q[i] = a.q + static_cast<int64_t>(h + i) * hd;
        k[i] = Rows::Head(a.k, row, (h + i) / group);
      }
      _mm_storeu_ps(sj + h, _mm_mul_ps(Rows::Dot4(q, k, hd), scale));
    }
    for (; h < nh; ++h)
      sj[h] = a.scale *
              Rows::Dot(a.q + static_cast<int64_t>(h) * hd, Rows::Head(a.k, row, h / group), hd);
  }
}

// st[cnt][n_head] -> s[n_head][kChunkRows] (the softmax works per head).
void TransposeScores(int32_t nh, int64_t cnt, const float* st, float* s) {
  for (int64_t j = 0; j < cnt; ++j)
    for (int32_t h = 0; h < nh; ++h) s[h * kChunkRows + j] = st[j * nh + h];
}

// Online softmax over one chunk: raises m[h] to the chunk's maximum (rescaling l[h] and the head's
// output o[h][vd] by exp(old - new)), turns the scores into exp(s - m[h]) and adds them to l[h].
void ChunkWeights(int32_t nh, int64_t vd, int64_t cnt, float* s, float* o, float* m, float* l) {
  for (int32_t h = 0; h < nh; ++h) {
    float* sh = s + h * kChunkRows;
    float cm;
    if (cnt == kChunkRows) {
      const __m256 mx2 = _mm256_max_ps(_mm256_loadu_ps(sh), _mm256_loadu_ps(sh + 8));
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx2), _mm256_extractf128_ps(mx2, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      cm = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    } else {
      cm = sh[0];
      for (int64_t j = 1; j < cnt; ++j) cm = std::max(cm, sh[j]);
    }
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
    // The lanes past cnt are computed, never read nor summed.
    const __m256 e0 = Exp256(_mm256_sub_ps(_mm256_loadu_ps(sh), mx));
    const __m256 e1 = Exp256(_mm256_sub_ps(_mm256_loadu_ps(sh + 8), mx));
    _mm256_storeu_ps(sh, e0);
    _mm256_storeu_ps(sh + 8, e1);
    float sum = 0;
    if (cnt == kChunkRows) {
      sum = HSum(_mm256_add_ps(e0, e1));
    } else {
      for (int64_t j = 0; j < cnt; ++j) sum += sh[j];
    }
    l[h] += sum;
  }
}

// o[h] += sum_j w[h][j] * V_j[h / group] over rows [0, cnt) from vrow0, each row read from its
// first byte to its last (as in ChunkScores); the accumulators live in o ([n_head][vd] floats,
// in L1).
template <class Rows>
void ChunkValues(const AttentionArgs& a, const uint8_t* vrow0, int64_t cnt, const float* w,
                 float* o) {
  const int32_t group = a.n_head / a.n_kv_head;
  const int64_t vd = a.VDim();
  for (int64_t j = 0; j < cnt; ++j) {
    const uint8_t* row = vrow0 + static_cast<size_t>(j) * a.v.token_stride;
    for (int32_t kvh = 0; kvh < a.n_kv_head; ++kvh) {
      const uint8_t* seg = Rows::Head(a.v, row, kvh);
      for (int32_t h = kvh * group; h < (kvh + 1) * group; ++h)
        Rows::Axpy(w[h * kChunkRows + j], seg, vd, o + h * vd);
    }
  }
}

template <class KRows, class VRows>
void DecodePart(const AttentionArgs& a, int64_t slot_begin, int64_t slot_end, float* o, float* m,
                float* l) {
  const int32_t nh = a.n_head;
  const int64_t vd = a.VDim();
  thread_local AlignedFloats scores_buf;
  float* s = scores_buf.Get(static_cast<size_t>(2 * nh * kChunkRows));  // [nh][kChunkRows]
  float* st = s + nh * kChunkRows;                                      // [kChunkRows][nh]
  const int64_t kbt = a.k.block_tokens, vbt = a.v.block_tokens;
  for (int64_t p = slot_begin; p < slot_end;) {
    // A chunk stays inside one block of each view (rows are contiguous only there).
    const int64_t cnt = std::min({kChunkRows, kbt - p % kbt, vbt - p % vbt, slot_end - p});
    ChunkScores<KRows>(a, a.k.Token(p), cnt, st);
    TransposeScores(nh, cnt, st, s);
    ChunkWeights(nh, vd, cnt, s, o, m, l);
    ChunkValues<VRows>(a, a.v.Token(p), cnt, s, o);
    p += cnt;
  }
}

// Calls fn.template operator()<Rows>() with the row format of dtype d (f32, f16 or q8_0: what
// DecodePartApplies admits).
template <class Fn>
void WithRows(kvquant::KvDtype d, Fn&& fn) {
  if (d == kvquant::KvDtype::kF16) return fn.template operator()<FloatRows<true>>();
  if (d == kvquant::KvDtype::kQ8_0) return fn.template operator()<Q8Rows>();
  fn.template operator()<FloatRows<false>>();
}

}  // namespace

void AttentionDecodePartAvx2(const AttentionArgs& a, int64_t slot_begin, int64_t slot_end, float* o,
                             float* m, float* l) {
  const int32_t nh = a.n_head;
  std::fill(o, o + nh * a.VDim(), 0.0f);
  std::fill(m, m + nh, -std::numeric_limits<float>::infinity());
  std::fill(l, l + nh, 0.0f);
  WithRows(a.k.dtype, [&]<class KRows>() {
    WithRows(a.v.dtype,
             [&]<class VRows>() { DecodePart<KRows, VRows>(a, slot_begin, slot_end, o, m, l); });
  });
}

}  // namespace kvforge::kernels::internal
