// AVX-512F matmul kernels. This translation unit alone (with gemm_avx512.cc) is compiled with
// -mavx512f (plus the AVX2 set); dispatch.cc calls it only after checking that the CPU and the OS
// support AVX-512 state. Everything else in the "avx512" table is the AVX2 kernels'.
// It calls no inline function of a shared header, so no AVX-512 copy of one can be the copy the
// linker keeps for callers on other CPUs (ctest avx512_units_define_no_weak_symbols checks).
//
// Why only the matmuls: they are ~90% of prefill, and on cores with full-width 512-bit units
// (Zen 5, Intel server cores) a zmm FMA does twice the work of a ymm one at the same issue rate
// (dev machine: 210 vs 105 GFLOP/s per core, register-only loops). Float weights in calls of 3
// or more tokens take the zmm dot tile below, quantized weights in large batches the packed GEMM
// with an AVX-512 tile (gemm_avx512.cc). Decode (memory-bound), the quantized formats'
// small-batch integer paths, the dequantizers and attention stay AVX2 until measured otherwise.
#include <cstring>
#include <type_traits>

#include "kernels/avx512_intrinsics.h"
#include "kernels/kernels.h"
#include "kernels/kernels_common.h"

namespace kvforge::kernels::internal {
namespace {

// 16 weights of a row from value i, as floats.
template <WType W>
inline __m512 LoadW16(const uint8_t* row, int64_t i) {
  if constexpr (W == WType::kF32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + i);
  } else if constexpr (W == WType::kF16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

template <WType W>
constexpr size_t WeightBytes() {
  return W == WType::kF32 ? 4 : 2;
}

// R weight rows x T tokens of dot products: out[r * T + t] = dot(row r, x_t).
// One accumulator per output, whatever R and T, and the same lane order and final reduction, so
// an output's value does not depend on which tile computed it: a token's outputs are the same in
// every batch of at least kMinTokens tokens (smaller calls run the AVX2 kernel, whose rounding
// differs).
// Per 16 columns: R weight loads (converted once) and T activation loads feed R x T FMAs.
template <WType W, int R, int T>
inline void DotTile(const uint8_t* row0, size_t row_bytes, const float* const* xs, int64_t cols,
                    float* out /* [R][T] */) {
  __m512 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= cols; i += 16) {
    __m512 w[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) w[r] = LoadW16<W>(row0 + static_cast<size_t>(r) * row_bytes, i);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 x = _mm512_loadu_ps(xs[t] + i);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(w[r], x, acc[r][t]);
    }
  }
  if (i < cols) {
    // The last cols % 16 values take the same vector steps, zero-padded: weights copied into a
    // zeroed 16-value buffer, activations read with a mask.
    const int64_t n = cols - i;
    const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
    constexpr size_t kW = WeightBytes<W>();
    __m512 w[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      alignas(64) uint8_t pad[16 * kW] = {};
      std::memcpy(pad, row0 + static_cast<size_t>(r) * row_bytes + kW * static_cast<size_t>(i),
                  kW * static_cast<size_t>(n));
      w[r] = LoadW16<W>(pad, 0);
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 x = _mm512_maskz_loadu_ps(m, xs[t] + i);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(w[r], x, acc[r][t]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) out[r * T + t] = HSum16(acc[r][t]);
}

// The main tile: 6 rows x 4 tokens = 24 accumulators, 6 weight and 1 activation register (31 of
// the 32 zmm). Measured on the dev machine (BM_Gemm avx512_F16, one thread, 2048x2048x512):
// 6x4 183, 4x6 175, 8x3 155 GFLOP/s; 3x8 and 2x12 spill.
inline constexpr int kRows = 6;
inline constexpr int kToks = 4;
// Calls with fewer tokens run the AVX2 kernel (MatMulRowsAvx512).
inline constexpr int64_t kMinTokens = 3;
static_assert(kToks == 4, "MatMulFloat's remainder switch handles 1 to 3 tokens");

// Small calls (a speculative verify of 1 + k tokens) pay one pass over the weights per token
// tile: a 4 x 5 tile (20 accumulators) covers 5 tokens in one pass where the 6 x 4 one needs two,
// so 5, 9, 10, 13, 14 and 15 tokens take 5-token tiles (9: 5 + 4, two passes instead of three).
inline constexpr int kRows5 = 4;
inline constexpr int64_t kMaxTokensFor5 = 15;
inline bool FiveTokenTiles(int64_t n_tok) {
  return n_tok <= kMaxTokensFor5 && (n_tok + 4) / 5 < (n_tok + 3) / 4;
}

// Tokens [t, t + T) against rows [rb, re) of one row block: full R-row tiles, then single rows.
template <WType W, int T, int R = kRows>
void RowBlockTokens(const uint8_t* weights, size_t row_bytes, int64_t cols, const float* const* xs,
                    float* y, int64_t y_stride, int64_t t, int64_t rb, int64_t re) {
  float out[R * T];
  int64_t r = rb;
  for (; r + R <= re; r += R) {
    DotTile<W, R, T>(weights + static_cast<size_t>(r) * row_bytes, row_bytes, xs, cols, out);
    for (int q = 0; q < R; ++q)
      for (int k = 0; k < T; ++k) y[(t + k) * y_stride + r + q] = out[q * T + k];
  }
  for (; r < re; ++r) {
    DotTile<W, 1, T>(weights + static_cast<size_t>(r) * row_bytes, row_bytes, xs, cols, out);
    for (int k = 0; k < T; ++k) y[(t + k) * y_stride + r] = out[k];
  }
}

template <WType W>
void MatMulFloat(const uint8_t* weights, size_t row_bytes, int64_t cols, const uint8_t* x,
                 int64_t n_tok, float* y, int64_t y_stride, int64_t r0, int64_t r1) {
  const size_t x_row = PreparedRowBytes(W, cols);
  const int64_t row_block = L2RowBlock(row_bytes, kRows);  // stays in L2 for every tile
  for (int64_t rb = r0; rb < r1; rb += row_block) {
    const int64_t re = rb + row_block < r1 ? rb + row_block : r1;
    int64_t t = 0;
    auto run = [&](auto nt_tag) {
      constexpr int T = decltype(nt_tag)::value;
      constexpr int R = T == 5 ? kRows5 : kRows;
      const float* xs[T];
      for (int k = 0; k < T; ++k) xs[k] = reinterpret_cast<const float*>(x + (t + k) * x_row);
      RowBlockTokens<W, T, R>(weights, row_bytes, cols, xs, y, y_stride, t, rb, re);
      t += T;
    };
    if (FiveTokenTiles(n_tok))
      while (n_tok - t >= 5) run(std::integral_constant<int, 5>());
    while (n_tok - t >= kToks) run(std::integral_constant<int, kToks>());
    switch (n_tok - t) {
      case 3:
        run(std::integral_constant<int, 3>());
        break;
      case 2:
        run(std::integral_constant<int, 2>());
        break;
      case 1:
        run(std::integral_constant<int, 1>());
        break;
      default:
        break;
    }
  }
}

// Decode (1 or 2 tokens): the weights stream from memory once per call and the arithmetic is
// cheap, so the loop is shaped for the memory system, as ggml's vec_dot is: one row at a time (a
// single sequential stream per thread, which the hardware prefetcher follows; two rows at once
// ran at 0.75x, the 6-row tiles lost more, ADR 0016) and 64 values per step into four
// accumulators per token. For f16 and bf16 weights the activations are rounded to f16 once per
// call (as ggml does for f16; for bf16 ggml rounds them to bf16, coarser), so each step's
// activation loads are half as wide: with the weights missing
// the caches, the load slots they free are what lets the stream run faster. Measured on Zen 4
// (one thread over a 1.1B f16 model's 2 GB of matrices, as decode reads them): f32 activations
// 18.8-20.4 GB/s, f16 activations 22.7-24.8 GB/s.

// x[n] as f16 into out[n], unless some |x| is beyond f16's range (returns false: the caller
// keeps the float activations).
inline bool RoundToHalf(const float* x, int64_t n, uint16_t* out) {
  const __m512 limit = _mm512_set1_ps(65504.0f);
  __mmask16 over = 0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    over |= _mm512_cmp_ps_mask(_mm512_abs_ps(v), limit, _CMP_NLE_UQ);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    over |= _mm512_cmp_ps_mask(_mm512_abs_ps(v), limit, _CMP_NLE_UQ);
    alignas(32) uint16_t tail[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(tail),
                       _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    std::memcpy(out + i, tail, static_cast<size_t>(n - i) * 2);
  }
  return over == 0;
}

// Activation value i of a token: a float, or (XHalf) an f16 code.
template <bool XHalf>
inline __m512 LoadX16(const void* x, int64_t i) {
  if constexpr (XHalf) {
    return _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(x) + i)));
  } else {
    return _mm512_loadu_ps(static_cast<const float*>(x) + i);
  }
}

