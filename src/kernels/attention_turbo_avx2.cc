// AVX2 attention over TurboQuant rows (kvquant/turbo.h) in the ROTATED domain: nothing is ever
// dequantized back to the original coordinates per token. Compiled with -mavx2 -mfma -mf16c and
// only reached through AttentionQuantAvx2 (head_dim a multiple of 8).
//
// Keys:   k^ = ||k|| Pi^T C[code] (+ sqrt(pi/2)/d ||r|| Pi^T S^T s with QJL), so
//         q . k^ = ||k|| (Pi q) . C[code] (+ sqrt(pi/2)/d ||r|| (S Pi q) . s).
//         Each query head is rotated once per (query, KV head): q' = Pi q, q'' = S q' (O(d^2)),
//         then every token costs one centroid lookup and one FMA per value.
// Values: sum_t p_t v^_t = Pi^T (sum_t p_t ||v_t|| C[code_t]): the weighted centroids are summed
//         in the rotated domain and Pi^T is applied once per head at the end.
// Centroid lookup: 8 codes -> 8 lane indices; _mm256_permutevar8x32_ps over the 8-entry table
// (codes of at most 3 bits), or two permutes and a blend on bit 3 for the 16-entry table.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/avx2_util.h"
#include "kernels/kernels_common.h"
#include "kernels/kv_formats_avx2.h"
#include "kvquant/turbo.h"

namespace kvforge::kernels::internal {
namespace {

constexpr int kMaxBatch = 8;  // query heads scored together (one accumulator each)

// Where head kvh's parts sit inside a row.
struct TurboHead {
  const kvquant::TurboSpec* s = nullptr;
  int64_t code_off = 0;  // first byte of the head's codes (d % 8 == 0: byte aligned)
  int64_t sign_off = 0;  // first byte of the head's sign bits (QJL)
  int64_t meta_off = 0;  // f16 norm (then f16 residual norm)
  __m256i shifts;
  __m256i mask;
  __m256 lut_lo, lut_hi;
};

TurboHead MakeTurboHead(const KvPageView& v, int32_t kvh) {
  TurboHead t;
  t.s = v.turbo;
  const int64_t d = v.head_dim, heads = v.row_values / d, cb = t.s->code_bits;
  t.code_off = kvh * d * cb / 8;
  t.sign_off = kvquant::TurboCodeBytes(*t.s, heads) + kvh * d / 8;
  t.meta_off = kvquant::TurboMetaOffset(*t.s, heads, kvh);
  const int c = static_cast<int>(cb);
  t.shifts = _mm256_setr_epi32(0, c, 2 * c, 3 * c, 4 * c, 5 * c, 6 * c, 7 * c);
  t.mask = _mm256_set1_epi32((1 << c) - 1);
  t.lut_lo = _mm256_load_ps(t.s->lut);
  t.lut_hi = _mm256_load_ps(t.s->lut + 8);
  return t;
}

// Centroids of values e .. e + 7 of the head (e a multiple of 8): their 8 codes are CB bytes,
// loaded with a fixed-size read (3-bit codes read 4 bytes: a turbo row always has at least one
// f16 norm after its codes, so the extra byte is inside the row).
template <int CB>
inline __m256 Centroids8(const uint8_t* row, const TurboHead& t, int64_t e) {
  uint32_t chunk = 0;
  std::memcpy(&chunk, row + t.code_off + e * CB / 8, CB == 3 ? 4 : CB);
  const __m256i idx = _mm256_and_si256(
      _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(chunk)), t.shifts), t.mask);
  const __m256 lo = _mm256_permutevar8x32_ps(t.lut_lo, idx);
  if constexpr (CB <= 3) {
    return lo;
  } else {
    // Bit 3 of the index picks the upper half of the 16-entry table (blendv reads the sign bit).
    const __m256 hi = _mm256_permutevar8x32_ps(t.lut_hi, idx);
    return _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
  }
}

// Sign bits of values e .. e + 7 as +-1.0f (bit set: +1).
inline __m256 Signs8(const uint8_t* row, const TurboHead& t, int64_t e) {
  const __m256i bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256i b = _mm256_set1_epi32(row[t.sign_off + e / 8]);
  const __m256i on = _mm256_cmpeq_epi32(_mm256_and_si256(b, bits), bits);
  return _mm256_blendv_ps(_mm256_set1_ps(-1.0f), _mm256_set1_ps(1.0f), _mm256_castsi256_ps(on));
}

// y = M x for a d x d row-major matrix (d % 8 == 0).
void MatVec(const float* m, const float* x, int64_t d, float* y) {
  for (int64_t i = 0; i < d; ++i) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t j = 0; j < d; j += 8)
      acc = _mm256_fmadd_ps(_mm256_loadu_ps(m + i * d + j), _mm256_loadu_ps(x + j), acc);
    y[i] = HSum(acc);
  }
}

