// AVX2 paged attention over quantized (or mixed) KV views, dequantizing on the fly. Compiled with
// -mavx2 -mfma -mf16c and only reached through the AVX2 table (dispatch.cc checks the CPU).
//
// Per (query, KV head) the kernel computes the scores, the softmax, then the V accumulation, and
// picks for K and for V separately how to read the rows:
//   fused  per-token rows (bf16, fp8, int8, q8_0, q4_0; f16/f32 in a mixed pair): the scores take
//          4 rows at a time straight from the codes, applying each row segment's scale once (a
//          head, or a 32-value block); the V accumulation keeps up to 64 output values in
//          registers over the whole sequence and folds the segment scale into the softmax
//          weight. This is the f16 kernel's loop with another loader.
//   tiled  everything else (KIVI group rows, the residual window, blocks spanning heads, head
//          widths not a multiple of 8): tiles of at most kTile tokens that never cross a block, a
//          KIVI group or the window boundary are dequantized into a kTile x head_dim buffer,
//          reused by every query head of the GQA group and, in a prefill chunk, by a block of up
//          to kQueryBlock queries (kvquant3 rows also go this way).
//   turbo  TurboQuant rows, read in the rotated domain (attention_turbo_avx2.cc).
// Queries are processed in blocks of kQueryBlock; scores live in a per-thread buffer, one row per
// query of the block. Nothing bigger than one tile is ever dequantized.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/avx2_util.h"
#include "kernels/kernels.h"
#include "kernels/kernels_common.h"
#include "kernels/kv_formats_avx2.h"

namespace kvforge::kernels::internal {
namespace {

// Scores of q against cnt decoded rows (hd floats each), 4 rows at a time.
void ScoreTile(const float* q, const float* rows, int64_t cnt, int64_t hd, float scale, float* s) {
  const int64_t hd8 = hd / 8 * 8;
  int64_t j = 0;
  for (; j + 4 <= cnt; j += 4) {
    const float* r = rows + j * hd;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t d = 0; d < hd8; d += 8) {
      const __m256 qv = _mm256_loadu_ps(q + d);
      a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(r + d), a0);
      a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(r + hd + d), a1);
      a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(r + 2 * hd + d), a2);
      a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(r + 3 * hd + d), a3);
    }
    s[j] = HSum(a0);
    s[j + 1] = HSum(a1);
    s[j + 2] = HSum(a2);
    s[j + 3] = HSum(a3);
  }
  for (; j < cnt; ++j) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t d = 0; d < hd8; d += 8)
      acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(rows + j * hd + d), acc);
    s[j] = HSum(acc);
  }
  if (hd8 < hd)
    for (j = 0; j < cnt; ++j)
      for (int64_t d = hd8; d < hd; ++d) s[j] += q[d] * rows[j * hd + d];
  for (j = 0; j < cnt; ++j) s[j] *= scale;
}

// o[d0 .. d0 + 8*NREG) += sum_j w[j] * rows[j][d0 ..], accumulated in registers over the tile.
template <int NREG>
void AccumulateRows(const float* rows, int64_t cnt, int64_t hd, int64_t d0, const float* w,
                    float* o) {
  __m256 acc[NREG];
  for (int r = 0; r < NREG; ++r) acc[r] = _mm256_loadu_ps(o + d0 + 8 * r);
  for (int64_t j = 0; j < cnt; ++j) {
    const __m256 vw = _mm256_set1_ps(w[j]);
    const float* row = rows + j * hd + d0;
    for (int r = 0; r < NREG; ++r)
      acc[r] = _mm256_fmadd_ps(vw, _mm256_loadu_ps(row + 8 * r), acc[r]);
  }
  for (int r = 0; r < NREG; ++r) _mm256_storeu_ps(o + d0 + 8 * r, acc[r]);
}