template <bool XHalf>
inline __m512 MaskedLoadX16(const void* x, int64_t i, int64_t n) {
  if constexpr (XHalf) {
    alignas(32) uint16_t pad[16] = {};  // (a masked 16-bit load would need AVX512BW)
    std::memcpy(pad, static_cast<const uint16_t*>(x) + i, static_cast<size_t>(n) * 2);
    return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(pad)));
  } else {
    const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
    return _mm512_maskz_loadu_ps(m, static_cast<const float*>(x) + i);
  }
}

// out[t] = dot(row, x_t) for T tokens, one weight stream.
template <WType W, int T, bool XHalf>
inline void DotRowStream(const uint8_t* row, const void* const* xs, int64_t cols,
                         float* out /* [T] */) {
  __m512 acc[T][4];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) acc[t][k] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= cols; i += 64) {
    __m512 w[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) w[k] = LoadW16<W>(row, i + 16 * k);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t)
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k)
        acc[t][k] = _mm512_fmadd_ps(w[k], LoadX16<XHalf>(xs[t], i + 16 * k), acc[t][k]);
  }
  for (; i + 16 <= cols; i += 16) {
    const __m512 w = LoadW16<W>(row, i);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[t][0] = _mm512_fmadd_ps(w, LoadX16<XHalf>(xs[t], i), acc[t][0]);
  }
  if (i < cols) {
    // The last cols % 16 values, zero-padded as in DotTile.
    const int64_t n = cols - i;
    constexpr size_t kW = WeightBytes<W>();
    alignas(64) uint8_t pad[16 * kW] = {};
    std::memcpy(pad, row + kW * static_cast<size_t>(i), kW * static_cast<size_t>(n));
    const __m512 w = LoadW16<W>(pad, 0);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t)
      acc[t][0] = _mm512_fmadd_ps(w, MaskedLoadX16<XHalf>(xs[t], i, n), acc[t][0]);
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t)
    out[t] = HSum16(
        _mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]), _mm512_add_ps(acc[t][2], acc[t][3])));
}