// y += M^T x for a d x d row-major matrix (d % 8 == 0).
void MatTVecAdd(const float* m, const float* x, int64_t d, float* y) {
  for (int64_t i = 0; i < d; ++i) {
    const __m256 xi = _mm256_set1_ps(x[i]);
    for (int64_t j = 0; j < d; j += 8)
      _mm256_storeu_ps(y + j,
                       _mm256_fmadd_ps(xi, _mm256_loadu_ps(m + i * d + j), _mm256_loadu_ps(y + j)));
  }
}

inline float LoadNorm(const uint8_t* p) { return _cvtsh_ss(LoadU16(p)); }

}  // namespace

namespace {

template <int CB, bool QJL>
void TurboScores(const AttentionArgs& a, int32_t kvh, const float* q0, int32_t group, int64_t end,
                 int64_t n_kv, float* scratch) {
  const KvPageView& k = a.k;
  const TurboHead t = MakeTurboHead(k, kvh);
  const kvquant::TurboSpec& s = *t.s;
  const int64_t hd = a.head_dim, bt = k.block_tokens;
  // q' = Pi q and (QJL) q'' = S q' for every query head of the group.
  thread_local std::vector<float> buf;
  buf.resize(static_cast<size_t>(2 * group * hd));
  float* qr = buf.data();
  float* qs = qr + group * hd;
  for (int32_t g = 0; g < group; ++g) {
    MatVec(s.rotation.data(), q0 + g * hd, hd, qr + g * hd);
    if constexpr (QJL) MatVec(s.sketch.data(), qr + g * hd, hd, qs + g * hd);
  }
  for (int32_t g0 = 0; g0 < group; g0 += kMaxBatch) {
    const int ng = static_cast<int>(std::min<int32_t>(kMaxBatch, group - g0));
    for (int64_t p0 = 0; p0 < end; p0 += bt) {
      const uint8_t* row = k.base + static_cast<size_t>(k.block_table[p0 / bt]) * k.block_stride;
      const int64_t cnt = std::min<int64_t>(bt, end - p0);
      int64_t j = 0;
      if constexpr (!QJL) {
        // One or two query heads: four tokens at a time, so the FMA chains are independent
        // (one chain per token would wait on the FMA latency at every step).
        if (ng <= 2) {
          for (; j + 4 <= cnt; j += 4, row += 4 * k.token_stride) {
            __m256 acc[2][4];
            for (int g = 0; g < 2; ++g)
              for (int u = 0; u < 4; ++u) acc[g][u] = _mm256_setzero_ps();
            for (int64_t e = 0; e < hd; e += 8) {
              const __m256 q_0 = _mm256_loadu_ps(qr + g0 * hd + e);
              const __m256 q_1 = ng == 2 ? _mm256_loadu_ps(qr + (g0 + 1) * hd + e) : q_0;
              for (int u = 0; u < 4; ++u) {
                const __m256 c = Centroids8<CB>(row + u * k.token_stride, t, e);
                acc[0][u] = _mm256_fmadd_ps(q_0, c, acc[0][u]);
                if (ng == 2) acc[1][u] = _mm256_fmadd_ps(q_1, c, acc[1][u]);
              }
            }
            for (int u = 0; u < 4; ++u) {
              const float norm = LoadNorm(row + u * k.token_stride + t.meta_off) * a.scale;
              for (int g = 0; g < ng; ++g)
                scratch[(g0 + g) * n_kv + p0 + j + u] = norm * HSum(acc[g][u]);
            }
          }
        }
      }
      for (; j < cnt; ++j, row += k.token_stride) {
        __m256 acc[kMaxBatch], acc_s[kMaxBatch];
        for (int g = 0; g < ng; ++g) acc[g] = acc_s[g] = _mm256_setzero_ps();
        for (int64_t e = 0; e < hd; e += 8) {
          const __m256 c = Centroids8<CB>(row, t, e);
          for (int g = 0; g < ng; ++g)
            acc[g] = _mm256_fmadd_ps(_mm256_loadu_ps(qr + (g0 + g) * hd + e), c, acc[g]);
          if constexpr (QJL) {
            const __m256 sg = Signs8(row, t, e);
            for (int g = 0; g < ng; ++g)
              acc_s[g] = _mm256_fmadd_ps(_mm256_loadu_ps(qs + (g0 + g) * hd + e), sg, acc_s[g]);
          }
        }
        const float norm = LoadNorm(row + t.meta_off);
        const float rcoef = QJL ? s.qjl_scale * LoadNorm(row + t.meta_off + 2) : 0.0f;
        for (int g = 0; g < ng; ++g) {
          float dot = norm * HSum(acc[g]);
          if constexpr (QJL) dot += rcoef * HSum(acc_s[g]);
          scratch[(g0 + g) * n_kv + p0 + j] = dot * a.scale;
        }
      }
    }
  }
}

template <int CB>
void TurboValues(const AttentionArgs& a, int32_t kvh, int32_t group, int64_t end, int64_t n_kv,
                 const float* scratch, float* o0) {
  const KvPageView& v = a.v;
  const TurboHead t = MakeTurboHead(v, kvh);
  const int64_t hd = a.head_dim, bt = v.block_tokens;
  thread_local std::vector<float> rot;
  rot.resize(static_cast<size_t>(hd));
  for (int32_t g = 0; g < group; ++g) {
    const float* w = scratch + g * n_kv;
    // Up to 64 rotated output values stay in registers over the whole sequence.
    for (int64_t d0 = 0; d0 < hd; d0 += 64) {
      const int nreg = static_cast<int>(std::min<int64_t>(8, (hd - d0) / 8));
      __m256 acc[8];
      for (int r = 0; r < nreg; ++r) acc[r] = _mm256_setzero_ps();
      for (int64_t p0 = 0; p0 < end; p0 += bt) {
        const uint8_t* row = v.base + static_cast<size_t>(v.block_table[p0 / bt]) * v.block_stride;
        const int64_t cnt = std::min<int64_t>(bt, end - p0);
        for (int64_t j = 0; j < cnt; ++j, row += v.token_stride) {
          const __m256 pw = _mm256_set1_ps(w[p0 + j] * LoadNorm(row + t.meta_off));
          for (int r = 0; r < nreg; ++r)
            acc[r] = _mm256_fmadd_ps(pw, Centroids8<CB>(row, t, d0 + 8 * r), acc[r]);
        }
      }
      for (int r = 0; r < nreg; ++r) _mm256_storeu_ps(rot.data() + d0 + 8 * r, acc[r]);
    }
    // Values never carry a QJL sketch (keys only), so the rotated sum is all there is.
    MatTVecAdd(t.s->rotation.data(), rot.data(), hd, o0 + g * hd);
  }
}

}  // namespace