void AccumulateTile(const float* rows, int64_t cnt, int64_t hd, const float* w, float* o) {
  const int64_t hd8 = hd / 8 * 8;
  for (int64_t d0 = 0; d0 < hd8; d0 += 64) {
    switch (std::min<int64_t>(8, (hd8 - d0) / 8)) {
      case 1:
        AccumulateRows<1>(rows, cnt, hd, d0, w, o);
        break;
      case 2:
        AccumulateRows<2>(rows, cnt, hd, d0, w, o);
        break;
      case 3:
        AccumulateRows<3>(rows, cnt, hd, d0, w, o);
        break;
      case 4:
        AccumulateRows<4>(rows, cnt, hd, d0, w, o);
        break;
      case 5:
        AccumulateRows<5>(rows, cnt, hd, d0, w, o);
        break;
      case 6:
        AccumulateRows<6>(rows, cnt, hd, d0, w, o);
        break;
      case 7:
        AccumulateRows<7>(rows, cnt, hd, d0, w, o);
        break;
      default:
        AccumulateRows<8>(rows, cnt, hd, d0, w, o);
        break;
    }
  }
  for (int64_t d = hd8; d < hd; ++d) {
    float acc = o[d];
    for (int64_t j = 0; j < cnt; ++j) acc += w[j] * rows[j * hd + d];
    o[d] = acc;
  }
}

// Sum of q over one segment (for zero points: sum_d q_d (s raw_d + z) = s q.raw + z sum_d q_d).
inline float SegSum(const float* q, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t d = 0; d < n; d += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(q + d));
  return HSum(acc);
}

// Scores (times `scale`) of q against 4 rows `stride` bytes apart, fused loader F.
template <class F>
inline void Dot4Fused(const float* q, const uint8_t* r0, size_t stride, const HeadCtx& c,
                      int64_t hd, float scale, float* out) {
  const int64_t seg = F::kSeg ? F::kSeg : hd;
  const uint8_t* r1 = r0 + stride;
  const uint8_t* r2 = r1 + stride;
  const uint8_t* r3 = r2 + stride;
  __m256 t0 = _mm256_setzero_ps(), t1 = t0, t2 = t0, t3 = t0;
  float z[4] = {0, 0, 0, 0};
  for (int64_t s0 = 0, si = 0; s0 < hd; s0 += seg, ++si) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t d = s0; d < s0 + seg; d += 8) {
      const __m256 qv = _mm256_loadu_ps(q + d);
      a0 = _mm256_fmadd_ps(qv, F::Raw8(r0, c, d), a0);
      a1 = _mm256_fmadd_ps(qv, F::Raw8(r1, c, d), a1);
      a2 = _mm256_fmadd_ps(qv, F::Raw8(r2, c, d), a2);
      a3 = _mm256_fmadd_ps(qv, F::Raw8(r3, c, d), a3);
    }
    t0 = _mm256_fmadd_ps(_mm256_set1_ps(F::Scale(r0, c, si)), a0, t0);
    t1 = _mm256_fmadd_ps(_mm256_set1_ps(F::Scale(r1, c, si)), a1, t1);
    t2 = _mm256_fmadd_ps(_mm256_set1_ps(F::Scale(r2, c, si)), a2, t2);
    t3 = _mm256_fmadd_ps(_mm256_set1_ps(F::Scale(r3, c, si)), a3, t3);
    if constexpr (F::kZero) {
      const float qs = SegSum(q + s0, seg);
      z[0] += qs * F::Zero(r0, c, si);
      z[1] += qs * F::Zero(r1, c, si);
      z[2] += qs * F::Zero(r2, c, si);
      z[3] += qs * F::Zero(r3, c, si);
    }
  }
  out[0] = (HSum(t0) + z[0]) * scale;
  out[1] = (HSum(t1) + z[1]) * scale;
  out[2] = (HSum(t2) + z[2]) * scale;
  out[3] = (HSum(t3) + z[3]) * scale;
}

template <class F>
inline float Dot1Fused(const float* q, const uint8_t* row, const HeadCtx& c, int64_t hd) {
  const int64_t seg = F::kSeg ? F::kSeg : hd;
  __m256 t = _mm256_setzero_ps();
  float z = 0;
  for (int64_t s0 = 0, si = 0; s0 < hd; s0 += seg, ++si) {
    __m256 a = _mm256_setzero_ps();
    for (int64_t d = s0; d < s0 + seg; d += 8)
      a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), F::Raw8(row, c, d), a);
    t = _mm256_fmadd_ps(_mm256_set1_ps(F::Scale(row, c, si)), a, t);
    if constexpr (F::kZero) z += SegSum(q + s0, seg) * F::Zero(row, c, si);
  }
  return HSum(t) + z;
}