template <WType W, int T, bool XHalf>
void MatVecRows(const uint8_t* weights, size_t row_bytes, int64_t cols, const void* const* xs,
                float* y, int64_t y_stride, int64_t r0, int64_t r1) {
  float out[T];
  for (int64_t r = r0; r < r1; ++r) {
    DotRowStream<W, T, XHalf>(weights + static_cast<size_t>(r) * row_bytes, xs, cols, out);
    for (int k = 0; k < T; ++k) y[k * y_stride + r] = out[k];
  }
}

// The f16 copies of a call's activations: [2][kMaxHalfCols]. A plain array (no constructor), so
// this unit still instantiates no inline function of a shared header.
inline constexpr int64_t kMaxHalfCols = 32768;
thread_local uint16_t t_half_x[2][kMaxHalfCols];

template <WType W, int T>
void MatVecFloat(const uint8_t* weights, size_t row_bytes, int64_t cols, const uint8_t* x, float* y,
                 int64_t y_stride, int64_t r0, int64_t r1, bool exact) {
  const size_t x_row = PreparedRowBytes(W, cols);
  const void* xs[T];
  for (int k = 0; k < T; ++k) xs[k] = x + k * x_row;
  if constexpr (W == WType::kF16 || W == WType::kBF16) {
    bool half = !exact && cols <= kMaxHalfCols;
    for (int k = 0; k < T && half; ++k)
      half = RoundToHalf(static_cast<const float*>(xs[k]), cols, t_half_x[k]);
    if (half) {
      const void* hs[T];
      for (int k = 0; k < T; ++k) hs[k] = t_half_x[k];
      return MatVecRows<W, T, true>(weights, row_bytes, cols, hs, y, y_stride, r0, r1);
    }
  }
  MatVecRows<W, T, false>(weights, row_bytes, cols, xs, y, y_stride, r0, r1);
}