// Dispatch once per call on the code width (2 / 3 / 4 bits) and QJL, so the per-token loops
// have fixed-size loads and no branches.
void TurboScoresAvx2(const AttentionArgs& a, int32_t kvh, const float* q0, int32_t group,
                     int64_t end, int64_t n_kv, float* scratch) {
  const kvquant::TurboSpec& s = *a.k.turbo;
  switch (s.code_bits * 2 + (s.qjl ? 1 : 0)) {
    case 2 * 2 + 1:
      return TurboScores<2, true>(a, kvh, q0, group, end, n_kv, scratch);
    case 3 * 2 + 1:
      return TurboScores<3, true>(a, kvh, q0, group, end, n_kv, scratch);
    case 3 * 2:
      return TurboScores<3, false>(a, kvh, q0, group, end, n_kv, scratch);
    default:
      return TurboScores<4, false>(a, kvh, q0, group, end, n_kv, scratch);
  }
}

void TurboValuesAvx2(const AttentionArgs& a, int32_t kvh, int32_t group, int64_t end, int64_t n_kv,
                     const float* scratch, float* o0) {
  if (a.v.turbo->code_bits == 3) return TurboValues<3>(a, kvh, group, end, n_kv, scratch, o0);
  return TurboValues<4>(a, kvh, group, end, n_kv, scratch, o0);
}

namespace {

template <int CB>
void DecodeRotated(const KvPageView& v, int64_t p0, int64_t cnt, int32_t kvh, float* out) {
  const TurboHead t = MakeTurboHead(v, kvh);
  const int64_t hd = v.head_dim;
  const uint8_t* row = v.Token(p0);
  for (int64_t j = 0; j < cnt; ++j, row += v.token_stride) {
    const __m256 norm = _mm256_set1_ps(LoadNorm(row + t.meta_off));
    for (int64_t e = 0; e < hd; e += 8)
      _mm256_storeu_ps(out + j * hd + e, _mm256_mul_ps(norm, Centroids8<CB>(row, t, e)));
  }
}

}  // namespace

void TurboDecodeRotatedTile(const KvPageView& v, int64_t p0, int64_t cnt, int32_t kvh, float* out) {
  if (v.turbo->code_bits == 3) return DecodeRotated<3>(v, p0, cnt, kvh, out);
  return DecodeRotated<4>(v, p0, cnt, kvh, out);
}

void TurboRotate(const KvPageView& v, const float* x, float* y) {
  MatVec(v.turbo->rotation.data(), x, v.head_dim, y);
}

void TurboUnrotateAdd(const KvPageView& v, const float* x, float* y) {
  MatTVecAdd(v.turbo->rotation.data(), x, v.head_dim, y);
}

}  // namespace kvforge::kernels::internal