// Scores of `cnt` rows `stride` bytes apart for every query head of the group.
template <class F>
inline void ScoreRun(const float* q0, int32_t group, int64_t hd, const uint8_t* rows, size_t stride,
                     int64_t cnt, const HeadCtx& c, float scale, float* s, int64_t s_stride) {
  for (int32_t g = 0; g < group; ++g) {
    const float* q = q0 + g * hd;
    float* sg = s + g * s_stride;
    int64_t j = 0;
    for (; j + 4 <= cnt; j += 4) Dot4Fused<F>(q, rows + j * stride, stride, c, hd, scale, sg + j);
    for (; j < cnt; ++j) sg[j] = Dot1Fused<F>(q, rows + j * stride, c, hd) * scale;
  }
}

// Scores of positions [0, end) from per-token paged rows, block by block.
template <class F>
void ScoresFused(const AttentionArgs& a, int32_t kvh, const float* q0, int32_t group, int64_t end,
                 int64_t n_kv, float* scratch) {
  const KvPageView& k = a.k;
  const int64_t bt = k.block_tokens;
  const HeadCtx c = MakeHeadCtx(k, kvh);
  for (int64_t p0 = 0; p0 < end; p0 += bt) {
    const uint8_t* kb = k.base + static_cast<size_t>(k.block_table[p0 / bt]) * k.block_stride;
    ScoreRun<F>(q0, group, a.head_dim, kb, k.token_stride, std::min<int64_t>(bt, end - p0), c,
                a.scale, scratch + p0, n_kv);
  }
}

// Scores of positions [begin, n_kv) from the residual window's f16 rows.
void ScoresWindow(const AttentionArgs& a, int32_t kvh, const float* q0, int32_t group,
                  int64_t begin, int64_t n_kv, float* scratch) {
  const KvPageView& k = a.k;
  HeadCtx c;
  c.begin = static_cast<int64_t>(kvh) * a.head_dim;
  ScoreRun<FmtF16>(q0, group, a.head_dim,
                   k.recent + static_cast<size_t>(begin - k.recent_begin) * k.recent_stride,
                   k.recent_stride, n_kv - begin, c, a.scale, scratch + begin, n_kv);
}

// KIVI keys, positions [0, end) (whole groups of 32 tokens, each one row): per channel the 32
// codes of a group expand into 4 vectors of 8 tokens, so q . k = sum_c (q_c s_c) code_c,t +
// sum_c q_c mn_c runs 8 tokens per FMA without dequantizing anything.
template <int kBits>
void ScoresKiviKeys(const AttentionArgs& a, int32_t kvh, const float* q0, int32_t group,
                    int64_t end, int64_t n_kv, float* scratch) {
  const KvPageView& k = a.k;
  const int64_t hd = a.head_dim, values = k.row_values, begin = static_cast<int64_t>(kvh) * hd;
  constexpr int64_t kChannelBytes = kvquant::kKiviGroup * kBits / 8;
  const __m256i shifts = kBits == 2 ? _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)
                                    : _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const __m256i mask = _mm256_set1_epi32((1 << kBits) - 1);
  for (int64_t p0 = 0; p0 < end; p0 += kvquant::kKiviGroup) {
    const uint8_t* row = k.Token(p0);
    const uint8_t* scales = row + values * kChannelBytes;
    const int64_t cnt = std::min<int64_t>(kvquant::kKiviGroup, end - p0);
    for (int32_t g = 0; g < group; ++g) {
      const float* q = q0 + g * hd;
      __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                       _mm256_setzero_ps()};
      float zsum = 0;
      for (int64_t ch = 0; ch < hd; ++ch) {
        const int64_t cc = begin + ch;
        const float step = _cvtsh_ss(LoadU16(scales + 4 * cc));
        zsum += q[ch] * _cvtsh_ss(LoadU16(scales + 4 * cc + 2));
        const __m256 qs = _mm256_set1_ps(q[ch] * step);
        const uint8_t* codes = row + cc * kChannelBytes;
        for (int t8 = 0; t8 < 4; ++t8) {
          uint32_t chunk = 0;
          std::memcpy(&chunk, codes + t8 * kBits, kBits);
          const __m256i c8 = _mm256_and_si256(
              _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(chunk)), shifts), mask);
          acc[t8] = _mm256_fmadd_ps(qs, _mm256_cvtepi32_ps(c8), acc[t8]);
        }
      }
      alignas(32) float out[kvquant::kKiviGroup];
      for (int t8 = 0; t8 < 4; ++t8) _mm256_store_ps(out + 8 * t8, acc[t8]);
      float* s = scratch + g * n_kv + p0;
      for (int64_t t = 0; t < cnt; ++t) s[t] = (out[t] + zsum) * a.scale;
    }
  }
}