template <WType W>
void MatMulFloatSmall(const uint8_t* weights, size_t row_bytes, int64_t cols, const uint8_t* x,
                      int64_t n_tok, float* y, int64_t y_stride, int64_t r0, int64_t r1,
                      bool exact) {
  if (n_tok == 1) return MatVecFloat<W, 1>(weights, row_bytes, cols, x, y, y_stride, r0, r1, exact);
  MatVecFloat<W, 2>(weights, row_bytes, cols, x, y, y_stride, r0, r1, exact);
}

void MatMulRowsAvx512Impl(WType w, const uint8_t* weights, size_t row_bytes, int64_t cols,
                          const uint8_t* x, int64_t n_tok, float* y, int64_t y_stride, int64_t r0,
                          int64_t r1, bool exact) {
  // Quantized weights in large batches: the packed GEMM with the AVX-512 tile (gemm_avx512.cc).
  if (UsesPackedGemm(w, n_tok))
    return PackedGemmAvx512(w, weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
  // Fewer float-weight tokens (decode): the AVX2 kernel. There the weights stream from memory,
  // and the zmm tiles were slower (110M f16 tg128, same run: 6-row tiles 0.61x of AVX2, 0.76x
  // with a prefetch of the next rows, one row per tile ~0.9x), while from 3 tokens on they are
  // ahead (bench batched S_TG: B=3 1.04x, B=4-16 1.34-1.36x). Quantized weights in small
  // batches take the AVX2 integer paths (the default case).
  if (n_tok < kMinTokens) {
    switch (w) {
      case WType::kF32:
        return MatMulFloatSmall<WType::kF32>(weights, row_bytes, cols, x, n_tok, y, y_stride, r0,
                                             r1, exact);
      case WType::kF16:
        return MatMulFloatSmall<WType::kF16>(weights, row_bytes, cols, x, n_tok, y, y_stride, r0,
                                             r1, exact);
      case WType::kBF16:
        return MatMulFloatSmall<WType::kBF16>(weights, row_bytes, cols, x, n_tok, y, y_stride, r0,
                                              r1, exact);
      default:
        return kAvx2Table.matmul_rows(w, weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
    }
  }
  // bf16 weights on a CPU with AVX512_BF16: vdpbf16ps on bf16-rounded activations
  // (gemm_avx512_bf16.cc; BENCHMARKS.md, #46).
  if (w == WType::kBF16 && !exact && CpuHasAvx512Bf16() &&
      MatMulBf16Dot(weights, row_bytes, cols, reinterpret_cast<const float*>(x), n_tok, y, y_stride,
                    r0, r1))
    return;
  switch (w) {
    case WType::kF32:
      return MatMulFloat<WType::kF32>(weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
    case WType::kF16:
      return MatMulFloat<WType::kF16>(weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
    case WType::kBF16:
      return MatMulFloat<WType::kBF16>(weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
    default:
      return kAvx2Table.matmul_rows(w, weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
  }
}

void MatMulRowsAvx512(WType w, const uint8_t* weights, size_t row_bytes, int64_t cols,
                      const uint8_t* x, int64_t n_tok, float* y, int64_t y_stride, int64_t r0,
                      int64_t r1) {
  MatMulRowsAvx512Impl(w, weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1, false);
}

void MatMulRowsExactAvx512(WType w, const uint8_t* weights, size_t row_bytes, int64_t cols,
                           const uint8_t* x, int64_t n_tok, float* y, int64_t y_stride, int64_t r0,
                           int64_t r1) {
  MatMulRowsAvx512Impl(w, weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1, true);
}

// 24 independent 16-lane FMA chains (more than 4 cycles x 2 pipes), distinct starting values
// and an opaque barrier per round so the compiler cannot fold the chains into one.
int64_t FmaLoopAvx512(int64_t iterations) {
  __m512 a[24];
#pragma GCC unroll 24
  for (int i = 0; i < 24; ++i) a[i] = _mm512_set1_ps(0.1f + 0.01f * static_cast<float>(i));
  const __m512 m = _mm512_set1_ps(0.9999f), b = _mm512_set1_ps(1e-4f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) a[i] = _mm512_fmadd_ps(a[i], m, b);
    // Two statements: gcc allows at most 30 operands in one asm, and "+v" counts twice.
    asm volatile(""
                 : "+v"(a[0]), "+v"(a[1]), "+v"(a[2]), "+v"(a[3]), "+v"(a[4]), "+v"(a[5]),
                   "+v"(a[6]), "+v"(a[7]), "+v"(a[8]), "+v"(a[9]), "+v"(a[10]), "+v"(a[11]));
    asm volatile(""
                 : "+v"(a[12]), "+v"(a[13]), "+v"(a[14]), "+v"(a[15]), "+v"(a[16]), "+v"(a[17]),
                   "+v"(a[18]), "+v"(a[19]), "+v"(a[20]), "+v"(a[21]), "+v"(a[22]), "+v"(a[23]));
  }
  __m512 s = a[0];
#pragma GCC unroll 24
  for (int i = 1; i < 24; ++i) s = _mm512_add_ps(s, a[i]);
  volatile float sink = HSum16(s);
  (void)sink;
  return iterations * 24 * 16 * 2;
}

// The rest is the AVX2 table's, called through forwarders so that this table is constant-
// initialized (no dependence on the order in which translation units are initialized).
void PrepareActFwd(WType w, const float* x, void* dst, int64_t cols) {
  kAvx2Table.prepare_act(w, x, dst, cols);
}
void RmsNormFwd(const float* x, const float* weight, float* out, int64_t n, float eps) {
  kAvx2Table.rms_norm(x, weight, out, n, eps);
}
void SwigluFwd(const float* gate, const float* up, float* out, int64_t n) {
  kAvx2Table.swiglu(gate, up, out, n);
}
void GeluFwd(const float* x, const float* up, float* out, int64_t n) {
  kAvx2Table.gelu(x, up, out, n);
}
void AttentionFwd(const AttentionArgs& a, int32_t kvh_begin, int32_t kvh_end, float* scratch) {
  kAvx2Table.attention(a, kvh_begin, kvh_end, scratch);
}
void AttentionDecodePartFwd(const AttentionArgs& a, int64_t slot_begin, int64_t slot_end, float* o,
                            float* m, float* l) {
  kAvx2Table.attention_decode_part(a, slot_begin, slot_end, o, m, l);
}

}  // namespace

const KernelTable kAvx512Table = {"avx512",
                                  PrepareActFwd,
                                  MatMulRowsAvx512,
                                  RmsNormFwd,
                                  SwigluFwd,
                                  GeluFwd,
                                  AttentionFwd,
                                  FmaLoopAvx512,
                                  MatMulRowsExactAvx512,
                                  AttentionDecodePartFwd};

}  // namespace kvforge::kernels::internal
