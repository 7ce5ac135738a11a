// AVX-512 VNNI integer dot products for k-quant weights (q4_k, q5_k) in small batches (decode,
// speculative verification, batched decode below kDequantGemmMinTokens tokens). This
// translation unit alone is compiled with -mavx512f -mavx512bw -mavx512vnni; dispatch.cc offers
// its table only when the CPU reports all three (and the OS saves the zmm state). Everything
// else is the "avx512" table's.
//
// Why: the AVX2 path does, per 32 values of a sub-block and token, maddubs (u8 x s8 pairs to
// int16), madd against the sub-block's scale (pairs to int32) and an add: three ymm operations.
// Here one zmm maddubs covers two sub-blocks (64 values) and vpdpwssd multiplies the int16 pairs
// by their scales and accumulates in one operation: two zmm operations per 64 values instead of
// six ymm ones. The weight codes and scales are unpacked once per super-block and row, shared by
// up to 8 tokens.
//
// Like kernels_avx512.cc it calls no inline function of a shared header (the AVX2 helpers it
// uses are `static inline`, so this unit has its own copies; ctest
// avx512_units_define_no_weak_symbols checks).
#include <cstring>
#include <type_traits>

// First: <immintrin.h> with gcc 12's AVX-512 header warnings silenced (avx512_intrinsics.h).
#include "kernels/avx512_intrinsics.h"
// (kept apart so that include sorting leaves it first)
#include "kernels/avx2_util.h"
#include "kernels/kernels.h"
#include "kernels/kernels_common.h"

namespace kvforge::kernels::internal {
namespace {

constexpr int kQ8KBlockBytes = 292;  // f32 scale, 256 codes, 16 int16 sums
constexpr int kMaxTokens = 8;        // tokens per tile

inline float LoadF16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// One q4_k / q5_k super-block of a row, unpacked for every token of a tile:
//   codes[c]: values 64c .. 64c + 63 as unsigned bytes (sub-blocks 2c and 2c + 1);
//   scales[c]: int16 lanes 0-15 sub-block 2c's scale, 16-31 sub-block 2c + 1's (one per pair
//              of maddubs products, so vpdpwssd applies the right scale to each);
//   mins: int16 lane i = the min of sub-block i / 2 (lanes 16-31 zero), against the activation's
//         16-value sums.
struct SuperBlock {
  __m512i codes[4];
  __m512i scales[4];
  __m512i mins;
  float d, dmin;
};

// Word lane i of the index vector for chunk c: the scale of sub-block 2c (lanes 0-15) or 2c + 1.
inline __m512i ScaleIndex(int c) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(static_cast<short>(2 * c))),
                            _mm256_set1_epi16(static_cast<short>(2 * c + 1)), 1);
}

template <bool kQ5>
inline void Unpack(const uint8_t* wb, const __m512i* scale_index, SuperBlock* s) {
  s->d = LoadF16(wb);
  s->dmin = LoadF16(wb + 2);
  const ScaleMinK4 k4 = UnpackScaleMinK4Words(wb + 4);
  // The 8 scales and the 8 mins as int16, in word lanes 0-7.
  const __m512i sc16 = _mm512_zextsi128_si512(_mm_cvtepu8_epi16(
      _mm_setr_epi32(static_cast<int>(k4.sc[0]), static_cast<int>(k4.sc[1]), 0, 0)));
  const __m128i mn8 = _mm_setr_epi32(static_cast<int>(k4.mn[0]), static_cast<int>(k4.mn[1]), 0, 0);
  s->mins = _mm512_zextsi256_si512(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8)));
  __m256i q[8];
  Q45KCodes<kQ5>(wb, q);
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    s->codes[c] = _mm512_inserti64x4(_mm512_castsi256_si512(q[2 * c]), q[2 * c + 1], 1);
    s->scales[c] = _mm512_permutexvar_epi16(scale_index[c], sc16);
  }
}