// o[d0 .. d0 + 8*NREG) += sum_p w[p] * V[p][d0 ..] for the rows of `walk` (which calls its
// argument with each row and the row's weight), segment scales folded into the weight.
template <class F, int NREG, class Walk>
void AccumulateChunk(const HeadCtx& c, int64_t d0, float* o, Walk&& walk) {
  __m256 acc[NREG];
  for (int r = 0; r < NREG; ++r) acc[r] = _mm256_loadu_ps(o + d0 + 8 * r);
  walk([&](const uint8_t* row, float w) {
    if constexpr (F::kSeg == 0) {
      const __m256 vw = _mm256_set1_ps(w * F::Scale(row, c, 0));
      for (int r = 0; r < NREG; ++r)
        acc[r] = _mm256_fmadd_ps(vw, F::Raw8(row, c, d0 + 8 * r), acc[r]);
    } else {
      // d0 is a multiple of 64, so registers 4k..4k+3 share one 32-value segment.
      for (int r0 = 0; r0 < NREG; r0 += 4) {
        const int64_t seg = (d0 + 8 * r0) / F::kSeg;
        const __m256 vw = _mm256_set1_ps(w * F::Scale(row, c, seg));
        __m256 vz = _mm256_setzero_ps();
        if constexpr (F::kZero) vz = _mm256_set1_ps(w * F::Zero(row, c, seg));
        for (int r = r0; r < std::min(r0 + 4, NREG); ++r) {
          acc[r] = _mm256_fmadd_ps(vw, F::Raw8(row, c, d0 + 8 * r), acc[r]);
          if constexpr (F::kZero) acc[r] = _mm256_add_ps(acc[r], vz);
        }
      }
    }
  });
  for (int r = 0; r < NREG; ++r) _mm256_storeu_ps(o + d0 + 8 * r, acc[r]);
}

template <class F, class Walk>
void AccumulateHead(const HeadCtx& c, int64_t hd, float* o, Walk&& walk) {
  for (int64_t d0 = 0; d0 < hd; d0 += 64) {
    switch (std::min<int64_t>(8, (hd - d0) / 8)) {
      case 1:
        AccumulateChunk<F, 1>(c, d0, o, walk);
        break;
      case 2:
        AccumulateChunk<F, 2>(c, d0, o, walk);
        break;
      case 3:
        AccumulateChunk<F, 3>(c, d0, o, walk);
        break;
      case 4:
        AccumulateChunk<F, 4>(c, d0, o, walk);
        break;
      case 5:
        AccumulateChunk<F, 5>(c, d0, o, walk);
        break;
      case 6:
        AccumulateChunk<F, 6>(c, d0, o, walk);
        break;
      case 7:
        AccumulateChunk<F, 7>(c, d0, o, walk);
        break;
      default:
        AccumulateChunk<F, 8>(c, d0, o, walk);
        break;
    }
  }
}

// Paged per-token rows of positions [0, end).
template <class F>
void ValuesFused(const KvPageView& v, int32_t kvh, int64_t hd, int64_t end, const float* w,
                 float* o) {
  const int64_t bt = v.block_tokens;
  AccumulateHead<F>(MakeHeadCtx(v, kvh), hd, o, [&](auto&& add) {
    for (int64_t p0 = 0; p0 < end; p0 += bt) {
      const uint8_t* row = v.base + static_cast<size_t>(v.block_table[p0 / bt]) * v.block_stride;
      const int64_t cnt = std::min<int64_t>(bt, end - p0);
      for (int64_t j = 0; j < cnt; ++j, row += v.token_stride) add(row, w[p0 + j]);
    }
  });
}

