// AVX512_BF16 matmul for bf16 weights in batches of 3 tokens or more (prefill,
// batched decode): vdpbf16ps multiplies 32 bf16 pairs and accumulates them into 16 f32 lanes,
// so the weights are used as they are stored (no bf16 -> f32 widening) and each instruction does
// twice the multiply-adds of an f32 FMA. The activations are rounded to bf16 once per call (round
// to nearest even), as ggml does for bf16 weights: each product is then off by up to 2^-8 of
// |w x| (RoundsBatchActivationsToBf16). This translation unit alone is compiled with -mavx512f
// -mavx512bw -mavx512bf16; kernels_avx512.cc calls it only when CpuHasAvx512Bf16().
//
// Like the other AVX-512 units it instantiates no inline function of a shared header (ctest
// avx512_units_define_no_weak_symbols): plain loops, malloc, no standard templates.
#include <cstdlib>
#include <cstring>

// First: <immintrin.h> with gcc 12's AVX-512 header warnings silenced (avx512_intrinsics.h).
#include "kernels/avx512_intrinsics.h"
// (kept apart so that include sorting leaves it first)
#include "kernels/kernels_common.h"

namespace kvforge::kernels::internal {
namespace {

constexpr int kRows = 6;  // weight rows per tile
constexpr int kToks = 4;  // tokens per tile: 24 accumulators, 6 weight and 1 activation register

// A thread's bf16 copy of a call's activations, [n_tok][padded] (padded: cols rounded up to 32,
// zero-filled), kept between calls; freed when the thread ends.
class Bf16Activations {
 public:
  ~Bf16Activations() { std::free(data_); }
  uint16_t* Get(size_t values) {
    if (values > capacity_) {
      std::free(data_);
      data_ = static_cast<uint16_t*>(std::aligned_alloc(64, (values * 2 + 63) / 64 * 64));
      capacity_ = data_ != nullptr ? values : 0;
    }
    return data_;
  }

 private:
  uint16_t* data_ = nullptr;
  size_t capacity_ = 0;
};

thread_local Bf16Activations t_activations;

// x[cols] -> out[padded] as bf16, round to nearest even, zeros past cols.
void RoundRowToBf16(const float* x, int64_t cols, int64_t padded, uint16_t* out) {
  for (int64_t i = 0; i < padded; i += 32) {
    const int64_t left = cols - i;
    const __mmask16 lo = left >= 16 ? 0xFFFF : (left > 0 ? (1u << left) - 1 : 0);
    const __mmask16 hi = left >= 32 ? 0xFFFF : (left > 16 ? (1u << (left - 16)) - 1 : 0);
    const __m512 a = _mm512_maskz_loadu_ps(lo, x + i);
    const __m512 b = _mm512_maskz_loadu_ps(hi, x + i + 16);
    _mm512_storeu_si512(out + i, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b, a)));
  }
}

// 32 bf16 weights of a row from value i; `n` < 32 of them (zeros after) for the last step.
inline __m512bh LoadWeights(const uint8_t* row, int64_t i, int64_t n) {
  if (n >= 32) return reinterpret_cast<__m512bh>(_mm512_loadu_si512(row + 2 * i));
  const __mmask32 m = (1u << n) - 1;
  return reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(m, row + 2 * i));
}

// out[r * T + t] = dot(row r, x_t) for R rows and T tokens; one accumulator per output and the
// same reduction whatever R and T, so an output does not depend on the tile that computed it.
template <int R, int T>
void DotTileBf16(const uint8_t* row0, size_t row_bytes, const uint16_t* const* xs, int64_t cols,
                 float* out /* [R][T] */) {
  __m512 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < cols; i += 32) {
    const int64_t n = cols - i;
    __m512bh w[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) w[r] = LoadWeights(row0 + static_cast<size_t>(r) * row_bytes, i, n);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512bh x = reinterpret_cast<__m512bh>(_mm512_loadu_si512(xs[t] + i));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], w[r], x);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) out[r * T + t] = HSum16(acc[r][t]);
}

// Tokens [t, t + T) against rows [rb, re): full tiles, then single rows.
template <int T>
void RowBlockTokens(const uint8_t* weights, size_t row_bytes, int64_t cols,
                    const uint16_t* const* xs, float* y, int64_t y_stride, int64_t t, int64_t rb,
                    int64_t re) {
  float out[kRows * T];
  int64_t r = rb;
  for (; r + kRows <= re; r += kRows) {
    DotTileBf16<kRows, T>(weights + static_cast<size_t>(r) * row_bytes, row_bytes, xs, cols, out);
    for (int q = 0; q < kRows; ++q)
      for (int k = 0; k < T; ++k) y[(t + k) * y_stride + r + q] = out[q * T + k];
  }
  for (; r < re; ++r) {
    DotTileBf16<1, T>(weights + static_cast<size_t>(r) * row_bytes, row_bytes, xs, cols, out);
    for (int k = 0; k < T; ++k) y[(t + k) * y_stride + r] = out[k];
  }
}

template <int T>
void TokenTile(const uint8_t* weights, size_t row_bytes, int64_t cols, const uint16_t* xb,
               int64_t padded, float* y, int64_t y_stride, int64_t t, int64_t rb, int64_t re) {
  const uint16_t* xs[T];
  for (int k = 0; k < T; ++k) xs[k] = xb + (t + k) * padded;
  RowBlockTokens<T>(weights, row_bytes, cols, xs, y, y_stride, t, rb, re);
}

}  // namespace

bool MatMulBf16Dot(const uint8_t* weights, size_t row_bytes, int64_t cols, const float* x,
                   int64_t n_tok, float* y, int64_t y_stride, int64_t r0, int64_t r1) {
  const int64_t padded = (cols + 31) / 32 * 32;
  uint16_t* xb = t_activations.Get(static_cast<size_t>(n_tok * padded));  // [n_tok][padded]
  if (xb == nullptr) return false;
  for (int64_t t = 0; t < n_tok; ++t) RoundRowToBf16(x + t * cols, cols, padded, xb + t * padded);
  const int64_t row_block = L2RowBlock(row_bytes, kRows);  // stays in L2 for every tile
  for (int64_t rb = r0; rb < r1; rb += row_block) {
    const int64_t re = rb + row_block < r1 ? rb + row_block : r1;
    int64_t t = 0;
    for (; t + kToks <= n_tok; t += kToks)
      TokenTile<kToks>(weights, row_bytes, cols, xb, padded, y, y_stride, t, rb, re);
    switch (n_tok - t) {
      case 3:
        TokenTile<3>(weights, row_bytes, cols, xb, padded, y, y_stride, t, rb, re);
        break;
      case 2:
        TokenTile<2>(weights, row_bytes, cols, xb, padded, y, y_stride, t, rb, re);
        break;
      case 1:
        TokenTile<1>(weights, row_bytes, cols, xb, padded, y, y_stride, t, rb, re);
        break;
      default:
        break;
    }
  }
  return true;
}

}  // namespace kvforge::kernels::internal