// acc += the super-block's dot with one token's q8_K block xb, in 16 float lanes:
//   d * xd * sum_j sc_j * dot(codes_j, x_j) - dmin * xd * sum_j mn_j * sum(x_j).
inline __m512 AddDot(const SuperBlock& s, const uint8_t* xb, __m512 acc) {
  float xd;
  std::memcpy(&xd, xb, 4);
  __m512i sumi = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m512i qx = _mm512_loadu_si512(xb + 4 + 64 * c);
    sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(s.codes[c], qx), s.scales[c]);
  }
  const __m512i bsums =
      _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 4 + 256)));
  const __m512i summ = _mm512_madd_epi16(bsums, s.mins);
  acc = _mm512_fmadd_ps(_mm512_set1_ps(s.d * xd), _mm512_cvtepi32_ps(sumi), acc);
  return _mm512_fnmadd_ps(_mm512_set1_ps(s.dmin * xd), _mm512_cvtepi32_ps(summ), acc);
}

// NT tokens' dot products with one row of nsb super-blocks.
template <bool kQ5, int NT>
inline void DotRow(const uint8_t* row, const uint8_t* const* xs, int64_t nsb, float* out) {
  constexpr int kWBlock = kQ5 ? 176 : 144;
  __m512 acc[NT];
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i scale_index[4] = {ScaleIndex(0), ScaleIndex(1), ScaleIndex(2), ScaleIndex(3)};
  SuperBlock s;
  for (int64_t sb = 0; sb < nsb; ++sb) {
    Unpack<kQ5>(row + sb * kWBlock, scale_index, &s);
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) acc[t] = AddDot(s, xs[t] + sb * kQ8KBlockBytes, acc[t]);
  }
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) out[t] = HSum16(acc[t]);
}

template <bool kQ5, int NT>
void RowsForTokens(const uint8_t* weights, size_t row_bytes, int64_t nsb, const uint8_t* x,
                   size_t x_row, int64_t t0, float* y, int64_t y_stride, int64_t rb, int64_t re) {
  const uint8_t* xs[NT];
  for (int k = 0; k < NT; ++k) xs[k] = x + (t0 + k) * x_row;
  float out[NT];
  for (int64_t r = rb; r < re; ++r) {
    DotRow<kQ5, NT>(weights + static_cast<size_t>(r) * row_bytes, xs, nsb, out);
    for (int k = 0; k < NT; ++k) y[(t0 + k) * y_stride + r] = out[k];
  }
}

template <bool kQ5>
void MatMulK(const uint8_t* weights, size_t row_bytes, int64_t cols, const uint8_t* x,
             int64_t n_tok, float* y, int64_t y_stride, int64_t r0, int64_t r1) {
  const WType w = kQ5 ? WType::kQ5_K : WType::kQ4_K;
  const size_t x_row = PreparedRowBytes(w, cols);
  const int64_t nsb = cols / 256;
  // A block of rows (at most 48 x 144 bytes per 256 values: 216 KiB at 4096 columns) stays in L2
  // while every token tile passes it.
  constexpr int64_t kRowBlock = 48;
  for (int64_t rb = r0; rb < r1; rb += kRowBlock) {
    const int64_t re = rb + kRowBlock < r1 ? rb + kRowBlock : r1;
    int64_t t = 0;
    for (; t + kMaxTokens <= n_tok; t += kMaxTokens)
      RowsForTokens<kQ5, kMaxTokens>(weights, row_bytes, nsb, x, x_row, t, y, y_stride, rb, re);
    switch (n_tok - t) {
#define KVF_TAIL(n)                                                                   \
  case n:                                                                             \
    RowsForTokens<kQ5, n>(weights, row_bytes, nsb, x, x_row, t, y, y_stride, rb, re); \
    break;
      KVF_TAIL(1)
      KVF_TAIL(2)
      KVF_TAIL(3)
      KVF_TAIL(4)
      KVF_TAIL(5)
      KVF_TAIL(6)
      KVF_TAIL(7)
#undef KVF_TAIL
      default:
        break;
    }
  }
}