// The residual window's f16 rows of positions [begin, n_kv).
void ValuesWindow(const KvPageView& v, int32_t kvh, int64_t hd, int64_t begin, int64_t n_kv,
                  const float* w, float* o) {
  HeadCtx c;
  c.begin = static_cast<int64_t>(kvh) * hd;
  AccumulateHead<FmtF16>(c, hd, o, [&](auto&& add) {
    const uint8_t* row = v.recent + static_cast<size_t>(begin - v.recent_begin) * v.recent_stride;
    for (int64_t p = begin; p < n_kv; ++p, row += v.recent_stride) add(row, w[p]);
  });
}

// Calls fn.template operator()<Fmt>() for a fused-readable dtype.
template <class Fn>
void WithFormat(KvDtype d, Fn&& fn) {
  switch (d) {
    case KvDtype::kF32:
      return fn.template operator()<FmtF32>();
    case KvDtype::kF16:
      return fn.template operator()<FmtF16>();
    case KvDtype::kBf16:
      return fn.template operator()<FmtBf16>();
    case KvDtype::kFp8E4M3:
      return fn.template operator()<FmtFp8<true>>();
    case KvDtype::kFp8E5M2:
      return fn.template operator()<FmtFp8<false>>();
    case KvDtype::kInt8:
      return fn.template operator()<FmtInt8>();
    case KvDtype::kQ8_0:
      return fn.template operator()<FmtQ8_0>();
    case KvDtype::kQ4_0:
      return fn.template operator()<FmtQ4_0>();
    case KvDtype::kKivi2:
      return fn.template operator()<FmtKiviV<2>>();
    case KvDtype::kKivi4:
      return fn.template operator()<FmtKiviV<4>>();
    case KvDtype::kKvQuant3:  // never fused (FusedOk)
      return;
    case KvDtype::kTurbo3:
    case KvDtype::kTurbo4:
      return;  // never fused (FusedOk): TurboScoresAvx2 / TurboValuesAvx2
  }
}

// Tiles over positions [from, to), for views no fused reader handles.
void ScoresTiled(const AttentionArgs& a, int32_t kvh, const float* q0, int32_t group, int64_t from,
                 int64_t to, int64_t n_kv, float* tile, float* scratch) {
  for (int64_t p0 = from; p0 < to;) {
    const int64_t cnt = TileLen(a.k, p0, to);
    DecodeTile(a.k, p0, cnt, kvh, tile);
    for (int32_t g = 0; g < group; ++g)
      ScoreTile(q0 + g * a.head_dim, tile, cnt, a.head_dim, a.scale, scratch + g * n_kv + p0);
    p0 += cnt;
  }
}

void ValuesTiled(const AttentionArgs& a, int32_t kvh, float* o0, int32_t group, int64_t from,
                 int64_t to, int64_t n_kv, float* tile, const float* scratch) {
  for (int64_t p0 = from; p0 < to;) {
    const int64_t cnt = TileLen(a.v, p0, to);
    DecodeTile(a.v, p0, cnt, kvh, tile);
    for (int32_t g = 0; g < group; ++g)
      AccumulateTile(tile, cnt, a.head_dim, scratch + g * n_kv + p0, o0 + g * a.head_dim);
    p0 += cnt;
  }
}

// Prefill with tiled K or V (kvquant3 rows, turbo rows read in the rotated domain, head widths
// that are not a multiple of 8, blocks spanning heads): the queries of a chunk are taken
// kQueryBlock at a time and every decoded tile serves all of them, so each row is decoded once per
// block instead of once per query (a chunk of n queries over a cache of n tokens would otherwise
// decode n^2 / 2 rows per head). Each query gets its own score rows in a thread-local buffer; the
// fused, KIVI, turbo and window readers run per query as in the one-query loop.
constexpr int64_t kQueryBlock = 16;

struct BlockCtx {
  bool simd = false, k_fused = false, v_fused = false, k_kivi = false, k_turbo = false,
       v_turbo = false, k_tiled = false, v_tiled = false;
};

void AttentionBlock(const AttentionArgs& a, const BlockCtx& c, int32_t kvh, int64_t i0, int64_t i1,
                    float* tile, std::vector<float>& sbuf, std::vector<float>& rbuf) {
  const int32_t group = a.n_head / a.n_kv_head;
  const int64_t hd = a.head_dim, vd = a.VDim();
  const int64_t n_max = a.slot0 + i1;  // the longest causal range in the block
  const size_t region = static_cast<size_t>(group * n_max);
  const size_t need = region * static_cast<size_t>(i1 - i0);
  if (sbuf.size() < need) sbuf.resize(need);
  // Turbo rows without QJL are tiled too, in the rotated domain: queries are rotated once into
  // rbuf's first half, outputs summed rotated in its second half and rotated back at the end.
  // (A single query keeps the turbo kernels, which read the codes without a tile buffer.)
  const bool many = i1 - i0 > 1;
  const bool k_rot = many && c.k_turbo && !a.k.turbo->qjl, v_rot = many && c.v_turbo;
  const size_t per_q = static_cast<size_t>(group * hd);
  if (k_rot || v_rot) rbuf.assign(2 * per_q * static_cast<size_t>(i1 - i0), 0.0f);
  auto scores = [&](int64_t i) { return sbuf.data() + region * static_cast<size_t>(i - i0); };
  auto q_of = [&](int64_t i) {
    return a.q + i * a.q_stride + static_cast<int64_t>(kvh) * group * hd;
  };
  auto o_of = [&](int64_t i) {
    return a.out + i * a.out_stride + static_cast<int64_t>(kvh) * group * vd;
  };
  auto qrot = [&](int64_t i) { return rbuf.data() + per_q * static_cast<size_t>(i - i0); };
  auto orot = [&](int64_t i) {
    return rbuf.data() + per_q * static_cast<size_t>(i1 - i0 + (i - i0));
  };
  if (k_rot)
    for (int64_t i = i0; i < i1; ++i)
      for (int32_t g = 0; g < group; ++g) TurboRotate(a.k, q_of(i) + g * hd, qrot(i) + g * hd);
  // Keys.
  if (c.k_tiled || k_rot) {
    const int64_t k_end = std::min(n_max, a.k.recent_begin);
    for (int64_t p0 = 0; p0 < k_end;) {
      const int64_t cnt = TileLen(a.k, p0, k_end);
      if (k_rot) {
        TurboDecodeRotatedTile(a.k, p0, cnt, kvh, tile);
      } else {
        DecodeTile(a.k, p0, cnt, kvh, tile);
      }
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t n_kv = a.slot0 + i + 1;
        const int64_t use = std::min(cnt, std::min(n_kv, a.k.recent_begin) - p0);
        const float* q = k_rot ? qrot(i) : q_of(i);
        for (int32_t g = 0; use > 0 && g < group; ++g)
          ScoreTile(q + g * hd, tile, use, hd, a.scale, scores(i) + g * n_kv + p0);
      }
      p0 += cnt;
    }
  }
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t n_kv = a.slot0 + i + 1;
    const int64_t k_paged = std::min(n_kv, a.k.recent_begin);
    float* s = scores(i);
    const float* q0 = q_of(i);
    if (c.k_turbo && !k_rot) {
      TurboScoresAvx2(a, kvh, q0, group, k_paged, n_kv, s);
    } else if (c.k_kivi) {
      if (a.k.dtype == KvDtype::kKivi2) {
        ScoresKiviKeys<2>(a, kvh, q0, group, k_paged, n_kv, s);
      } else {
        ScoresKiviKeys<4>(a, kvh, q0, group, k_paged, n_kv, s);
      }
    } else if (c.k_fused) {
      WithFormat(a.k.dtype,
                 [&]<class F>() { ScoresFused<F>(a, kvh, q0, group, k_paged, n_kv, s); });
    }
    if (k_paged < n_kv) {
      if (c.simd) {
        ScoresWindow(a, kvh, q0, group, k_paged, n_kv, s);
      } else {
        ScoresTiled(a, kvh, q0, group, k_paged, n_kv, n_kv, tile, s);
      }
    }
    for (int32_t g = 0; g < group; ++g) {
      MaskDeadSlots(a, s + g * n_kv, n_kv);
      SoftmaxAvx2(s + g * n_kv, n_kv);
      ClearDeadWeights(a, s + g * n_kv, n_kv);
      ObserveWeights(a, i, s + g * n_kv, n_kv);
    }
    float* o0 = o_of(i);
    for (int32_t g = 0; g < group; ++g) std::fill(o0 + g * vd, o0 + (g + 1) * vd, 0.0f);
  }
  // Values.
  if (c.v_tiled || v_rot) {
    const int64_t v_end = std::min(n_max, a.v.recent_begin);
    for (int64_t p0 = 0; p0 < v_end;) {
      const int64_t cnt = TileLen(a.v, p0, v_end);
      if (v_rot) {
        TurboDecodeRotatedTile(a.v, p0, cnt, kvh, tile);
      } else {
        DecodeTile(a.v, p0, cnt, kvh, tile);
      }
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t n_kv = a.slot0 + i + 1;
        const int64_t use = std::min(cnt, std::min(n_kv, a.v.recent_begin) - p0);
        float* o = v_rot ? orot(i) : o_of(i);
        for (int32_t g = 0; use > 0 && g < group; ++g)
          AccumulateTile(tile, use, hd, scores(i) + g * n_kv + p0, o + g * hd);
      }
      p0 += cnt;
    }
  }
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t n_kv = a.slot0 + i + 1;
    const int64_t v_paged = std::min(n_kv, a.v.recent_begin);
    const float* s = scores(i);
    float* o0 = o_of(i);
    if (v_rot) {
      for (int32_t g = 0; g < group; ++g) TurboUnrotateAdd(a.v, orot(i) + g * hd, o0 + g * hd);
    } else if (c.v_turbo) {
      TurboValuesAvx2(a, kvh, group, v_paged, n_kv, s, o0);
    } else if (c.v_fused) {
      for (int32_t g = 0; g < group; ++g)
        WithFormat(a.v.dtype, [&]<class F>() {
          ValuesFused<F>(a.v, kvh, vd, v_paged, s + g * n_kv, o0 + g * vd);
        });
    }
    if (v_paged < n_kv) {
      if (c.simd) {
        for (int32_t g = 0; g < group; ++g)
          ValuesWindow(a.v, kvh, hd, v_paged, n_kv, s + g * n_kv, o0 + g * hd);
      } else {
        ValuesTiled(a, kvh, o0, group, v_paged, n_kv, n_kv, tile, s);
      }
    }
  }
}

}  // namespace