// Large batches arrive as floats (ActFormatFor): quantized here to q8_K, as prepare_act does,
// into [n_tok][PreparedRowBytes(w, cols)] bytes of thread scratch. Once per call: with a static
// split of the rows that is once per thread, ~2% of a 2048 x 2048 x 512 matmul.
const uint8_t* QuantizeBatch(WType w, const uint8_t* x, int64_t cols, int64_t n_tok) {
  const size_t x_row = PreparedRowBytes(w, cols);
  uint8_t* q = ThreadScratchBytes(x_row * static_cast<size_t>(n_tok));
  for (int64_t t = 0; t < n_tok; ++t)
    kAvx512Table.prepare_act(w, reinterpret_cast<const float*>(x) + t * cols, q + t * x_row, cols);
  return q;
}

void MatMulRowsVnni(WType w, const uint8_t* weights, size_t row_bytes, int64_t cols,
                    const uint8_t* x, int64_t n_tok, float* y, int64_t y_stride, int64_t r0,
                    int64_t r1) {
  if (w == WType::kQ4_K || w == WType::kQ5_K) {
    // The integer tiles outrun the packed GEMM's dequantized f32 ones at every batch size
    // (one thread, 768 x 768 q4_k: 117 GFLOP/s at 16 tokens against the packed GEMM's 92-95 at
    // 128), so large batches take them too, on activations quantized like a small batch's.
    const uint8_t* xq = UsesPackedGemm(w, n_tok) ? QuantizeBatch(w, x, cols, n_tok) : x;
    if (w == WType::kQ4_K)
      return MatMulK<false>(weights, row_bytes, cols, xq, n_tok, y, y_stride, r0, r1);
    return MatMulK<true>(weights, row_bytes, cols, xq, n_tok, y, y_stride, r0, r1);
  }
  kAvx512Table.matmul_rows(w, weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
}

// The rest is the AVX-512 table's (constant-initialized forwarders, as there).
void PrepareActFwd(WType w, const float* x, void* dst, int64_t cols) {
  kAvx512Table.prepare_act(w, x, dst, cols);
}
void RmsNormFwd(const float* x, const float* weight, float* out, int64_t n, float eps) {
  kAvx512Table.rms_norm(x, weight, out, n, eps);
}
void SwigluFwd(const float* gate, const float* up, float* out, int64_t n) {
  kAvx512Table.swiglu(gate, up, out, n);
}
void GeluFwd(const float* x, const float* up, float* out, int64_t n) {
  kAvx512Table.gelu(x, up, out, n);
}
void AttentionFwd(const AttentionArgs& a, int32_t kvh_begin, int32_t kvh_end, float* scratch) {
  kAvx512Table.attention(a, kvh_begin, kvh_end, scratch);
}
void AttentionDecodePartFwd(const AttentionArgs& a, int64_t slot_begin, int64_t slot_end, float* o,
                            float* m, float* l) {
  kAvx512Table.attention_decode_part(a, slot_begin, slot_end, o, m, l);
}
int64_t FmaLoopFwd(int64_t iterations) { return kAvx512Table.fma_loop(iterations); }
void MatMulRowsExactVnni(WType w, const uint8_t* weights, size_t row_bytes, int64_t cols,
                         const uint8_t* x, int64_t n_tok, float* y, int64_t y_stride, int64_t r0,
                         int64_t r1) {
  // Only float weights round activations (kernels_avx512.cc); the integer paths are the same.
  if (w == WType::kF32 || w == WType::kF16 || w == WType::kBF16)
    return kAvx512Table.matmul_rows_exact(w, weights, row_bytes, cols, x, n_tok, y, y_stride, r0,
                                          r1);
  MatMulRowsVnni(w, weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
}

}  // namespace

const KernelTable kAvx512VnniTable = {
    "avx512vnni", PrepareActFwd, MatMulRowsVnni, RmsNormFwd,          SwigluFwd,
    GeluFwd,      AttentionFwd,  FmaLoopFwd,     MatMulRowsExactVnni, AttentionDecodePartFwd};

}  // namespace kvforge::kernels::internal