void AttentionQuantAvx2(const AttentionArgs& a, int32_t kvh_begin, int32_t kvh_end,
                        float* scratch /*scores live in a per-thread buffer, one row per query;
                                         the reference fallback uses this one*/) {
  const int64_t hd = a.head_dim;
  // SIMD readers need whole 8-value chunks; other head widths decode tiles (with scalar tails).
  const bool simd = hd % 8 == 0;
  // A V head narrower than K (MLA latents) is read by the fused readers only.
  if (a.VDim() != hd && (!simd || a.VDim() % 8 != 0 || !FusedOk(a.v) || a.v.recent != nullptr ||
                         a.v.turbo != nullptr))
    return ReferenceTable().attention(a, kvh_begin, kvh_end, scratch);
  BlockCtx c;
  c.simd = simd;
  c.k_fused = simd && FusedOk(a.k);
  c.v_fused = simd && FusedOk(a.v);
  c.k_kivi = simd && a.k.row_tokens > 1;
  c.k_turbo = simd && a.k.turbo != nullptr;
  c.v_turbo = simd && a.v.turbo != nullptr;
  c.k_tiled = !c.k_turbo && !c.k_kivi && !c.k_fused;
  c.v_tiled = !c.v_turbo && !c.v_fused;
  // One tile of decoded rows per thread, reused across calls (kTile x head_dim floats).
  thread_local std::vector<float> tile_buf, sbuf, rbuf;
  if (tile_buf.size() < static_cast<size_t>(kTile * hd))
    tile_buf.resize(static_cast<size_t>(kTile * hd));
  for (int64_t i0 = 0; i0 < a.n_q; i0 += kQueryBlock)
    for (int32_t kvh = kvh_begin; kvh < kvh_end; ++kvh)
      AttentionBlock(a, c, kvh, i0, std::min(a.n_q, i0 + kQueryBlock), tile_buf.data(), sbuf, rbuf);
}

}  // namespace kvforge::kernels::internal
